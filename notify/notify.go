// Package notify carries the daemon's notifications (an approval waiting, a
// session that failed, a turn that finished while no phone watched) beyond
// the connected phones: to push channels that reach a phone that sleeps.
// A Dispatcher follows the durable event log and hands each notification
// event to every Channel, off the log's writer, with a bounded queue.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// Detail is how much of a notification leaves the machine.
type Detail string

const (
	// DetailSummary (the default) sends the title and a fixed sentence per
	// kind: no command, path, file content or session title, which may
	// quote the user's prompt.
	DetailSummary Detail = "summary"
	// DetailFull sends the notification's body too.
	DetailFull Detail = "full"
)

// Message is one notification as channels send it.
type Message struct {
	ID        string
	SessionID string
	// Kind is the notification_type: approval_required, error,
	// turn_complete, …
	Kind     string
	Title    string
	Body     string
	Priority string // "high", "normal" or "low"
	// URL opens the web client on the session (and its approval).
	URL string
	// Tag names what the notification is about (an approval, a session):
	// a newer one with the same tag replaces it.
	Tag string
	// Withdraw says the notification tagged Tag no longer holds (its
	// approval was answered): channels that can take one back do, and
	// show Title and Body, a quiet notice of the answer, in its place.
	Withdraw bool
}

// Channel delivers messages somewhere a phone hears them.
type Channel interface {
	// Name identifies the channel in logs.
	Name() string
	Send(ctx context.Context, m Message) error
}

// Defaults of a Dispatcher.
const (
	DefaultQueue   = 256
	DefaultTimeout = 10 * time.Second
)

// Dispatcher follows Log and sends every notification event to Channels.
type Dispatcher struct {
	Events   *session.EventLog
	Channels []Channel
	Detail   Detail
	// WebURL is the web client's address (https://host:port/), from which
	// each message's URL is made.
	WebURL string
	Logger *slog.Logger
	// Queue bounds the notifications waiting to be sent; past it the
	// newest are dropped (and logged): a push channel that hangs must not
	// hold the daemon. DefaultQueue when zero.
	Queue int
	// Timeout bounds one send. DefaultTimeout when zero.
	Timeout time.Duration
}

// Run sends notifications until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	if len(d.Channels) == 0 {
		return nil
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	queue := make(chan Message, orDefault(d.Queue, DefaultQueue))
	var dropped sync.Once
	sub := d.Events.Subscribe(func(e store.Event) bool {
		var m Message
		var ok bool
		switch e.Type {
		case wire.TypeNotification:
			m, ok = d.message(e)
		case wire.TypeApprovalResolved, wire.TypeApprovalCancelled:
			m, ok = d.withdrawal(e)
		}
		if !ok {
			return true
		}
		select {
		case queue <- m:
		default:
			dropped.Do(func() { logger.Warn("notification channels are behind: dropping notifications", "id", m.ID) })
		}
		return true
	})
	defer sub.Close()
	if _, err := sub.Replay(ctx, d.Events.Flushed(), func(store.Event) bool { return false }, nil); err != nil {
		return err
	}
	timeout := orDefault(d.Timeout, DefaultTimeout)
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-queue:
			for _, c := range d.Channels {
				sctx, cancel := context.WithTimeout(ctx, timeout)
				if err := c.Send(sctx, m); err != nil {
					logger.Warn("sending a notification", "channel", c.Name(), "id", m.ID, "err", err)
				}
				cancel()
			}
		}
	}
}

// message makes the Message of a notification event.
func (d *Dispatcher) message(e store.Event) (Message, bool) {
	var env wire.Envelope
	var n wire.Notification
	if json.Unmarshal(e.Frame, &env) != nil || json.Unmarshal(env.Payload, &n) != nil || n.NotificationID == "" {
		return Message{}, false
	}
	m := Message{ID: n.NotificationID, SessionID: n.SessionID, Kind: n.NotificationType, Title: n.Title, Body: n.Body, Priority: n.Priority,
		Tag: sessionTag(n.SessionID)}
	if id, ok := n.Data["tool_call_id"].(string); ok && n.NotificationType == "approval_required" {
		m.Tag = approvalTag(n.SessionID, id)
	}
	if d.Detail != DetailFull {
		m.Title, m.Body = summary(n)
	}
	approval, _ := n.Data["tool_call_id"].(string)
	if n.NotificationType != "approval_required" {
		approval = ""
	}
	m.URL = d.url(n.SessionID, approval)
	return m, true
}

// url opens the web client on a session, and on one of its approvals when
// approval is not empty; empty without WebURL.
func (d *Dispatcher) url(sessionID, approval string) string {
	if d.WebURL == "" {
		return ""
	}
	frag := url.Values{"session": {sessionID}}
	if approval != "" {
		frag.Set("approval", approval)
	}
	return d.WebURL + "#" + frag.Encode()
}

// withdrawal is the Message that takes back an approval's notification,
// from its approval_resolved or approval_cancelled event. A browser must
// show something for every push (Safari revokes a subscription after three
// pushes that show nothing; Chrome shows a notice of its own), so it also
// says, quietly, what became of the approval: the decision, no content.
func (d *Dispatcher) withdrawal(e store.Event) (Message, bool) {
	var env wire.Envelope
	var p wire.ApprovalResolved // or ApprovalCancelled: no decision
	if json.Unmarshal(e.Frame, &env) != nil || json.Unmarshal(env.Payload, &p) != nil || p.ToolCallID == "" {
		return Message{}, false
	}
	m := Message{SessionID: p.SessionID, Kind: "approval_withdrawn", Tag: approvalTag(p.SessionID, p.ToolCallID), Withdraw: true,
		Title: "Approval answered", URL: d.url(p.SessionID, "")}
	switch {
	case e.Type == wire.TypeApprovalCancelled:
		m.Title, m.Body = "Approval withdrawn", "Nobody needs to answer it any more."
	case p.Decision == "approved":
		m.Body = "Approved."
	case p.Decision == "modified":
		m.Body = "Approved with changes."
	case p.Decision == "rejected":
		m.Body = "Rejected."
	default:
		m.Body = "Answered."
	}
	return m, true
}

// Tags are short (a Web Push Topic holds at most 32 characters of the
// base64url alphabet) and say nothing of the session or tool call.
func approvalTag(sessionID, toolCallID string) string {
	sum := sha256.Sum256([]byte(sessionID + "\n" + toolCallID))
	return "a-" + hex.EncodeToString(sum[:15])
}

func sessionTag(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return "s-" + hex.EncodeToString(sum[:15])
}

// summary is the title and body sent without --push-detail full: the
// approval's title names the tool only; other titles may hold the
// session's title, which may quote the user's prompt.
func summary(n wire.Notification) (title, body string) {
	switch n.NotificationType {
	case "approval_required":
		return n.Title, "An agent is waiting for your approval. Open tether to see what it wants to do."
	case "error":
		return "Session failed", "Open tether to see why."
	case "turn_complete":
		return "Agent finished", "The agent is waiting for you."
	default:
		return "tether", "Open tether to see it."
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
