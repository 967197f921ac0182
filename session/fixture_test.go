package session

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// fixture is a Manager on a real store and event log, whose sandboxes are
// fakes. It is made inside a synctest bubble (see inBubble): its timers
// run on the bubble's clock, and settle waits until every goroutine of the
// daemon is blocked, so that tests await conditions rather than poll or
// sleep.
type fixture struct {
	t    *testing.T
	st   *store.Store
	log  *EventLog
	m    *Manager
	sp   *fakeSpawner
	root string // a working directory inside the roots
	cfg  Config

	mu     sync.Mutex
	events []wire.Envelope // every committed event, in seq order
}

// inBubble runs test in a synctest bubble with a fixture; configure, when
// set, changes the Manager's configuration first.
func inBubble(t *testing.T, configure func(*Config), test func(t *testing.T, f *fixture)) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		test(t, newFixture(t, configure))
	})
}

func newFixture(t *testing.T, configure func(*Config)) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "tether.db"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewEventLog(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	f := &fixture{t: t, st: st, log: l, sp: &fakeSpawner{}, root: t.TempDir()}
	sub := l.Subscribe(func(e store.Event) bool {
		var env wire.Envelope
		if err := json.Unmarshal(e.Frame, &env); err != nil {
			t.Errorf("event %d: %v", e.Seq, err)
		}
		f.mu.Lock()
		f.events = append(f.events, env)
		f.mu.Unlock()
		return true
	})
	if _, err := sub.Replay(ctx, 0, nil, func(store.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	f.cfg = Config{Store: st, Events: l, Agents: []string{"demo", "claude-code"}, Roots: []string{f.root},
		DataDir: t.TempDir(), Home: t.TempDir(), Spawner: f.sp}
	if configure != nil {
		configure(&f.cfg)
	}
	f.m, err = NewManager(ctx, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.m.Shutdown(context.Background())
		sub.Close()
		cancel()
		<-done
		st.Close()
	})
	return f
}

// settle waits until the daemon's goroutines are all blocked: what the
// last call set going has happened, and its events are committed.
func (f *fixture) settle() { synctest.Wait() }

// start starts a session in the fixture's root with policy and returns its
// id, once its sandbox is ready.
func (f *fixture) start(policy string) (string, *fakeSandbox) {
	f.t.Helper()
	id, err := f.m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: f.root, Policy: policy}, RequestID: "req-1"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.settle()
	b := f.sp.last()
	if b == nil {
		f.t.Fatal("no sandbox was spawned")
	}
	return id, b
}

// send sends a chat message to a session and settles.
func (f *fixture) send(id, messageID, text string) {
	f.t.Helper()
	if err := f.m.Send(context.Background(), id, messageID, text, nil, Sender{DeviceName: "phone"}); err != nil {
		f.t.Fatal(err)
	}
	f.settle()
}

// turnDone ends the running turn of b, as the bridge's "done" does.
func (f *fixture) turnDone(b *fakeSandbox) {
	b.emit(sandbox.Event{Ev: sandbox.EvDone})
	f.settle()
}

// types are the types of the session's events so far, in order.
func (f *fixture) types(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		var p struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(e.Payload, &p) == nil && p.SessionID == id {
			out = append(out, e.Type)
		}
	}
	return out
}

// last decodes into v the payload of the session's last event of type typ
// and reports whether there was one.
func (f *fixture) last(id, typ string, v any) bool {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range slices.Backward(f.events) {
		var p struct {
			SessionID string `json:"session_id"`
		}
		if e.Type != typ || json.Unmarshal(e.Payload, &p) != nil || p.SessionID != id {
			continue
		}
		if err := json.Unmarshal(e.Payload, v); err != nil {
			f.t.Fatal(err)
		}
		return true
	}
	return false
}

// count is how many events of type typ the session has so far.
func (f *fixture) count(id, typ string) int {
	n := 0
	for _, t := range f.types(id) {
		if t == typ {
			n++
		}
	}
	return n
}

// status is the session's status in the store.
func (f *fixture) status(id string) store.SessionStatus {
	f.t.Helper()
	rec, err := f.st.Session(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return rec.Status
}

// ask is the agent's permission request for tool with input (JSON), as
// request id and tool_use_id; it settles.
func (f *fixture) ask(b *fakeSandbox, id, tool, input string) {
	b.emit(sandbox.Event{Ev: sandbox.EvPermissionRequest, Request: &agent.PermissionRequest{
		RequestID: "req-" + id, ToolUseID: id, ToolName: tool, Input: json.RawMessage(input)}})
	f.settle()
}

// answer is a phone's approval_response; it settles.
func (f *fixture) answer(r wire.ApprovalResponse) error {
	err := f.m.Answer(r)
	f.settle()
	return err
}

// restart is the daemon stopping and a new one starting on the same store.
func (f *fixture) restart() {
	f.t.Helper()
	f.m.Shutdown(context.Background())
	m, err := NewManager(context.Background(), f.cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.m = m
	f.settle()
}

// code is the protocol code of err, "" when it has none.
func code(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return ""
}

// cancelled is the reason of the first approval_cancelled of the session's
// question toolCall, "" when there is none.
func (f *fixture) cancelled(id, toolCall string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		var c wire.ApprovalCancelled
		if e.Type == wire.TypeApprovalCancelled && json.Unmarshal(e.Payload, &c) == nil && c.SessionID == id && c.ToolCallID == toolCall {
			return c.Reason
		}
	}
	return ""
}
