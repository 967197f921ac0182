package bridge

import (
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// Device management over the protocol [extension]: any paired device can
// list the paired devices, rename one and revoke one (a lost phone is cut
// off from any other). Every request is answered with a fresh
// device_list_response under the request's id.
const (
	TypeDeviceList         = "device_list"
	TypeDeviceListResponse = "device_list_response"
	TypeDeviceRename       = "device_rename"
	TypeDeviceRevoke       = "device_revoke"

	// CodeDeviceNotFound answers a request naming a device that was never
	// paired.
	CodeDeviceNotFound = "DEVICE_NOT_FOUND"

	// MaxDeviceName is the longest device name accepted, in characters.
	MaxDeviceName = pairing.MaxLabel
)

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

// deviceRequest is the payload of device_rename and device_revoke.
type deviceRequest struct {
	DeviceID string `json:"device_id"`
	Name     string `json:"name"`
}

func (c *conn) deviceList(env wire.Envelope) error {
	if err := wire.DecodePayload(env, &struct{}{}); err != nil {
		return err
	}
	return c.sendDeviceList(env.ID)
}

func (c *conn) deviceRename(env wire.Envelope) error {
	var p deviceRequest
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	name := pairing.CleanLabel(p.Name)
	switch {
	case p.DeviceID == "":
		return wire.Errorf(wire.CodeInvalidMessage, "device_id is required")
	case name == "":
		return wire.Errorf(wire.CodeInvalidMessage, "name must not be empty")
	case utf8.RuneCountInString(strings.TrimSpace(p.Name)) > MaxDeviceName:
		return wire.Errorf(wire.CodeInvalidMessage, "name must be at most %d characters", MaxDeviceName)
	}
	if err := c.s.Store.RenameDevice(c.ctx, p.DeviceID, name); err != nil {
		return deviceError(err)
	}
	// The device's live connections sign its messages with the new name.
	for _, other := range c.s.liveConns() {
		if d := other.device.Load(); d != nil && d.ID == p.DeviceID {
			renamed := *d
			renamed.Name = name
			other.device.Store(&renamed)
		}
	}
	return c.sendDeviceList(env.ID)
}

func (c *conn) deviceRevoke(env wire.Envelope) error {
	var p deviceRequest
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.DeviceID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "device_id is required")
	}
	if err := c.s.Store.RevokeDevice(c.ctx, p.DeviceID, c.s.now()); err != nil {
		return deviceError(err)
	}
	c.s.Logger.Info("device revoked", "device", p.DeviceID, "by", c.deviceID())
	if err := c.sendDeviceList(env.ID); err != nil {
		return err
	}
	c.s.CloseDevice(p.DeviceID, "This device has been revoked")
	return nil
}

func deviceError(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return wire.Errorf(CodeDeviceNotFound, "no such device")
	}
	return err
}

func (c *conn) sendDeviceList(id string) error {
	devs, err := c.s.Store.Devices(c.ctx)
	if err != nil {
		return err
	}
	online := map[string]bool{}
	for _, lc := range c.s.liveConns() {
		online[lc.deviceID()] = true
	}
	out := DeviceList{Devices: make([]DeviceInfo, 0, len(devs))}
	for _, d := range devs {
		info := DeviceInfo{
			DeviceID:      d.ID,
			Name:          d.Name,
			Platform:      d.Platform,
			ClientVersion: d.ClientVersion,
			PairedAt:      d.PairedAt.UTC().Format(time.RFC3339),
			Revoked:       d.RevokedAt != nil,
			Current:       d.ID == c.deviceID(),
			Online:        online[d.ID] && d.RevokedAt == nil,
		}
		if !d.LastSeen.IsZero() {
			info.LastSeen = d.LastSeen.UTC().Format(time.RFC3339)
		}
		if d.RevokedAt != nil {
			info.RevokedAt = d.RevokedAt.UTC().Format(time.RFC3339)
		}
		out.Devices = append(out.Devices, info)
	}
	c.send(TypeDeviceListResponse, id, out)
	return nil
}
