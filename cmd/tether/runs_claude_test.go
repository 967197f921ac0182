package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/runs"
	"github.com/tetherdev/tether/wire"
)

// TestRunWithClaudeCode: the real Claude Code CLI, in its sandbox, uses
// the run's tools through tether's MCP server (tether mcp, which the CLI
// starts inside the sandbox): it receives, then sends its result; a demo
// reviewer passes it, and the run ends. Only the model is mocked.
func TestRunWithClaudeCode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the Claude Code CLI")
	}
	bin := anthropicmock.ClaudeBin(t)
	const result = "Round 1: the greeting is written. send: implementer review/PASS Round 1: fine"
	api := anthropicmock.New(t, func(req *anthropicmock.Request) anthropicmock.Reply {
		last := req.LastMessage()
		var results []string
		for _, b := range req.ToolResults() {
			results = append(results, b.ResultText())
		}
		switch {
		case !req.HasText("user", "tether run"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("ok")}}
		case len(results) == 0:
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{
				anthropicmock.ToolUse("mcp__tether__receive_messages", map[string]any{}),
			}, StopReason: "tool_use"}
		case len(results) == 1 && last.Role == "user":
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{
				anthropicmock.ToolUse("mcp__tether__send_to_agent", map[string]any{"to": "reviewer", "type": "result", "content": result, "signal": "DONE"}),
			}, StopReason: "tool_use"}
		default:
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Sent to the reviewer.")}}
		}
	})
	d := newDaemonEnv(t, []string{
		"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, "--claude-bin", bin)
	c, _ := d.phone(nil)
	c.Send(wire.TypeRunStart, "start", map[string]any{"task": "Write a greeting.", "working_directory": d.project, "policy": "ask",
		"participants": []map[string]string{{"name": "implementer", "agent": "claude-code", "role": "implementer"}, {"name": "reviewer", "agent": "demo", "role": "reviewer"}}})
	var started runs.RunUpdate
	c.WaitFor(wire.TypeRunStartResponse, &started, nil)
	var end runs.RunUpdate
	c.WaitFor(wire.TypeRunUpdate, &end, runEnded(started.Run.RunID))
	if end.Run.Status != "passed" {
		t.Fatalf("the run ended %s: %s", end.Run.Status, end.Run.Reason)
	}
	for _, e := range c.Seen {
		if e.Type == wire.TypeApprovalRequired {
			t.Fatalf("tether's own tools were asked about: %s", e.Payload)
		}
	}
	got := runMessages(c, started.Run.RunID)
	if m := got[2]; m.From != "implementer" || m.To != "reviewer" || m.Type != "result" || m.Signal != "DONE" || m.Content != result {
		t.Fatalf("the CLI's message is %+v", m)
	}
	if m := got[3]; m.From != "reviewer" || m.Signal != "PASS" {
		t.Fatalf("the review is %+v", m)
	}

	// What the model saw: the tools offered, and what each call answered,
	// once the CLI's turn has ended (the demo reviewer may pass it first).
	impl := started.Run.Participants[0].SessionID
	seenOrWait(c, wire.TypeTurnComplete, nil, forSession(impl))
	var offered, answers []string
	for _, req := range api.MessageRequests() {
		if slices.Contains(req.Tools, "mcp__tether__send_to_agent") {
			offered = req.Tools
		}
		for _, b := range req.ToolResults() {
			answers = append(answers, b.ResultText())
		}
	}
	for _, tool := range []string{"mcp__tether__send_to_agent", "mcp__tether__receive_messages", "mcp__tether__bridge_status"} {
		if !slices.Contains(offered, tool) {
			t.Fatalf("the model was not offered %s: %v", tool, offered)
		}
	}
	answers = slices.Compact(answers)
	if len(answers) != 2 {
		t.Fatalf("tool results %q", answers)
	}
	var received struct{ Messages []runs.Message }
	if err := json.Unmarshal([]byte(answers[0]), &received); err != nil || received.Messages == nil || len(received.Messages) != 0 {
		t.Fatalf("receive_messages answered %s: the task is the turn itself, nothing else came", answers[0])
	}
	var sent runs.SendResult
	if err := json.Unmarshal([]byte(answers[1]), &sent); err != nil || sent.Seq != 2 || sent.Duplicate || !strings.HasPrefix(sent.ID, runs.GenerateID("result", "implementer", "reviewer", result)[:16]) {
		t.Fatalf("send_to_agent answered %s", answers[1])
	}
}
