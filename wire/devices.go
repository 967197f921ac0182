package wire

// Device management (extension): any paired device can list the paired
// devices, rename one and revoke one (a lost phone is cut off from any
// other). Every request is answered with a fresh device_list_response
// under the request's id.
const (
	TypeDeviceList         = "device_list"
	TypeDeviceListResponse = "device_list_response"
	TypeDeviceRename       = "device_rename"
	TypeDeviceRevoke       = "device_revoke"

	// CodeDeviceNotFound answers a request naming a device that was never
	// paired.
	CodeDeviceNotFound = "DEVICE_NOT_FOUND"
)

// DeviceRequest is the payload of device_rename and device_revoke.
type DeviceRequest struct {
	DeviceID string `json:"device_id"`
	Name     string `json:"name"`
}

// DeviceInfo is one device of a device_list_response.
type DeviceInfo struct {
	DeviceID      string `json:"device_id"`
	Name          string `json:"name"`
	Platform      string `json:"platform"`
	ClientVersion string `json:"client_version"`
	PairedAt      string `json:"paired_at"`
	LastSeen      string `json:"last_seen,omitempty"`
	RevokedAt     string `json:"revoked_at,omitempty"`
	Revoked       bool   `json:"revoked"`
	// Current marks the device this connection belongs to.
	Current bool `json:"current"`
	// Online is true while the device has a live connection to this daemon.
	Online bool `json:"online"`
}

// DeviceList is the payload of device_list_response.
type DeviceList struct {
	Devices []DeviceInfo `json:"devices"`
}
