package session

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// TestMessagesQueueWhileATurnRuns: messages sent during a turn are logged
// at once, in order, and go to the agent one turn at a time, in the order
// sent; the session is busy until the last turn ends.
func TestMessagesQueueWhileATurnRuns(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		for _, m := range []string{"one", "two", "three"} {
			f.send(id, "m-"+m, m)
		}
		var msgs []string
		f.mu.Lock()
		for _, e := range f.events {
			var u wire.UserMessage
			if e.Type == wire.TypeUserMessage && json.Unmarshal(e.Payload, &u) == nil {
				msgs = append(msgs, u.MessageID+":"+u.Content+":"+u.DeviceName)
			}
		}
		f.mu.Unlock()
		if want := []string{"m-one:one:phone", "m-two:two:phone", "m-three:three:phone"}; !slices.Equal(msgs, want) {
			t.Fatalf("user_message %q, want %q", msgs, want)
		}
		for i, want := range [][]string{{"one"}, {"one", "two"}, {"one", "two", "three"}} {
			if got := b.prompts(); !slices.Equal(got, want) || f.status(id) != store.StatusBusy {
				t.Fatalf("turn %d: prompts %q, status %q", i, got, f.status(id))
			}
			f.turnDone(b)
		}
		if f.status(id) != store.StatusIdle || len(b.prompts()) != 3 {
			t.Fatalf("after the last turn: status %q, prompts %q", f.status(id), b.prompts())
		}
		for _, q := range b.commands(sandbox.CmdQuery) {
			if q.SessionID != id || !q.IncludePartialMessages {
				t.Fatalf("query %+v", q)
			}
		}
		var n wire.Notification
		if !f.last(id, wire.TypeNotification, &n) || n.NotificationType != "turn_complete" || f.count(id, wire.TypeNotification) != 3 {
			t.Fatalf("notifications: %d, last %+v", f.count(id, wire.TypeNotification), n)
		}
	})
}

// TestMessageIDsRunOnce: a message sent again with the same id (a phone
// that retries) is neither logged nor run again; the same id in another
// session is another message.
func TestMessageIDsRunOnce(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		other, ob := f.start(PolicyAsk)
		f.send(id, "m1", "hello")
		f.send(id, "m1", "hello")
		f.send(other, "m1", "hello")
		if len(b.prompts()) != 1 || f.count(id, wire.TypeUserMessage) != 1 || len(ob.prompts()) != 1 {
			t.Fatalf("prompts %q and %q, events %q", b.prompts(), ob.prompts(), f.types(id))
		}
		// Without an id, nothing can tell a retry: each runs.
		f.turnDone(b)
		f.send(id, "", "again")
		f.turnDone(b)
		f.send(id, "", "again")
		if got := b.prompts(); !slices.Equal(got, []string{"hello", "again", "again"}) {
			t.Fatalf("prompts %q", got)
		}
	})
}

// TestMessagesRefused: an empty message, a bad attachment, no session, a
// session observed through hooks: each refused with its code, nothing run.
func TestMessagesRefused(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		now := time.Now()
		if err := f.st.CreateSession(context.Background(), store.Session{ID: "observed", Agent: "claude-code", Source: store.SourceHooks,
			WorkingDirectory: f.root, Status: store.StatusIdle, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
		for name, c := range map[string]struct {
			session, content string
			atts             []wire.Attachment
			code             string
		}{
			"empty":            {id, "", nil, wire.CodeInvalidMessage},
			"blank":            {id, " \n\t", nil, wire.CodeInvalidMessage},
			"not an image":     {id, "see", []wire.Attachment{{Type: "file", MediaType: "image/png", Data: png}}, wire.CodeInvalidMessage},
			"a lying image":    {id, "see", []wire.Attachment{{Type: "image", MediaType: "image/jpeg", Data: png}}, wire.CodeInvalidMessage},
			"not base64":       {id, "see", []wire.Attachment{{Type: "image", MediaType: "image/png", Data: "%%%"}}, wire.CodeInvalidMessage},
			"too many images":  {id, "see", slices.Repeat([]wire.Attachment{{Type: "image", MediaType: "image/png", Data: png}}, wire.MaxAttachments+1), wire.CodeInvalidMessage},
			"no session":       {"sess_nobody", "hi", nil, wire.CodeSessionNotFound},
			"observed session": {"observed", "hi", nil, wire.CodeInvalidMessage},
		} {
			if err := f.m.Send(context.Background(), c.session, "", c.content, c.atts, Sender{}); code(err) != c.code {
				t.Errorf("%s: %v, want code %s", name, err, c.code)
			}
		}
		f.settle()
		if len(b.prompts()) != 0 || f.count(id, wire.TypeUserMessage) != 0 {
			t.Fatalf("prompts %q, events %q", b.prompts(), f.types(id))
		}
		// An image alone is a message; it reaches the agent.
		if err := f.m.Send(context.Background(), id, "", "", []wire.Attachment{{Type: "image", MediaType: "image/png", Data: png}}, Sender{}); err != nil {
			t.Fatal(err)
		}
		f.settle()
		if q := b.commands(sandbox.CmdQuery); len(q) != 1 || len(q[0].Images) != 1 || q[0].Images[0].Data != png {
			t.Fatalf("queries %+v", q)
		}
	})
}

// TestInterrupt: an interrupt stops the running turn and drops what was
// queued behind it; with no turn running it sends nothing.
func TestInterrupt(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		if err := f.m.Interrupt(id); err != nil || len(b.commands(sandbox.CmdInterrupt)) != 0 {
			t.Fatalf("interrupt of an idle session: %v, %+v", err, b.commands(""))
		}
		f.send(id, "m1", "long")
		f.send(id, "m2", "queued")
		if err := f.m.Interrupt(id); err != nil {
			t.Fatal(err)
		}
		if len(b.commands(sandbox.CmdInterrupt)) != 1 {
			t.Fatalf("commands %+v", b.commands(""))
		}
		f.turnDone(b)
		if got := b.prompts(); !slices.Equal(got, []string{"long"}) || f.status(id) != store.StatusIdle {
			t.Fatalf("after the interrupt: prompts %q, status %q", got, f.status(id))
		}
		if err := f.m.Interrupt("sess_nobody"); code(err) != wire.CodeSessionNotFound {
			t.Fatalf("interrupt of no session: %v", err)
		}
	})
}

// TestTurnEvents: the agent's messages become the phone's events; the
// session is idle in the store and the log before turn_complete, which
// carries the session's usage so far; an agent error reaches the phone
// and the session goes on.
func TestTurnEvents(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		f.send(id, "m1", "list the files")
		for _, line := range observedTurn {
			b.emit(sandbox.Event{Ev: sandbox.EvMessage, Data: json.RawMessage(line)})
		}
		f.settle()
		types := f.types(id)
		tc := slices.Index(types, wire.TypeTurnComplete)
		if tc < 0 || types[tc-1] != wire.TypeSessionStatus || f.status(id) != store.StatusIdle {
			t.Fatalf("events %q, status %q", types, f.status(id))
		}
		for _, want := range []string{wire.TypeAgentInfo, wire.TypeStreamStart, wire.TypeStreamChunk, wire.TypeToolCall, wire.TypeToolResult, wire.TypeStreamEnd} {
			if !slices.Contains(types, want) {
				t.Errorf("no %s in %q", want, types)
			}
		}
		var done wire.TurnComplete
		if !f.last(id, wire.TypeTurnComplete, &done) || done.SessionUsage == nil || done.SessionUsage.Turns != 1 {
			t.Fatalf("turn_complete %+v", done)
		}
		b.emit(sandbox.Event{Ev: sandbox.EvError, Error: "the model is overloaded"})
		f.turnDone(b)
		var e wire.ErrorPayload
		if !f.last(id, wire.TypeError, &e) || !e.Recoverable || !strings.Contains(e.Message, "overloaded") {
			t.Fatalf("error %+v", e)
		}
		rec, err := f.st.Session(context.Background(), id)
		if err != nil || rec.AgentSessionID != "fc37c3a1" {
			t.Fatalf("the agent's conversation id %q, %v", rec.AgentSessionID, err)
		}
		f.send(id, "m2", "more")
		if got := b.prompts(); !slices.Equal(got, []string{"list the files", "more"}) {
			t.Fatalf("prompts %q", got)
		}
	})
}
