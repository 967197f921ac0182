package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// outcome is what became of a permission request: the bridge's answer, or
// a question for the phones.
func (f *fixture) outcome(id string, b *fakeSandbox, toolCall string) string {
	f.t.Helper()
	if d := b.decision("req-" + toolCall); d != nil {
		return d.Behavior
	}
	var q wire.ApprovalRequired
	if f.last(id, wire.TypeApprovalRequired, &q) && q.ToolCallID == toolCall {
		return "asked"
	}
	return "nothing"
}

// TestPolicies: what each policy does with a low, a medium and a high risk
// call, and with a plan, which is always the user's.
func TestPolicies(t *testing.T) {
	calls := []struct{ id, tool, input string }{
		{"low", "Read", `{"file_path":"a.go"}`},
		{"medium", "Edit", `{"file_path":"a.go","old_string":"a","new_string":"b"}`},
		{"high", "Bash", `{"command":"rm -rf build"}`},
		{"plan", "ExitPlanMode", `{"plan":"1. do it"}`},
	}
	for policy, want := range map[string][4]string{
		PolicyAsk:         {"asked", "asked", "asked", "asked"},
		PolicyAutoLow:     {"allow", "asked", "asked", "asked"},
		PolicyAutoApprove: {"allow", "allow", "allow", "asked"},
		PolicyAutoDeny:    {"deny", "deny", "deny", "asked"},
	} {
		t.Run(policy, func(t *testing.T) {
			inBubble(t, nil, func(t *testing.T, f *fixture) {
				id, b := f.start(policy)
				for i, c := range calls {
					f.ask(b, c.id, c.tool, c.input)
					if got := f.outcome(id, b, c.id); got != want[i] {
						t.Errorf("%s (%s): %s, want %s", c.id, c.tool, got, want[i])
					}
				}
				if d := b.decision("req-low"); d != nil && d.Behavior == "allow" && string(d.UpdatedInput) != calls[0].input {
					t.Errorf("allowed with input %s", d.UpdatedInput)
				}
			})
		})
	}
}

// TestApprovalQuestion: a question reaches the phones as approval_required
// (its risk, its remember scope, when it expires), a stored pending approval
// and a notification; the phone's answer reaches the agent once, and
// resolves it everywhere.
func TestApprovalQuestion(t *testing.T) {
	inBubble(t, func(c *Config) { c.ApprovalTimeout = time.Minute }, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		asked := time.Now()
		f.ask(b, "t1", "Bash", `{"command":"git status"}`)
		var q wire.ApprovalRequired
		if !f.last(id, wire.TypeApprovalRequired, &q) {
			t.Fatal("no approval_required")
		}
		if q.RiskLevel != RiskMedium || q.Tool != "Bash" || q.Source != string(SourceAgent) || q.RequestID != "req-t1" ||
			q.ExpiresAt != wire.Timestamp(asked.Add(time.Minute)) || !strings.Contains(q.RememberScope, `"git status"`) {
			t.Fatalf("approval_required %+v", q)
		}
		var n wire.Notification
		if !f.last(id, wire.TypeNotification, &n) || n.NotificationType != "approval_required" || n.Data["tool_call_id"] != "t1" {
			t.Fatalf("notification %+v", n)
		}
		pending, err := f.m.PendingApprovals(context.Background())
		if err != nil || len(pending) != 1 {
			t.Fatalf("pending %s, %v", pending, err)
		}
		if err := f.answer(wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "approved"}); err != nil {
			t.Fatal(err)
		}
		if d := b.decision("req-t1"); d == nil || d.Behavior != "allow" || string(d.UpdatedInput) != `{"command":"git status"}` {
			t.Fatalf("decision %+v", d)
		}
		var r wire.ApprovalResolved
		if !f.last(id, wire.TypeApprovalResolved, &r) || r.Decision != "approved" || r.ToolCallID != "t1" {
			t.Fatalf("approval_resolved %+v", r)
		}
		if pending, _ := f.m.PendingApprovals(context.Background()); len(pending) != 0 {
			t.Fatalf("still pending: %s", pending)
		}
		// Answered: a second answer, and the expiry, find nothing.
		var we *wire.Error
		if err := f.answer(wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "rejected"}); !errors.As(err, &we) || we.Code != wire.CodeToolError {
			t.Fatalf("a second answer: %v", err)
		}
		time.Sleep(time.Minute)
		f.settle()
		if n := len(b.commands(sandbox.CmdPermissionResponse)); n != 1 || f.count(id, wire.TypeApprovalCancelled) != 0 {
			t.Fatalf("%d answers, %d cancellations", n, f.count(id, wire.TypeApprovalCancelled))
		}
	})
}

// TestApprovalAnswers: each decision a phone can give, as the agent gets
// it.
func TestApprovalAnswers(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		const write = `{"file_path":"a.md","content":"old"}`
		for i, c := range []struct {
			r        wire.ApprovalResponse
			tool     string
			behavior string
			input    string // updatedInput when allowed
			message  string // message when denied
		}{
			{r: wire.ApprovalResponse{Decision: "approved"}, tool: "Write", behavior: "allow", input: write},
			{r: wire.ApprovalResponse{Decision: "rejected"}, tool: "Write", behavior: "deny", message: "Rejected from the phone."},
			{r: wire.ApprovalResponse{Decision: "rejected", Reason: "not that file"}, tool: "Write", behavior: "deny", message: "Rejected from the phone: not that file"},
			{r: wire.ApprovalResponse{Decision: "modified", Modifications: json.RawMessage(`{"instructions":"write b.md"}`)}, tool: "Write",
				behavior: "deny", message: "The user says instead: write b.md"},
			{r: wire.ApprovalResponse{Decision: "modified", Modifications: json.RawMessage(`{"content":"new"}`)}, tool: "Write",
				behavior: "allow", input: `{"content":"new","file_path":"a.md"}`},
			{r: wire.ApprovalResponse{Decision: "rejected", Reason: "too big"}, tool: "ExitPlanMode", behavior: "deny",
				message: "The user wants you to keep planning: too big"},
			{r: wire.ApprovalResponse{Decision: "approved", Answers: map[string]string{"Which?": "Red"}}, tool: "AskUserQuestion", behavior: "allow",
				input: `{"answers":{"Which?":"Red"},"questions":[{"question":"Which?"}]}`},
		} {
			call := fmt.Sprintf("t%d", i)
			input := write
			switch c.tool {
			case "ExitPlanMode":
				input = `{"plan":"1."}`
			case "AskUserQuestion":
				input = `{"questions":[{"question":"Which?"}]}`
			}
			f.ask(b, call, c.tool, input)
			c.r.SessionID, c.r.ToolCallID = id, call
			if err := f.answer(c.r); err != nil {
				t.Fatalf("%d: %v", i, err)
			}
			d := b.decision("req-" + call)
			if d == nil || d.Behavior != c.behavior || c.input != "" && string(d.UpdatedInput) != c.input || d.Message != c.message {
				t.Errorf("%d (%s %s): decision %+v", i, c.tool, c.r.Decision, d)
			}
		}
	})
}

// TestApprovalAnswersRefused: answers that name no pending question, or
// that are malformed, are refused with a protocol code and leave the
// question pending.
func TestApprovalAnswersRefused(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		f.ask(b, "t1", "Write", `{"file_path":"a.md"}`)
		f.ask(b, "q1", "AskUserQuestion", `{"questions":[{"question":"Which?"}]}`)
		for name, c := range map[string]struct {
			r    wire.ApprovalResponse
			code string
		}{
			"no session":          {wire.ApprovalResponse{ToolCallID: "t1", Decision: "approved"}, wire.CodeInvalidMessage},
			"no tool call":        {wire.ApprovalResponse{SessionID: id, Decision: "approved"}, wire.CodeInvalidMessage},
			"another session":     {wire.ApprovalResponse{SessionID: "sess_other", ToolCallID: "t1", Decision: "approved"}, wire.CodeToolError},
			"unknown call":        {wire.ApprovalResponse{SessionID: id, ToolCallID: "t9", Decision: "approved"}, wire.CodeToolError},
			"unknown decision":    {wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "maybe"}, wire.CodeInvalidMessage},
			"remember forever":    {wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "approved", Remember: "forever"}, wire.CodeInvalidMessage},
			"modified, nothing":   {wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "modified"}, wire.CodeInvalidMessage},
			"modified, not JSON":  {wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "modified", Modifications: json.RawMessage(`[1]`)}, wire.CodeInvalidMessage},
			"blank instructions":  {wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "modified", Modifications: json.RawMessage(`{"instructions":" "}`)}, wire.CodeInvalidMessage},
			"answers to a tool":   {wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "approved", Answers: map[string]string{"Which?": "a"}}, wire.CodeInvalidMessage},
			"question unanswered": {wire.ApprovalResponse{SessionID: id, ToolCallID: "q1", Decision: "approved"}, wire.CodeInvalidMessage},
			"question modified":   {wire.ApprovalResponse{SessionID: id, ToolCallID: "q1", Decision: "modified", Modifications: json.RawMessage(`{"a":1}`)}, wire.CodeInvalidMessage},
			"answer not asked":    {wire.ApprovalResponse{SessionID: id, ToolCallID: "q1", Decision: "approved", Answers: map[string]string{"Why?": "a"}}, wire.CodeInvalidMessage},
		} {
			var we *wire.Error
			if err := f.answer(c.r); !errors.As(err, &we) || we.Code != c.code {
				t.Errorf("%s: %v, want code %s", name, err, c.code)
			}
		}
		if b.decision("req-t1") != nil || b.decision("req-q1") != nil {
			t.Fatal("a refused answer reached the agent")
		}
		if pending, _ := f.m.PendingApprovals(context.Background()); len(pending) != 2 {
			t.Fatalf("%d pending after refused answers", len(pending))
		}
	})
}

// TestApprovalTimeout: a question nobody answers is denied when its time
// is up, not before; the phones see it cancelled, and a late answer finds
// nothing.
func TestApprovalTimeout(t *testing.T) {
	inBubble(t, func(c *Config) { c.ApprovalTimeout = 5 * time.Minute }, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		f.ask(b, "t1", "Bash", `{"command":"make"}`)
		time.Sleep(5*time.Minute - time.Second)
		f.settle()
		if d := b.decision("req-t1"); d != nil {
			t.Fatalf("answered before its time: %+v", d)
		}
		time.Sleep(time.Second)
		f.settle()
		d := b.decision("req-t1")
		if d == nil || d.Behavior != "deny" || d.Message != "No answer from a phone within 5m0s: denied." {
			t.Fatalf("decision at the timeout: %+v", d)
		}
		var c wire.ApprovalCancelled
		if !f.last(id, wire.TypeApprovalCancelled, &c) || c.Reason != "timeout" || c.ToolCallID != "t1" {
			t.Fatalf("approval_cancelled %+v", c)
		}
		if err := f.answer(wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "approved"}); err == nil {
			t.Fatal("a late answer was taken")
		}
		if n := len(b.commands(sandbox.CmdPermissionResponse)); n != 1 {
			t.Fatalf("%d answers sent", n)
		}
	})
}

// TestRememberForTheSession: an approval remembered for the session
// answers the calls its rule covers, in that session only, and never one of
// higher risk; an interpreter is never remembered.
func TestRememberForTheSession(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		other, ob := f.start(PolicyAsk)
		f.ask(b, "t1", "Bash", `{"command":"git status"}`)
		if err := f.answer(wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "approved", Remember: "session"}); err != nil {
			t.Fatal(err)
		}
		if rules := f.m.Rules(id); len(rules) != 1 || rules[0].Prefix != "git status" || rules[0].MaxRisk != RiskMedium {
			t.Fatalf("rules %+v", rules)
		}
		f.ask(b, "t2", "Bash", `{"command":"git status --short"}`)
		f.ask(b, "t3", "Bash", `{"command":"git status --short > out.txt"}`)
		f.ask(ob, "t4", "Bash", `{"command":"git status"}`)
		for call, want := range map[string]string{"t2": "allow", "t3": "asked"} {
			if got := f.outcome(id, b, call); got != want {
				t.Errorf("%s: %s, want %s", call, got, want)
			}
		}
		if got := f.outcome(other, ob, "t4"); got != "asked" {
			t.Errorf("another session's call: %s", got)
		}
		f.ask(b, "t5", "Bash", `{"command":"python3 -c 'print(1)'"}`)
		if err := f.answer(wire.ApprovalResponse{SessionID: id, ToolCallID: "t5", Decision: "approved", Remember: "session"}); err != nil {
			t.Fatal(err)
		}
		f.ask(b, "t6", "Bash", `{"command":"python3 -c 'print(1)'"}`)
		if got := f.outcome(id, b, "t6"); got != "asked" || len(f.m.Rules(id)) != 1 {
			t.Errorf("an interpreter after remember: %s, rules %+v", got, f.m.Rules(id))
		}
		// A rejection remembers nothing.
		f.ask(b, "t7", "Write", `{"file_path":"x.md"}`)
		if err := f.answer(wire.ApprovalResponse{SessionID: id, ToolCallID: "t7", Decision: "rejected", Remember: "session"}); err != nil {
			t.Fatal(err)
		}
		if len(f.m.Rules(id)) != 1 {
			t.Errorf("a rejection made a rule: %+v", f.m.Rules(id))
		}
	})
}

// TestQuestionsWithdrawnAndCancelled: a question the agent withdraws, one
// that reuses a pending id, and those pending when the session ends or its
// sandbox dies, or that a previous daemon left.
func TestQuestionsWithdrawnAndCancelled(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		f.ask(b, "t1", "Bash", `{"command":"make"}`)
		b.emit(sandbox.Event{Ev: sandbox.EvPermissionCancel, RequestID: "req-t1"})
		f.settle()
		if got := f.cancelled(id, "t1"); got != "the agent withdrew the question" {
			t.Fatalf("withdrawn: %q", got)
		}
		f.ask(b, "t2", "Bash", `{"command":"make"}`)
		b.emit(sandbox.Event{Ev: sandbox.EvPermissionRequest, Request: &agent.PermissionRequest{RequestID: "req-again", ToolUseID: "t2", ToolName: "Bash",
			Input: json.RawMessage(`{"command":"rm -rf /"}`)}})
		f.settle()
		if d := b.decision("req-again"); d == nil || d.Behavior != "deny" {
			t.Fatalf("a question reusing a pending id: %+v", d)
		}
		if f.count(id, wire.TypeApprovalRequired) != 2 || b.decision("req-t2") != nil {
			t.Fatalf("events %q", f.types(id))
		}
		if err := f.m.End(context.Background(), id, ""); err != nil {
			t.Fatal(err)
		}
		f.settle()
		if got := f.cancelled(id, "t2"); got != "the session ended" {
			t.Fatalf("at the session's end: %q", got)
		}

		id2, b2 := f.start(PolicyAsk)
		f.ask(b2, "t3", "Bash", `{"command":"make"}`)
		b2.end(sandbox.Exit{Reason: sandbox.ExitCrash, Code: 2})
		f.settle()
		if got := f.cancelled(id2, "t3"); got != "the agent's sandbox ended" {
			t.Fatalf("when the sandbox died: %q", got)
		}
		if pending, _ := f.m.PendingApprovals(context.Background()); len(pending) != 0 {
			t.Fatalf("still pending: %s", pending)
		}

		// A daemon that starts finds t4 pending in the store: its asker
		// is gone (as if the daemon was killed), so it is cancelled.
		id3, b3 := f.start(PolicyAsk)
		f.ask(b3, "t4", "Bash", `{"command":"make"}`)
		if _, err := NewManager(context.Background(), f.cfg); err != nil {
			t.Fatal(err)
		}
		f.settle()
		if got := f.cancelled(id3, "t4"); got != "the daemon restarted" {
			t.Fatalf("left by a previous daemon: %q", got)
		}
	})
}

// TestPermissionInputPastWhatAPhoneIsShown: a request whose input is
// larger than a phone can be shown is denied by the daemon, whatever the
// policy, without a question.
func TestPermissionInputPastWhatAPhoneIsShown(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAutoApprove)
		big, err := json.Marshal(map[string]string{"file_path": filepath.Join(f.root, "a"), "content": strings.Repeat("x", sandbox.MaxMessage)})
		if err != nil {
			t.Fatal(err)
		}
		f.ask(b, "t1", "Write", string(big))
		if d := b.decision("req-t1"); d == nil || d.Behavior != "deny" || f.count(id, wire.TypeApprovalRequired) != 0 {
			t.Fatalf("decision %+v, events %q", d, f.types(id))
		}
		if f.status(id) != store.StatusIdle {
			t.Fatalf("status %q", f.status(id))
		}
	})
}
