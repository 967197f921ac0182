package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tetherdev/tether/hooks"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// TestTwoDevicesShareTheConversation: what one device says to a session
// is an event every device sees, live and after a reconnect, with who
// said it; the agent's answer follows it in seq order.
func TestTwoDevicesShareTheConversation(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	a, ackA := d.phone(nil)
	_, out, _ := runCmd(t, d.env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	b := d.connect(p.Token, map[string]any{"device_name": "Tablet"})
	var ackB wire.ConnectionAck
	b.Expect(wire.TypeConnectionAck, &ackB)

	const id = "shared"
	d.startSession(a, id, "ask")
	a.WaitFor(wire.TypeSessionReady, nil, nil)

	said := func(c *wstest.Client, messageID string) (wire.UserMessage, wire.Envelope) {
		t.Helper()
		var um wire.UserMessage
		env := c.WaitFor(wire.TypeUserMessage, &um, func(e wire.Envelope) bool {
			var m wire.UserMessage
			json.Unmarshal(e.Payload, &m)
			return m.MessageID == messageID
		})
		return um, env
	}
	a.Send(wire.TypeMessage, "m-a1", map[string]any{"session_id": id, "content": "hello from A"})
	var env wire.Envelope
	for _, c := range []*wstest.Client{a, b} {
		var um wire.UserMessage
		um, env = said(c, "m-a1")
		if um.Content != "hello from A" || um.DeviceID != ackA.DeviceID || um.SessionID != id || um.SentAt == "" || env.Seq == 0 {
			t.Fatalf("user_message seen by a device: %+v (seq %d)", um, env.Seq)
		}
	}
	// The agent's answer comes after the message in the log.
	start := b.WaitFor(wire.TypeStreamStart, nil, forSession(id))
	if start.Seq <= env.Seq {
		t.Fatalf("the answer (seq %d) precedes the message (seq %d)", start.Seq, env.Seq)
	}

	b.Send(wire.TypeMessage, "m-b1", map[string]any{"session_id": id, "content": "and from B"})
	if um, _ := said(a, "m-b1"); um.DeviceName != "Tablet" || um.DeviceID != ackB.DeviceID {
		t.Fatalf("A sees B's message as %+v", um)
	}
	// Both turns are done: B has seen two turn_complete events.
	var last int64
	for turns := 0; turns < 2; {
		e := b.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
		turns, last = turns+1, e.Seq
	}

	// A leaves; B speaks; A comes back from its last seq and sees it once.
	a.WS.Close()
	b.Send(wire.TypeMessage, "m-b2", map[string]any{"session_id": id, "content": "while A was away"})
	b.WaitFor(wire.TypeTurnComplete, nil, func(e wire.Envelope) bool { return e.Seq > last })
	a2, _ := d.phone(map[string]any{"last_seq": last})
	um, _ := said(a2, "m-b2")
	if um.Content != "while A was away" {
		t.Fatalf("after reconnecting: %+v", um)
	}
	a2.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
	n := 0
	for _, e := range a2.Seen {
		if e.Type == wire.TypeUserMessage {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("after reconnecting from seq %d, %d user messages came", last, n)
	}
}

// TestAnsweredApprovalIsNotNotifiedAgain: a phone sees an approval's
// notification, does not acknowledge it, and the question is answered;
// when the phone comes back (without last_seq, as the ReCursor app does),
// the notification of a question that no longer exists is not sent again.
func TestAnsweredApprovalIsNotNotifiedAgain(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const sid = "stale-note"
	res := d.postHookAsync(hookBody(sid, hooks.EventPermissionRequest, d.project, bashInput("rm -rf build")))
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, forSession(sid))
	var n wire.Notification
	c.WaitFor(wire.TypeNotification, &n, forSession(sid))
	c.Send(wire.TypeApprovalResponse, "r", map[string]any{"session_id": sid, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	waitResult(t, res)
	c.WaitFor(wire.TypeApprovalResolved, nil, forSession(sid))
	c.WS.Close()

	c2, _ := d.phone(nil)
	c2.Send(wire.TypeHeartbeatPing, "p", nil)
	c2.WaitFor(wire.TypeHeartbeatPong, nil, nil)
	for _, e := range c2.Seen {
		if e.Type == wire.TypeNotification && strings.Contains(string(e.Payload), n.NotificationID) {
			t.Fatalf("the answered question's notification came again: %s", e.Payload)
		}
	}
}

// TestImageAttachments: a message may carry images; the agent gets them
// (the demo agent says what came), the log keeps them in the user_message
// another device sees, and bad attachments are refused with the frame's id
// without running anything.
func TestImageAttachments(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	a, _ := d.phone(nil)
	const id = "pictures"
	d.readySession(a, id, "auto_approve")
	// A 1×1 PNG of 70 bytes.
	const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
	img := map[string]any{"type": "image", "media_type": "image/png", "data": pixel, "name": "screen\x1b[31m.png"}

	for _, bad := range []struct {
		name string
		atts []any
	}{
		{"not base64", []any{map[string]any{"type": "image", "media_type": "image/png", "data": "!!"}}},
		{"a script claiming to be a png", []any{map[string]any{"type": "image", "media_type": "image/png", "data": "IyEvYmluL3NoCg=="}}},
		{"too many", []any{img, img, img, img, img}},
		{"attachments not a list", nil},
	} {
		payload := map[string]any{"session_id": id, "content": "look", "attachments": bad.atts}
		if bad.atts == nil {
			payload["attachments"] = "x"
		}
		a.Send(wire.TypeMessage, "bad", payload)
		var ep wire.ErrorPayload
		if env := a.WaitFor(wire.TypeError, &ep, nil); env.ID != "bad" || ep.Code != wire.CodeInvalidMessage {
			t.Fatalf("%s: %s %+v", bad.name, env.ID, ep)
		}
	}

	a.Send(wire.TypeMessage, "with-image", map[string]any{"session_id": id, "content": "", "attachments": []any{img}})
	var um wire.UserMessage
	a.WaitFor(wire.TypeUserMessage, &um, forSession(id))
	if um.MessageID != "with-image" || len(um.Attachments) != 1 || um.Attachments[0].Data != pixel || um.Attachments[0].Name != "screen[31m.png" {
		t.Fatalf("user_message = %+v", um)
	}
	var tc wire.TurnComplete
	a.WaitFor(wire.TypeTurnComplete, &tc, forSession(id))
	if !strings.Contains(tc.Result, "Image 1: image/png, 70 bytes.") {
		t.Fatalf("the agent answered %q: it did not get the image", tc.Result)
	}
	// Another device, later, sees the image in the log.
	b, _ := d.phone(map[string]any{"last_seq": 0})
	var again wire.UserMessage
	b.WaitFor(wire.TypeUserMessage, &again, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), "with-image") })
	if len(again.Attachments) != 1 || again.Attachments[0].Data != pixel {
		t.Fatalf("replayed user_message = %+v", again)
	}
}

// TestHistoryPages: a client that loads history itself (history_pages)
// starts at the log's head, then reads a session's history a page at a
// time, newest first, each page in seq order and exactly the session's
// events; bad requests get INVALID_MESSAGE or SESSION_NOT_FOUND with their
// id.
func TestHistoryPages(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	a, _ := d.phone(nil)
	const id = "paged"
	d.readySession(a, id, "auto_approve")
	for i := range 3 {
		a.Send(wire.TypeMessage, fmt.Sprintf("m%d", i), map[string]any{"session_id": id, "content": fmt.Sprintf("turn %d", i)})
		a.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
	}
	b, ack := d.phone(map[string]any{"capabilities": []string{"history_pages"}})
	// Pages start just past the head B's stream starts after, so that
	// history and the live stream meet without overlapping: an event the
	// session logs after B authenticated comes live, not in a page.
	var got []int64
	before := ack.StreamAfter + 1
	for page := 0; ; page++ {
		b.Send(wire.TypeSessionHistory, fmt.Sprintf("h%d", page), map[string]any{"session_id": id, "before_seq": before, "limit": 5})
		var r wire.SessionHistoryResponse
		if env := b.WaitFor(wire.TypeSessionHistoryResp, &r, nil); env.ID != fmt.Sprintf("h%d", page) || r.SessionID != id {
			t.Fatalf("page %d answered %q for %q", page, env.ID, r.SessionID)
		}
		var seqs []int64
		for _, raw := range r.Events {
			var e wire.Envelope
			if err := json.Unmarshal(raw, &e); err != nil || e.Seq == 0 {
				t.Fatalf("history event %s: %v", raw, err)
			}
			seqs = append(seqs, e.Seq)
		}
		if len(seqs) == 0 || len(seqs) > 5 || !slices.IsSorted(seqs) {
			t.Fatalf("page %d: %v", page, seqs)
		}
		got = append(seqs, got...)
		before = seqs[0]
		if !r.HasMore {
			break
		}
	}
	// Everything A saw of the session up to the head B started at, in
	// order: what history must give.
	seen := int64(0)
	for _, e := range a.Seen {
		seen = max(seen, e.Seq)
	}
	for seen < ack.StreamAfter {
		seen = max(seen, a.Read().Seq)
	}
	var want []int64
	for _, e := range a.Seen {
		if e.Seq > 0 && e.Seq <= ack.StreamAfter && forSession(id)(e) {
			want = append(want, e.Seq)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history %v, want what A saw: %v", got, want)
	}
	// Nothing was replayed to B: its stream started at the head.
	for _, e := range b.Seen {
		if e.Seq > 0 && e.Seq <= ack.StreamAfter {
			t.Fatalf("B, loading history itself, was replayed seq %d (%s)", e.Seq, e.Type)
		}
	}

	for _, bad := range []struct {
		payload map[string]any
		code    string
	}{
		{map[string]any{}, wire.CodeInvalidMessage},
		{map[string]any{"session_id": id, "limit": 5000}, wire.CodeInvalidMessage},
		{map[string]any{"session_id": id, "before_seq": -1}, wire.CodeInvalidMessage},
		{map[string]any{"session_id": id, "limit": "ten"}, wire.CodeInvalidMessage},
		{map[string]any{"session_id": "nope"}, wire.CodeSessionNotFound},
	} {
		b.Send(wire.TypeSessionHistory, "bad", bad.payload)
		var ep wire.ErrorPayload
		if env := b.WaitFor(wire.TypeError, &ep, nil); env.ID != "bad" || ep.Code != bad.code {
			t.Fatalf("%v: %s %+v, want %s", bad.payload, env.ID, ep, bad.code)
		}
	}
}
