package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// cursorEvery is how often a connection stores the last seq it wrote, for
// clients that reconnect without last_seq.
const cursorEvery = time.Second

// saveCursor stores the last seq written to this device's socket, at most
// every cursorEvery unless force.
func (c *conn) saveCursor(force bool) {
	d := c.device.Load()
	seq := c.written.Load()
	if d == nil || seq <= c.savedSeq || !force && time.Since(c.savedAt) < cursorEvery {
		return
	}
	if err := c.s.Store.SetDeviceCursor(context.Background(), d.ID, seq); err != nil {
		c.s.Logger.Warn("storing the device cursor", "device", d.ID, "err", err)
		return
	}
	c.savedSeq, c.savedAt = seq, time.Now()
	c.s.cursorOf(d.ID).stored.Store(true)
}

// cursor is what the server knows of a device's place in the log.
type cursor struct {
	// written is the last seq written to any connection of the device
	// since the daemon started, or the stored cursor once read, whichever
	// is later.
	written atomic.Int64
	// loaded says the store was read for the device's cursor; stored,
	// that the store holds one (read then, or saved since). Only this
	// daemon writes it, so the store is read once per device.
	loaded, stored atomic.Bool
}

func (s *Server) cursorOf(device string) *cursor {
	v, _ := s.cursors.LoadOrStore(device, &cursor{})
	return v.(*cursor)
}

// wroteTo records that events up to seq were written to a connection of
// device.
func (s *Server) wroteTo(device string, seq int64) { s.cursorOf(device).advance(seq) }

func (c *cursor) advance(seq int64) {
	for {
		old := c.written.Load()
		if seq <= old || c.written.CompareAndSwap(old, seq) {
			return
		}
	}
}

// streamStart decides after which seq the connection's events start:
// after lastSeq when the client sent one; at the log's head for a device
// paired just now or a client that loads history itself (CapHistoryPages);
// else after the last event written to this device before.
func (c *conn) streamStart(lastSeq *int64, fresh, pages bool) int64 {
	if c.s.Events == nil {
		return 0
	}
	if lastSeq != nil {
		return *lastSeq
	}
	after := c.s.Events.Flushed()
	if fresh || pages {
		return after
	}
	// The stored cursor lags by up to cursorEvery, and the device's
	// previous connection may not even have noticed it is gone (a phone
	// that switched networks): what was written to any of its connections
	// counts.
	id := c.device.Load().ID
	cur := c.s.cursorOf(id)
	if !cur.loaded.Load() {
		seq, ok, err := c.s.Store.DeviceCursor(context.WithoutCancel(c.ctx), id)
		if err != nil {
			c.s.Logger.Warn("reading the device cursor", "device", id, "err", err)
			return max(after, cur.written.Load())
		}
		if ok {
			cur.advance(seq)
			cur.stored.Store(true)
		}
		cur.loaded.Store(true)
	}
	if cur.stored.Load() {
		return cur.written.Load()
	}
	return max(after, cur.written.Load())
}

// startStream subscribes the connection to the event log and replays what
// the client missed, after the seq streamStart chose. Unacknowledged
// notifications are sent again first.
func (c *conn) startStream(after int64) {
	if c.s.Events == nil {
		return
	}
	dev := c.device.Load()
	c.sub = c.s.Events.Subscribe(func(e store.Event) bool { return c.enqueueSeq(e.Frame, e.Seq) })
	// Short reads, not cancellable (see conn.auth); the replay is not.
	quick := context.WithoutCancel(c.ctx)
	if first, err := c.s.Store.FirstSeq(quick); err == nil && first > after+1 {
		c.send(wire.TypeReplayGap, "", wire.ReplayGap{RequestedAfter: after, OldestSeq: first})
	}
	pending, err := c.s.Store.PendingNotifications(quick, dev.ID, after)
	if err != nil {
		c.s.Logger.Error("reading pending notifications", "err", err)
	}
	for _, e := range pending {
		frame, err := redelivery(e.Frame)
		if err != nil {
			c.s.Logger.Error("re-encoding a pending notification", "seq", e.Seq, "err", err)
			continue
		}
		if c.enqueueWait(frame, 0) != nil {
			return
		}
	}
	// A notification this device acknowledged never comes back.
	acked, err := c.s.Store.AckedNotificationSeqs(quick, dev.ID, after)
	if err != nil {
		c.s.Logger.Error("reading acknowledged notifications", "err", err)
	}
	notAcked := func(e store.Event) bool { return !acked[e.Seq] }
	if _, err := c.sub.Replay(c.ctx, after, notAcked, func(e store.Event) error { return c.enqueueWait(e.Frame, e.Seq) }); err != nil && c.ctx.Err() == nil {
		c.s.Logger.Warn("replay failed: closing so the client reconnects", "device", dev.ID, "err", err)
		c.closeWith(1013, "replay failed")
	}
}

// redelivery is a logged notification's frame sent again to a device that
// has not acknowledged it: a new delivery, not the old event again, so it
// carries no seq (a client ordering by seq must not see the log go
// backwards) and is marked redelivered.
func redelivery(frame []byte) ([]byte, error) {
	var env wire.Envelope
	if err := json.Unmarshal(frame, &env); err != nil {
		return nil, err
	}
	env.Seq = 0
	env.Redelivered = true
	return json.Marshal(env)
}

// sessionHistory answers a page of a session's logged events, as they were
// sent, for clients that load history on demand (CapHistoryPages).
func (c *conn) sessionHistory(env wire.Envelope) error {
	var p wire.SessionHistory
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	switch {
	case p.SessionID == "":
		return wire.Errorf(wire.CodeInvalidMessage, "session_history needs session_id")
	case p.Limit < 0 || p.Limit > wire.MaxHistoryPage:
		return wire.Errorf(wire.CodeInvalidMessage, "limit must be between 1 and %d", wire.MaxHistoryPage)
	case p.BeforeSeq < 0:
		return wire.Errorf(wire.CodeInvalidMessage, "before_seq must be a seq")
	case p.Limit == 0:
		p.Limit = wire.DefaultHistoryPage
	}
	if _, err := c.s.Store.Session(c.ctx, p.SessionID); errors.Is(err, store.ErrNotFound) {
		return wire.Errorf(wire.CodeSessionNotFound, "no session %q", p.SessionID)
	} else if err != nil {
		return err
	}
	events, more, err := c.s.Store.SessionEvents(c.ctx, p.SessionID, p.BeforeSeq, p.Limit, wire.MaxHistoryBytes)
	if err != nil {
		return err
	}
	out := wire.SessionHistoryResponse{SessionID: p.SessionID, Events: make([]json.RawMessage, len(events)), HasMore: more}
	for i, e := range events {
		out.Events[i] = e.Frame
	}
	c.send(wire.TypeSessionHistoryResp, env.ID, out)
	return nil
}

func (c *conn) sessionStart(env wire.Envelope) error {
	var p wire.SessionStart
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	_, err := c.s.Sessions.Start(c.ctx, session.StartRequest{SessionStart: p, RequestID: env.ID})
	return err
}

func (c *conn) message(env wire.Envelope) error {
	var p wire.Message
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.SessionID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "message needs session_id")
	}
	var from session.Sender
	if d := c.device.Load(); d != nil {
		from = session.Sender{DeviceID: d.ID, DeviceName: d.Name}
	}
	for i := range p.Attachments {
		p.Attachments[i].Name = pairing.CleanLabel(p.Attachments[i].Name)
	}
	return c.s.Sessions.Send(c.ctx, p.SessionID, env.ID, p.Content, p.Attachments, from)
}

func (c *conn) sessionEnd(env wire.Envelope) error {
	var p wire.SessionEnd
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.SessionID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "session_end needs session_id")
	}
	return c.s.Sessions.End(c.ctx, p.SessionID, p.Reason)
}

func (c *conn) interrupt(env wire.Envelope) error {
	var p wire.Interrupt
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.SessionID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "interrupt needs session_id")
	}
	return c.s.Sessions.Interrupt(p.SessionID)
}

// terminalHandback is terminal_handback [extension]: the phone gives a
// `tether claude` session back to its terminal.
func (c *conn) terminalHandback(env wire.Envelope) error {
	var p wire.TerminalHandback
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.SessionID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "terminal_handback needs session_id")
	}
	return c.s.Sessions.HandBack(p.SessionID, p.Interrupt)
}

func (c *conn) sessionConfigure(env wire.Envelope) error {
	var p wire.SessionConfigure
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	var from session.Sender
	if d := c.device.Load(); d != nil {
		from = session.Sender{DeviceID: d.ID, DeviceName: d.Name}
	}
	st, err := c.s.Sessions.Configure(c.ctx, p, from)
	if err != nil {
		return err
	}
	c.send(wire.TypeSessionConfigResp, env.ID, st)
	return nil
}

func (c *conn) approvalResponse(env wire.Envelope) error {
	var p wire.ApprovalResponse
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	return c.s.Sessions.Answer(p)
}

func (c *conn) notificationAck(env wire.Envelope) error {
	var p wire.NotificationAck
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if len(p.NotificationIDs) == 0 {
		return wire.Errorf(wire.CodeInvalidMessage, "notification_ack needs notification_ids")
	}
	_, err := c.s.Store.AckNotifications(c.ctx, c.deviceID(), p.NotificationIDs, c.s.now())
	return err
}

func (c *conn) approvalRules(env wire.Envelope) error {
	var p wire.ApprovalRules
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.SessionID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "session_id is required")
	}
	if env.Type == wire.TypeApprovalRulesClear {
		c.s.Sessions.ClearRules(p.SessionID)
	}
	c.send(wire.TypeApprovalRulesResp, env.ID, wire.ApprovalRules{SessionID: p.SessionID, Rules: nonNil(c.s.Sessions.Rules(p.SessionID))})
	return nil
}
