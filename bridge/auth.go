package bridge

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// authenticate reads the WebSocket's first frame, which must be a valid
// auth within AuthTimeout, answers it and starts the event stream. It
// reports whether the connection is authenticated.
func (c *conn) authenticate() bool {
	mt, data, err := c.ws.ReadMessage()
	if err != nil {
		if isTimeout(err) {
			c.fail(wire.TypeConnectionError, wire.CodeAuthFailed, "No auth message within "+c.s.AuthTimeout.String(), websocket.ClosePolicyViolation)
		} else {
			c.logReadError(err)
			c.closeWith(websocket.CloseNormalClosure, "")
		}
		return false
	}
	if mt != websocket.TextMessage {
		c.fail(wire.TypeConnectionError, wire.CodeAuthFailed, "The first message must be auth", websocket.ClosePolicyViolation)
		return false
	}
	after, ok := c.auth(data, nil, c.writeNow)
	if !ok {
		return false
	}
	// A first ping right behind the ack, so health_check can report a
	// measured round-trip time.
	c.enqueueKeepalive()
	c.startStream(after)
	c.readAt(time.Now())
	return true
}

// auth answers an auth frame, whatever carried it, with connection_ack or
// connection_error (then closing). It reports whether the device is
// authenticated and after which seq its stream starts (startStream).
// resume, when set, is a last_seq the transport carried beside the frame
// (Last-Event-ID); it wins over the frame's. The ack goes to ack
// (enqueue, or writeNow when the caller may write to the transport).
func (c *conn) auth(data []byte, resume *int64, ack func([]byte)) (after int64, ok bool) {
	env, err := wire.Decode(data)
	if err != nil || env.Type != wire.TypeAuth {
		c.fail(wire.TypeConnectionError, wire.CodeAuthFailed, "The first message must be auth", websocket.ClosePolicyViolation)
		return 0, false
	}
	now := c.s.now()
	var a wire.Auth
	if err := wire.DecodePayload(env, &a); err != nil {
		c.authFailed(env.ID, now, "Malformed auth: "+err.(*wire.Error).Message)
		return 0, false
	}
	if a.ProtocolVersion != "" {
		v, err := wire.ParseVersion(a.ProtocolVersion)
		own, _ := wire.ParseVersion(wire.ProtocolVersion)
		if err != nil || v[0] != own[0] {
			c.failID(env.ID, wire.CodeVersionIncompatible,
				"This daemon speaks protocol "+wire.ProtocolVersion+"; the client speaks "+a.ProtocolVersion)
			return 0, false
		}
	}
	// Labels the phone chooses are shown in terminals: no escape sequences.
	a.DeviceName, a.Platform, a.ClientVersion = pairing.CleanLabel(a.DeviceName), pairing.CleanLabel(a.Platform), pairing.CleanLabel(a.ClientVersion)
	res, err := c.s.Pairer.Authenticate(c.ctx, a.Token, pairing.Client{
		Name: a.DeviceName, Platform: a.Platform, ClientVersion: a.ClientVersion, Addr: c.peer.String(),
	})
	var af *pairing.ErrAuthFailed
	switch {
	case errors.As(err, &af):
		c.s.Logger.Info("auth failed", "remote", c.peer, "reason", af.Reason)
		c.authFailed(env.ID, now, "Invalid or expired token")
		return 0, false
	case err != nil:
		c.s.Logger.Error("auth", "err", err)
		c.failID(env.ID, wire.CodeBridgeError, "The daemon could not check the token; try again")
		return 0, false
	}
	dev := res.Device
	c.s.seen(store.Sighting{Device: dev.ID, At: now, Addr: c.peer.String(), ClientVersion: a.ClientVersion, Platform: a.Platform})
	c.clientVersion = a.ClientVersion
	c.hookAnswers.Store(slices.Contains(a.Capabilities, wire.CapHookApprovals))
	c.device.Store(&dev)
	// A revocation that came after the token was checked and before the
	// device was named here missed this connection: it ends now. (The
	// store, then the mark: one or the other sees the revocation.)
	if _, closed := c.s.closedDevices.Load(dev.ID); closed {
		c.failID(env.ID, wire.CodeAuthFailed, "This device has been revoked")
		return 0, false
	}
	if a.Purpose == wire.PurposePrimary {
		c.primary.Store(true)
		c.s.takeOver(c, dev.ID)
	}
	if res.NewToken != "" {
		c.s.Logger.Info("device paired", "device", dev.ID, "name", dev.Name, "remote", c.peer)
	} else {
		c.s.Logger.Info("device connected", "device", dev.ID, "remote", c.peer, "mode", c.class.Mode)
	}
	if resume != nil {
		a.LastSeq = resume
	}
	after = c.streamStart(a.LastSeq, res.NewToken != "", slices.Contains(a.Capabilities, wire.CapHistoryPages))
	// The ack's reads are short reads on the store's read-only connection,
	// which in WAL mode never waits for the writer: they are not
	// cancellable, which spares database/sql and the SQLite driver a
	// goroutine each per query (more than half of a short query's cost:
	// store.BenchmarkQuickRead).
	quick := context.WithoutCancel(c.ctx)
	sessions, err := c.s.Sessions.Summaries(quick)
	if err != nil {
		c.s.Logger.Error("listing sessions", "err", err)
	}
	pending, err := c.s.Sessions.PendingApprovals(quick)
	if err != nil {
		c.s.Logger.Error("listing pending approvals", "err", err)
	}
	c.sendVia(ack, wire.TypeConnectionAck, env.ID, wire.ConnectionAck{
		ServerVersion:              c.s.Version,
		ProtocolVersion:            wire.ProtocolVersion,
		SupportedAgents:            nonNil(c.s.SupportedAgents),
		ConnectionMode:             c.class.Mode,
		ConnectionModeDescription:  c.class.Description,
		BridgeURL:                  c.s.BridgeURL,
		RequiresHealthVerification: c.class.Mode == pairing.ModeDirectPublic,
		ActiveSessions:             nonNil(sessions),
		PendingApprovals:           nonNil(pending),
		DeviceID:                   dev.ID,
		DeviceName:                 dev.Name,
		DeviceToken:                string(res.NewToken),
		StreamAfter:                after,
	})
	return after, true
}

// authFailed counts a failed attempt against the client's address and
// answers it: AUTH_FAILED, or RATE_LIMITED once the address has failed too
// often. The token is always checked first, so failures from an address
// (someone else behind the same NAT, a stale app) never lock out a valid
// token: tokens and codes are 256-bit secrets, which no rate of guessing
// reaches; the limit keeps floods of bad attempts out of the log and tells
// a misconfigured client why it keeps failing.
func (c *conn) authFailed(id string, now time.Time, message string) {
	if !c.s.Limiter.Allowed(c.peer, now) {
		c.s.Logger.Warn("auth rate limited", "remote", c.peer)
		c.failID(id, wire.CodeRateLimited, "Too many failed attempts; wait and try again")
		return
	}
	c.s.Limiter.Failed(c.peer, now)
	c.failID(id, wire.CodeAuthFailed, message)
}

// failID answers a failed auth with connection_error and closes.
func (c *conn) failID(id, code, message string) {
	c.send(wire.TypeConnectionError, id, wire.ConnectionError{Code: code, Message: message})
	c.closeWith(websocket.ClosePolicyViolation, code)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
