package session

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/hooks"
	"github.com/tetherdev/tether/wire"
)

// hookAsked is the answer of a hook question asked in the background.
type hookAsked struct {
	a   hooks.Answer
	err error
}

// hookAsk asks a hook question of Claude Code in a terminal working in
// the fixture's root, in the background, and settles.
func (f *fixture) hookAsk(ctx context.Context, name, toolCall, tool, input string) <-chan hookAsked {
	out := make(chan hookAsked, 1)
	go func() {
		a, err := f.m.Ask(ctx, hooks.Event{SessionID: "cc-1", Name: name, Cwd: f.root, ToolName: tool, ToolUseID: toolCall, ToolInput: json.RawMessage(input)})
		out <- hookAsked{a, err}
	}()
	f.settle()
	return out
}

// TestHookQuestions: what a terminal's Claude Code is told when it asks
// through its hooks: no opinion on reads before a tool runs; its own
// prompt when no phone is connected, when the last phone goes, or when
// its hook's time is up; the phone's answer otherwise; a remembered rule
// without asking.
func TestHookQuestions(t *testing.T) {
	var phones atomic.Int32
	inBubble(t, func(c *Config) { c.Phones = func() int { return int(phones.Load()) } }, func(t *testing.T, f *fixture) {
		// A hook's request is bounded (hooks.Server); so is each here, so
		// that a failing test ends.
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if err := f.m.Observe(ctx, hooks.Event{SessionID: "cc-1", Name: hooks.EventSessionStart, Cwd: f.root, Raw: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		pre, perm := hooks.EventPreToolUse, hooks.EventPermissionRequest
		if r := <-f.hookAsk(ctx, pre, "t0", "Read", `{"file_path":"a.go"}`); r.err != nil || r.a.Decision != hooks.DecisionNone {
			t.Fatalf("a read before it runs: %+v", r)
		}
		if r := <-f.hookAsk(ctx, perm, "t1", "Bash", `{"command":"make"}`); r.a.Decision != hooks.DecisionAsk {
			t.Fatalf("no phone: %+v", r)
		}
		phones.Store(1)
		for _, c := range []struct {
			name     string
			answer   wire.ApprovalResponse
			decision hooks.Decision
			updated  string
		}{
			{"rejected", wire.ApprovalResponse{Decision: "rejected", Reason: "no"}, hooks.DecisionDeny, ""},
			{"modified", wire.ApprovalResponse{Decision: "modified", Modifications: json.RawMessage(`{"command":"git status -s"}`)}, hooks.DecisionAllow, `{"command":"git status -s"}`},
			{"approved", wire.ApprovalResponse{Decision: "approved", Remember: "session"}, hooks.DecisionAllow, ""},
		} {
			call := "t-" + c.name
			res := f.hookAsk(ctx, perm, call, "Bash", `{"command":"git status"}`)
			var q wire.ApprovalRequired
			if !f.last("cc-1", wire.TypeApprovalRequired, &q) || q.ToolCallID != call || q.Source != string(SourceHooks) {
				t.Fatalf("%s: approval_required %+v", c.name, q)
			}
			c.answer.SessionID, c.answer.ToolCallID = "cc-1", call
			if err := f.answer(c.answer); err != nil {
				t.Fatal(err)
			}
			if r := <-res; r.a.Decision != c.decision || string(r.a.UpdatedInput) != c.updated {
				t.Errorf("%s: %+v", c.name, r)
			}
		}
		// "git status" was remembered: asked again, it is allowed at once.
		if r := <-f.hookAsk(ctx, perm, "t2", "Bash", `{"command":"git status"}`); r.a.Decision != hooks.DecisionAllow || f.count("cc-1", wire.TypeApprovalRequired) != 3 {
			t.Fatalf("remembered: %+v, events %q", r, f.types("cc-1"))
		}
		// The hook's time is up: back to the terminal, the phones told.
		timed, cancelTimed := context.WithTimeout(ctx, time.Minute)
		defer cancelTimed()
		res := f.hookAsk(timed, perm, "t3", "Write", `{"file_path":"a.md"}`)
		r := <-res
		f.settle()
		if r.a.Decision != hooks.DecisionAsk || f.cancelled("cc-1", "t3") != "the question went back to the terminal" {
			t.Fatalf("timed out: %+v", r)
		}
		// The last phone goes while a question waits.
		res = f.hookAsk(ctx, perm, "t4", "Write", `{"file_path":"b.md"}`)
		phones.Store(0)
		r = <-res
		f.settle()
		if r.a.Decision != hooks.DecisionAsk || f.cancelled("cc-1", "t4") != "the question went back to the terminal" {
			t.Fatalf("no phone left: %+v", r)
		}
	})
}
