package bridge

import (
	"errors"
	"fmt"
	"time"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// handler answers one client frame. A *wire.Error it returns is sent to the
// client as a recoverable error echoing the frame's id; any other error is
// logged and reported as BRIDGE_ERROR without its text.
type handler func(c *conn, env wire.Envelope) error

// handlers maps the client message types this server understands.
var handlers map[string]handler

func init() {
	handlers = map[string]handler{
		wire.TypeHeartbeatPing:      (*conn).heartbeat,
		wire.TypeHealthCheck:        (*conn).healthCheck,
		wire.TypeAcknowledgeWarning: (*conn).acknowledgeWarning,
		wire.TypeSessionStart:       (*conn).sessionStart,
		wire.TypeMessage:            (*conn).message,
		wire.TypeSessionEnd:         (*conn).sessionEnd,
		wire.TypeInterrupt:          (*conn).interrupt,
		wire.TypeTerminalHandback:   (*conn).terminalHandback,
		wire.TypeSessionConfigure:   (*conn).sessionConfigure,
		wire.TypeApprovalResponse:   (*conn).approvalResponse,
		wire.TypeNotificationAck:    (*conn).notificationAck,
		wire.TypeFileList:           (*conn).fileList,
		wire.TypeFileRead:           (*conn).fileRead,
		wire.TypeGitStatusRequest:   (*conn).gitStatus,
		wire.TypeGitDiff:            (*conn).gitDiff,
		wire.TypeGitCommit:          (*conn).gitCommit,
		wire.TypeGitLog:             (*conn).gitLog,
		wire.TypeGitShow:            (*conn).gitShow,
		wire.TypeGitBranches:        (*conn).gitBranches,
		wire.TypeGitCheckout:        (*conn).gitCheckout,
		wire.TypeGitBranchCreate:    (*conn).gitBranchCreate,
		wire.TypeGitStage:           (*conn).gitStage,
		wire.TypeGitUnstage:         (*conn).gitUnstage,
		wire.TypeGitDiscard:         (*conn).gitDiscard,
		wire.TypeGitPush:            (*conn).gitPush,
		wire.TypeGitPull:            (*conn).gitPull,
		wire.TypeClaudeEvent:        (*conn).claudeEvent,
		wire.TypeApprovalRules:      (*conn).approvalRules,
		wire.TypeApprovalRulesClear: (*conn).approvalRules,
		wire.TypeSessionHistory:     (*conn).sessionHistory,
		wire.TypeHistoryProjects:    (*conn).historyProjects,
		wire.TypeHistoryList:        (*conn).historyList,
		wire.TypeHistoryRead:        (*conn).historyRead,
		wire.TypeHistoryResume:      (*conn).historyResume,
		wire.TypeDeviceList:         (*conn).deviceList,
		wire.TypeDeviceRename:       (*conn).deviceRename,
		wire.TypeDeviceRevoke:       (*conn).deviceRevoke,
		wire.TypePushConfig:         (*conn).pushConfig,
		wire.TypePushSubscribe:      (*conn).pushSubscribe,
		wire.TypePushUnsubscribe:    (*conn).pushUnsubscribe,
		wire.TypeRunStart:           (*conn).runStart,
		wire.TypeRunList:            (*conn).runList,
		wire.TypeRunMessages:        (*conn).runMessages,
		wire.TypeRunSend:            (*conn).runSend,
		wire.TypeRunStop:            (*conn).runStop,
		wire.TypeRunStatus:          (*conn).runStatus,
	}
}

// slowTypes are the requests that may take long (a hung git, a large
// file): they run off the connection's read loop, so that heartbeats and
// approvals keep flowing, at most MaxRequests at once a connection, and
// end with it (their context is the connection's).
var slowTypes = map[string]bool{
	wire.TypeFileList: true, wire.TypeFileRead: true,
	wire.TypeGitStatusRequest: true, wire.TypeGitDiff: true, wire.TypeGitCommit: true,
	wire.TypeSessionHistory: true, wire.TypeGitLog: true, wire.TypeGitShow: true,
	wire.TypeGitBranches: true, wire.TypeGitCheckout: true, wire.TypeGitBranchCreate: true, wire.TypeGitStage: true,
	wire.TypeGitUnstage: true, wire.TypeGitDiscard: true, wire.TypeGitPush: true, wire.TypeGitPull: true, wire.TypeClaudeEvent: true,
	// It waits for the agent to apply the settings.
	wire.TypeSessionConfigure: true,
	// They read the agents' files and the store.
	wire.TypeHistoryProjects: true, wire.TypeHistoryList: true, wire.TypeHistoryRead: true, wire.TypeHistoryResume: true,
	// They start sandboxes, or read a run's whole stream.
	wire.TypeRunStart: true, wire.TypeRunList: true, wire.TypeRunMessages: true, wire.TypeRunStatus: true, wire.TypeRunStop: true, wire.TypeRunSend: true,
}

// MaxRequests is how many slow requests a connection may have running.
const MaxRequests = 4

// allowedBeforeAcknowledgment are the types a direct_public connection may
// send before it has acknowledged the warning.
var allowedBeforeAcknowledgment = map[string]bool{
	wire.TypeHeartbeatPing:      true,
	wire.TypeHealthCheck:        true,
	wire.TypeAcknowledgeWarning: true,
}

func (c *conn) dispatch(data []byte) {
	env, err := wire.Decode(data)
	if err != nil {
		c.replyError(env.ID, err)
		return
	}
	h, ok := handlers[env.Type]
	if !ok {
		c.sendError(env.ID, wire.CodeUnknownType, fmt.Sprintf("unknown message type %q", env.Type), true)
		return
	}
	if c.class.Mode == pairing.ModeDirectPublic && !c.acknowledged() && !allowedBeforeAcknowledgment[env.Type] {
		c.sendError(env.ID, wire.CodeAcknowledgmentRequired,
			"This is a direct public connection: acknowledge the DIRECT_PUBLIC_CONNECTION warning first", true)
		return
	}
	if slowTypes[env.Type] {
		if c.isClosing() {
			return // nobody would read the answer
		}
		select {
		case c.slots <- struct{}{}:
		default:
			c.sendError(env.ID, wire.CodeRateLimited, fmt.Sprintf("%d requests are already running on this connection: wait for their answers", MaxRequests), true)
			return
		}
		go func() {
			defer func() { <-c.slots }()
			if err := h(c, env); err != nil {
				c.replyError(env.ID, err)
			}
			c.answered.Add(1)
		}()
		return
	}
	if err := h(c, env); err != nil {
		c.replyError(env.ID, err)
	}
}

// diskFull tells a phone that the daemon's disk is full.
const diskFull = "The disk holding the daemon's data directory is full: new messages and agent output are refused until space is freed. Nothing stored before is lost."

func (c *conn) replyError(id string, err error) {
	var we *wire.Error
	if errors.As(err, &we) {
		c.sendError(id, we.Code, we.Message, true)
		return
	}
	c.s.Logger.Error("handling a request", "device", c.deviceID(), "err", err)
	if store.IsFull(err) {
		c.sendError(id, wire.CodeBridgeError, diskFull, true)
		return
	}
	c.sendError(id, wire.CodeBridgeError, "internal error; see the daemon's log", true)
}

func (c *conn) heartbeat(env wire.Envelope) error {
	c.send(wire.TypeHeartbeatPong, env.ID, wire.Heartbeat{})
	return nil
}

func (c *conn) healthCheck(env wire.Envelope) error {
	var hc wire.HealthCheck
	if err := wire.DecodePayload(env, &hc); err != nil {
		return err
	}
	now := c.s.now()
	st := wire.HealthStatus{
		ConnectionMode:  c.class.Mode,
		Warnings:        []string{},
		WarningDetails:  map[string]string{},
		ServerTimestamp: wire.Timestamp(now),
		ClientNonce:     hc.ClientNonce,
	}
	warn := func(code, detail string) {
		st.Warnings = append(st.Warnings, code)
		st.WarningDetails[code] = detail
	}

	// TLS in use, and the certificate not near its end.
	switch cert := c.s.leaf(); {
	case !c.tls:
		warn(wire.WarnNoTLS, "This connection is not encrypted; that is accepted only from this machine.")
	case cert == nil:
		st.Checks.TLSValid = true
	default:
		st.CertificateExpires = cert.NotAfter.UTC().Format(time.RFC3339)
		left := cert.NotAfter.Sub(now)
		st.Checks.TLSValid = now.After(cert.NotBefore) && left > CertExpiryWarning
		if !st.Checks.TLSValid {
			warn(wire.WarnCertExpiring, fmt.Sprintf("The server certificate is valid until %s; restart the daemon to renew it.", st.CertificateExpires))
		}
	}

	// The client's clock against ours.
	ts := hc.Timestamp
	if ts == "" {
		ts = env.Timestamp
	}
	if t, zoned, err := wire.ParseTimestamp(ts); err == nil {
		skew := now.Sub(t)
		ms := skew.Milliseconds()
		st.ClockSkewMS = &ms
		st.Checks.ClockSync = skew.Abs() <= ClockSkewLimit
		if !st.Checks.ClockSync {
			detail := fmt.Sprintf("The client's clock is %s away from the daemon's.", skew.Abs().Round(time.Second))
			if !zoned {
				detail += " The client's timestamp had no time zone and was read as UTC."
			}
			warn(wire.WarnClockSkew, detail)
		}
	} else {
		warn(wire.WarnClockSkew, "The request carried no readable timestamp, so the clocks could not be compared.")
	}

	// The client's version (the protocol's major version was checked at auth).
	st.Checks.VersionCompatible = c.versionCompatible()
	if !st.Checks.VersionCompatible {
		warn(wire.WarnClientVersion, fmt.Sprintf("Client version %q is older than %s or not a version.", c.clientVersion, c.s.MinClientVersion))
	}

	// The device's token still grants access: the device exists and is not
	// revoked.
	if d := c.device.Load(); d != nil {
		cur, err := c.s.Store.Device(c.ctx, d.ID)
		st.Checks.TokenPermissions = err == nil && cur.RevokedAt == nil
		if !st.Checks.TokenPermissions {
			warn(wire.WarnDeviceRevoked, "This device's access has been revoked.")
		}
	}

	if c.s.Events != nil && c.s.Events.Full() != nil {
		warn(wire.WarnStorageFull, diskFull)
	}

	if c.class.Mode == pairing.ModeDirectPublic && !c.acknowledged() {
		warn(wire.WarnDirectPublic, "Connection is over the public internet without a tunnel. Certificate validation is required.")
		st.RequiresAcknowledgment = true
	}
	if rtt := c.rtt.Load(); rtt > 0 {
		ms := time.Duration(rtt).Milliseconds()
		st.LatencyMS = &ms
	}
	st.Ready = !st.RequiresAcknowledgment && st.Checks.TokenPermissions
	st.Status = "healthy"
	if len(st.Warnings) > 0 {
		st.Status = "warning"
	}
	if len(st.WarningDetails) == 0 {
		st.WarningDetails = nil
	}
	c.send(wire.TypeHealthStatus, env.ID, st)
	return nil
}

// acknowledged reports whether this connection's device has acknowledged
// the direct public connection warning within SessionTimeout.
func (c *conn) acknowledged() bool {
	until, ok := c.s.acks.Load(c.deviceID())
	return ok && c.s.now().UnixNano() < until.(int64)
}

func (c *conn) versionCompatible() bool {
	if c.clientVersion == "" {
		return true
	}
	v, err := wire.ParseVersion(c.clientVersion)
	if err != nil {
		return false
	}
	minV, err := wire.ParseVersion(c.s.MinClientVersion)
	if err != nil {
		return true
	}
	for i := range v {
		if v[i] != minV[i] {
			return v[i] > minV[i]
		}
	}
	return true
}

// SessionTimeout is how long a device's acknowledgment of a direct public
// connection holds, for all its connections, while the daemon runs.
const SessionTimeout = 8 * time.Hour

func (c *conn) acknowledgeWarning(env wire.Envelope) error {
	var a wire.AcknowledgeWarning
	if err := wire.DecodePayload(env, &a); err != nil {
		return err
	}
	if a.WarningCode != wire.WarnDirectPublic || !a.Acknowledged {
		return wire.Errorf(wire.CodeInvalidMessage, "only %s can be acknowledged, with acknowledged: true", wire.WarnDirectPublic)
	}
	if c.class.Mode != pairing.ModeDirectPublic {
		return wire.Errorf(wire.CodeInvalidMessage, "this connection (%s) has no warning to acknowledge", c.class.Mode)
	}
	c.s.acks.Store(c.deviceID(), c.s.now().Add(SessionTimeout).UnixNano())
	c.send(wire.TypeAcknowledgmentAccepted, env.ID, wire.AcknowledgmentAccepted{
		WarningCode: wire.WarnDirectPublic, Ready: true, SessionTimeout: "8h",
	})
	return nil
}
