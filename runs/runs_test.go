package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// TestGenerateIDIsTheSpecs checks the id against SHA-256 over the four
// fields one after the other (sha256sum of "taskuserimplementerhello").
func TestGenerateIDIsTheSpecs(t *testing.T) {
	t.Parallel()
	if got := GenerateID("task", "user", "implementer", "hello"); got != "859c6c6961a4de95270ec0fe17cfda4f1b15df8417144ada05d73bbc1104618e" {
		t.Fatalf("GenerateID = %s", got)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	names := []string{"implementer", "reviewer"}
	ok := Message{Type: TypeResult, From: "implementer", To: "reviewer", Content: "done", Signal: SignalDone}
	tests := []struct {
		name string
		edit func(*Message)
		bad  bool
	}{
		{"a result with DONE", func(*Message) {}, false},
		{"a broadcast", func(m *Message) { m.To = "" }, false},
		{"to the user", func(m *Message) { m.To = User }, false},
		{"a signal alone", func(m *Message) { m.Type, m.Content = TypeSignal, "" }, false},
		{"unknown type", func(m *Message) { m.Type = "order" }, true},
		{"unknown signal", func(m *Message) { m.Signal = "MAYBE" }, true},
		{"signal type without signal", func(m *Message) { m.Type, m.Signal = TypeSignal, "" }, true},
		{"empty content", func(m *Message) { m.Content = " \n" }, true},
		{"content too long", func(m *Message) { m.Content = strings.Repeat("x", MaxContent+1) }, true},
		{"unknown recipient", func(m *Message) { m.To = "codex" }, true},
		{"to itself", func(m *Message) { m.To = "implementer" }, true},
	}
	for _, tt := range tests {
		m := ok
		tt.edit(&m)
		if err := validate(m, names); (err != nil) != tt.bad {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestStatusText(t *testing.T) {
	t.Parallel()
	s := newStatus(1)
	for _, m := range []Message{
		{From: "claude", Type: TypeTask}, {From: "codex", Type: TypeResult, Signal: SignalDone},
		{From: "claude", Type: TypeReview, Signal: SignalFail}, {From: "codex", Type: TypeResult},
		{From: "claude", Type: TypeReview, Signal: SignalPass},
	} {
		s.add(m.From, m.Type, m.Signal, 1)
	}
	want := "Run #1 Bridge Status:\nTotal Messages: 5\nDone Signal: true\nPass Count: 1\nFail Count: 1\nBy Agent:\n  claude: 3\n  codex: 2\n"
	if got := s.Text(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// newRunner returns a runner on a real store and event log, with a run of
// two participants taken up (sessions are not needed to send).
func newRunner(t testing.TB) (*Runner, int64) {
	t.Helper()
	return newRunnerConfig(t, Config{})
}

// newRunnerConfig is newRunner with cfg (its store and log set here).
func newRunnerConfig(t testing.TB, cfg Config) (*Runner, int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "tether.db"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := session.NewEventLog(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	logDone := make(chan struct{})
	go func() { log.Run(ctx); close(logDone) }()
	cfg.Store, cfg.Events = st, log
	r := New(cfg)
	rec := store.Run{Template: TemplateReview, Task: "t", WorkDir: "/w", MaxRounds: 3, CreatedAt: time.Now()}
	id, err := st.CreateRun(ctx, rec, []store.RunParticipant{
		{Name: "implementer", Role: "implementer", SessionID: "s_impl"}, {Name: "reviewer", Role: "reviewer", SessionID: "s_rev"}})
	if err != nil {
		t.Fatal(err)
	}
	rec.ID, rec.Status = id, store.RunRunning
	if err := r.take(ctx, rec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		r.wg.Wait()
		<-logDone
		st.Close()
	})
	return r, id
}

// TestDuplicatesUnderConcurrentRetries: 100 identical sends from 10
// goroutines store one message; the other 99 are told it is a duplicate
// of that one.
func TestDuplicatesUnderConcurrentRetries(t *testing.T) {
	t.Parallel()
	r, id := newRunner(t)
	call := agent.RunCall{Tool: agent.ToolSend, To: "reviewer", Type: TypeResult, Content: "Round 1: done", Signal: SignalDone}
	var wg sync.WaitGroup
	results := make(chan SendResult, 100)
	for range 10 {
		wg.Go(func() {
			for range 10 {
				raw, err := r.Call(t.Context(), "s_impl", call)
				if err != nil {
					t.Error(err)
					return
				}
				var res SendResult
				json.Unmarshal(raw, &res)
				results <- res
			}
		})
	}
	wg.Wait()
	close(results)
	fresh := 0
	for res := range results {
		if !res.Duplicate {
			fresh++
		}
		if res.Seq != 1 || res.ID != GenerateID(TypeResult, "implementer", "reviewer", "Round 1: done") {
			t.Errorf("a send answered %+v", res)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d sends were taken as new, want 1", fresh)
	}
	msgs, err := r.Messages(t.Context(), id, 0, 1000)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("the run holds %d messages (%v), want 1", len(msgs), err)
	}
	st, _ := r.Status(t.Context(), id)
	if st.TotalMessages != 1 || !st.HasDoneSignal {
		t.Fatalf("status %+v", st)
	}
}

// TestReceiveDrainsOnce: receive_messages returns what is for the caller,
// once; a broadcast is for everyone but its sender.
func TestReceiveDrainsOnce(t *testing.T) {
	t.Parallel()
	r, _ := newRunner(t)
	ctx := t.Context()
	for _, c := range []agent.RunCall{
		{Tool: agent.ToolSend, To: "reviewer", Type: TypeResult, Content: "one"},
		{Tool: agent.ToolSend, Type: TypeChat, Content: "to all"},
	} {
		if _, err := r.Call(ctx, "s_impl", c); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(session string) []Message {
		raw, err := r.Call(ctx, session, agent.RunCall{Tool: agent.ToolReceive})
		if err != nil {
			t.Fatal(err)
		}
		var res struct{ Messages []Message }
		json.Unmarshal(raw, &res)
		return res.Messages
	}
	if got := receive("s_rev"); len(got) != 2 || got[0].Content != "one" || got[1].Content != "to all" {
		t.Fatalf("the reviewer received %+v", got)
	}
	if got := receive("s_rev"); len(got) != 0 {
		t.Fatalf("the reviewer received again %+v", got)
	}
	if got := receive("s_impl"); len(got) != 0 {
		t.Fatalf("the sender received its own broadcast: %+v", got)
	}
	if _, err := r.Call(ctx, "s_other", agent.RunCall{Tool: agent.ToolStatus}); err == nil {
		t.Fatal("a session in no run used the tools")
	}
	if _, err := r.Call(ctx, "s_impl", agent.RunCall{Tool: agent.ToolSend, To: "reviewer", Type: "order", Content: "x"}); err == nil || !strings.Contains(err.Error(), "type must be") {
		t.Fatalf("a bad type: %v", err)
	}
}

// FuzzValidate: whatever a phone or an agent sends, validate does not
// panic, and what it takes is a message the spec allows.
func FuzzValidate(f *testing.F) {
	f.Add("result", "implementer", "reviewer", "done", "DONE")
	f.Add("signal", "reviewer", "", "", "PASS")
	f.Add("order", "x", "x", "", "MAYBE")
	f.Fuzz(func(t *testing.T, typ, from, to, content, signal string) {
		m := Message{Type: typ, From: from, To: to, Content: content, Signal: signal}
		if validate(m, []string{"implementer", "reviewer"}) != nil {
			return
		}
		if !slices.Contains(types, typ) || !slices.Contains(signals, signal) || len(content) > MaxContent || to == from ||
			to != "" && to != User && to != "implementer" && to != "reviewer" || typ == TypeSignal && signal == "" {
			t.Fatalf("took %+v", m)
		}
	})
}

// TestARunHoldsSoManyMessages: agents that talk on and on end their run at
// MaxMessages; the message past it is refused, and the phones are told.
func TestARunHoldsSoManyMessages(t *testing.T) {
	t.Parallel()
	r, id := newRunnerConfig(t, Config{MaxMessages: 3})
	ended := make(chan RunUpdate, 1)
	sub := r.cfg.Events.Subscribe(func(e store.Event) bool {
		var env struct{ Payload RunUpdate }
		if e.Type == wire.TypeRunUpdate && json.Unmarshal(e.Frame, &env) == nil && env.Payload.Run.Status != store.RunRunning {
			ended <- env.Payload
			return false
		}
		return true
	})
	defer sub.Close()
	if _, err := sub.Replay(t.Context(), 0, func(store.Event) bool { return false }, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := r.Call(t.Context(), "s_impl", agent.RunCall{Tool: agent.ToolSend, To: "reviewer", Type: TypeChat, Content: fmt.Sprintf("Round 1: %d", i)}); err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	if _, err := r.Call(t.Context(), "s_impl", agent.RunCall{Tool: agent.ToolSend, To: "reviewer", Type: TypeChat, Content: "Round 1: one more"}); err == nil {
		t.Fatal("a fourth message was taken")
	}
	if u := <-ended; u.Run.RunID != id || u.Run.Status != store.RunExhausted || !strings.Contains(u.Run.Reason, "3 messages") {
		t.Fatalf("the run ended %+v", u.Run)
	}
	if msgs, _ := r.Messages(t.Context(), id, 0, 10); len(msgs) != 3 {
		t.Fatalf("the run holds %d messages", len(msgs))
	}
}
