package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Connection message types: auth, its answer, heartbeats and the health
// check.
const (
	TypeAuth                   = "auth"
	TypeConnectionAck          = "connection_ack"
	TypeConnectionError        = "connection_error"
	TypeHeartbeatPing          = "heartbeat_ping"
	TypeHeartbeatPong          = "heartbeat_pong"
	TypeHealthCheck            = "health_check"
	TypeHealthStatus           = "health_status"
	TypeAcknowledgeWarning     = "acknowledge_warning"
	TypeAcknowledgmentAccepted = "acknowledgment_accepted"
)

// Auth is the payload of "auth", the first frame a client sends.
type Auth struct {
	// Token is a pairing code (first connect) or a device token.
	Token string `json:"token"`
	// ClientVersion and Platform are recorded on the device.
	ClientVersion string `json:"client_version,omitempty"`
	Platform      string `json:"platform,omitempty"`
	// ProtocolVersion, "MAJOR.MINOR", is optional; a different major
	// version than ProtocolVersion is refused.
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// DeviceName names the device on first pairing (extension).
	DeviceName string `json:"device_name,omitempty"`
	// LastSeq asks for a replay of the session events after it.
	LastSeq *int64 `json:"last_seq,omitempty"`
	// Capabilities are what the client can do beyond the spec
	// (extension): CapHookApprovals.
	Capabilities []string `json:"capabilities,omitempty"`
	// Purpose is the ReCursor app's: PurposePrimary for the connection it
	// keeps, "probe" for a connection test.
	Purpose string `json:"purpose,omitempty"`
}

// PurposePrimary marks the one connection a client keeps per device: a new
// one takes over from an older one of the same device (extension).
const PurposePrimary = "primary"

// Capabilities a client may announce at auth (extension).
const (
	// CapHookApprovals says the client answers approvals whose source is
	// "hooks" (Claude Code in a terminal waits only for such clients).
	CapHookApprovals = "hook_approvals"
	// CapHistoryPages says the client loads sessions' history itself, a
	// page at a time (session_history): without last_seq its stream starts
	// at the log's head, not after the device's cursor.
	CapHistoryPages = "history_pages"
)

// ParseVersion reads "MAJOR.MINOR" or "MAJOR.MINOR.PATCH" (an optional
// leading "v" and any "-pre"/"+build" suffix are allowed) into its numbers.
func ParseVersion(s string) ([3]int, error) {
	var v [3]int
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("version %q is not MAJOR.MINOR[.PATCH]", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("version %q is not MAJOR.MINOR[.PATCH]", s)
		}
		v[i] = n
	}
	return v, nil
}

// SessionSummary describes one live session in connection_ack.
type SessionSummary struct {
	SessionID        string `json:"session_id"`
	Agent            string `json:"agent"`
	Title            string `json:"title"`
	Status           string `json:"status"`
	WorkingDirectory string `json:"working_directory,omitempty"`
	Source           string `json:"source,omitempty"`
	// Mode is a terminal session's mode, as in session_status (extension).
	Mode string `json:"mode,omitempty"`
	// Usage is what the session's turns used so far (extension); absent
	// before its first turn.
	Usage *UsageTotals `json:"usage,omitempty"`
	// Model, PermissionMode and MaxThinkingTokens are the settings its
	// agent runs with (extension); empty or zero: the agent's default.
	Model             string `json:"model,omitempty"`
	PermissionMode    string `json:"permission_mode,omitempty"`
	MaxThinkingTokens int    `json:"max_thinking_tokens,omitempty"`
}

// ConnectionAck is the payload of "connection_ack".
type ConnectionAck struct {
	ServerVersion              string           `json:"server_version"`
	ProtocolVersion            string           `json:"protocol_version"`
	SupportedAgents            []string         `json:"supported_agents"`
	ConnectionMode             string           `json:"connection_mode"`
	ConnectionModeDescription  string           `json:"connection_mode_description"`
	BridgeURL                  string           `json:"bridge_url"`
	RequiresHealthVerification bool             `json:"requires_health_verification"`
	ActiveSessions             []SessionSummary `json:"active_sessions"`
	// PendingApprovals are the approval_required payloads still waiting
	// for an answer (extension).
	PendingApprovals []json.RawMessage `json:"pending_approvals"`
	DeviceID         string            `json:"device_id"`
	DeviceName       string            `json:"device_name"`
	// DeviceToken is present only when this auth paired a new device with
	// a one-time code: the client keeps it and authenticates with it from
	// then on.
	DeviceToken string `json:"device_token,omitempty"`
	// StreamAfter is the seq after which this connection's events come,
	// replayed or live (extension): a client resuming later sends it as
	// last_seq if it saw no event since.
	StreamAfter int64 `json:"stream_after"`
}

// ConnectionError is the payload of "connection_error", sent before the
// connection is closed.
type ConnectionError struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	Remediation string `json:"remediation,omitempty"`
}

// HealthCheck is the payload of "health_check".
type HealthCheck struct {
	Timestamp          string   `json:"timestamp,omitempty"`
	ClientNonce        string   `json:"client_nonce,omitempty"`
	ClientCapabilities []string `json:"client_capabilities,omitempty"`
}

// HealthChecks are the individual results in health_status.
type HealthChecks struct {
	TLSValid          bool `json:"tls_valid"`
	ClockSync         bool `json:"clock_sync"`
	VersionCompatible bool `json:"version_compatible"`
	TokenPermissions  bool `json:"token_permissions"`
}

// HealthStatus is the payload of "health_status".
type HealthStatus struct {
	Status                 string            `json:"status"`
	ConnectionMode         string            `json:"connection_mode"`
	Warnings               []string          `json:"warnings"`
	WarningDetails         map[string]string `json:"warning_details,omitempty"`
	Checks                 HealthChecks      `json:"checks"`
	ServerTimestamp        string            `json:"server_timestamp"`
	ClientNonce            string            `json:"client_nonce,omitempty"`
	ClockSkewMS            *int64            `json:"clock_skew_ms,omitempty"`
	LatencyMS              *int64            `json:"latency_ms,omitempty"`
	CertificateExpires     string            `json:"certificate_expires,omitempty"`
	Ready                  bool              `json:"ready"`
	RequiresAcknowledgment bool              `json:"requires_acknowledgment"`
}

// Warning codes of health_status.
const (
	WarnDirectPublic  = "DIRECT_PUBLIC_CONNECTION"
	WarnNoTLS         = "TLS_DISABLED"
	WarnCertExpiring  = "CERTIFICATE_EXPIRING"
	WarnClockSkew     = "CLOCK_SKEW"
	WarnClientVersion = "CLIENT_VERSION_UNSUPPORTED"
	WarnDeviceRevoked = "DEVICE_REVOKED"
	// WarnStorageFull: the disk holding the data directory is full and the
	// event log refuses new events (an extension).
	WarnStorageFull = "STORAGE_FULL"
)

// AcknowledgeWarning is the payload of "acknowledge_warning".
type AcknowledgeWarning struct {
	WarningCode    string `json:"warning_code"`
	Acknowledged   bool   `json:"acknowledged"`
	AcknowledgedAt string `json:"acknowledged_at,omitempty"`
}

// AcknowledgmentAccepted is the payload of "acknowledgment_accepted".
type AcknowledgmentAccepted struct {
	WarningCode    string `json:"warning_code"`
	Ready          bool   `json:"ready"`
	SessionTimeout string `json:"session_timeout"`
}

// Heartbeat is the payload of heartbeat_ping and heartbeat_pong; both may
// also come without a payload.
type Heartbeat struct{}
