package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/internal/openaimock"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/runs"
	"github.com/tetherdev/tether/wire"
)

// TestRunWithCodexAndClaudeCode: one run of two real CLIs, each in its own
// sandbox with tether's MCP server (tether mcp): Codex, the implementer,
// finds the run's tools with its tool_search, receives, and sends its
// result (DONE); Claude Code, the reviewer, gets it as its turn and sends
// PASS, which ends the run. Neither is asked about tether's own tools; the
// phone sees each call as a tool_call and its tool_result; each mock sees
// what the calls answered. Only the models are mocked.
func TestRunWithCodexAndClaudeCode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the Codex and Claude Code CLIs")
	}
	claudeBin, codexBin := anthropicmock.ClaudeBin(t), openaimock.CodexBin(t)
	const (
		result = "Round 1: the greeting is written."
		review = "Round 1: the greeting reads well."
	)
	codexAPI := openaimock.New(t, func(req *openaimock.Request) openaimock.Reply {
		searched := false
		for _, it := range req.Input {
			searched = searched || it.Type == "tool_search_output"
		}
		outputs := len(req.Outputs())
		switch {
		case !req.HasText("user", "tether run"):
			return openaimock.Reply{Items: []openaimock.Item{openaimock.Text("ok")}}
		case !searched:
			return openaimock.Reply{Items: []openaimock.Item{openaimock.ToolSearch("tether run send_to_agent receive_messages")}}
		case outputs == 0:
			return openaimock.Reply{Items: []openaimock.Item{openaimock.NamespacedCall("mcp__tether", "receive_messages", map[string]any{})}}
		case outputs == 1:
			return openaimock.Reply{Items: []openaimock.Item{openaimock.NamespacedCall("mcp__tether", "send_to_agent",
				map[string]any{"to": "reviewer", "type": "result", "content": result, "signal": "DONE"})}}
		default:
			return openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Sent to the reviewer.")}}
		}
	})
	claudeAPI := anthropicmock.New(t, func(req *anthropicmock.Request) anthropicmock.Reply {
		switch {
		case !req.HasText("user", result):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("ok")}}
		case len(req.ToolResults()) == 0:
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{
				anthropicmock.ToolUse("mcp__tether__send_to_agent", map[string]any{"to": "implementer", "type": "review", "content": review, "signal": "PASS"}),
			}, StopReason: "tool_use"}
		default:
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Passed.")}}
		}
	})
	d := newDaemonEnv(t, []string{
		"ANTHROPIC_BASE_URL=" + claudeAPI.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"OPENAI_API_KEY=sk-mock-not-a-key", "OPENAI_BASE_URL=" + codexAPI.URL,
	}, "--claude-bin", claudeBin, "--codex-bin", codexBin)
	dir := filepath.Join(filepath.Dir(d.project), ".codex")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte("model = \"gpt-5.5\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := d.phone(nil)
	c.Send(wire.TypeRunStart, "start", map[string]any{"task": "Write a greeting.", "working_directory": d.project, "policy": "ask",
		"participants": []map[string]string{{"name": "implementer", "agent": "codex", "role": "implementer"}, {"name": "reviewer", "agent": "claude-code", "role": "reviewer"}}})
	var started runs.RunUpdate
	c.WaitFor(wire.TypeRunStartResponse, &started, nil)
	var end runs.RunUpdate
	c.WaitFor(wire.TypeRunUpdate, &end, runEnded(started.Run.RunID))
	if end.Run.Status != "passed" {
		t.Fatalf("the run ended %s: %s", end.Run.Status, end.Run.Reason)
	}
	got := runMessages(c, started.Run.RunID)
	if m := got[1]; m.From != runs.User || m.To != "implementer" || m.Type != "task" {
		t.Fatalf("the task is %+v", m)
	}
	if m := got[2]; m.From != "implementer" || m.To != "reviewer" || m.Type != "result" || m.Signal != "DONE" || m.Content != result {
		t.Fatalf("Codex's message is %+v", m)
	}
	if m := got[3]; m.From != "reviewer" || m.To != "implementer" || m.Type != "review" || m.Signal != "PASS" || m.Content != review {
		t.Fatalf("Claude Code's review is %+v", m)
	}

	// Once both turns have ended: what the phone saw of the calls, and
	// what each model was answered.
	impl, rev := started.Run.Participants[0].SessionID, started.Run.Participants[1].SessionID
	seenOrWait(c, wire.TypeTurnComplete, &wire.TurnComplete{}, forSession(impl))
	seenOrWait(c, wire.TypeTurnComplete, &wire.TurnComplete{}, forSession(rev))
	calls := map[string][]string{}
	results := map[string]wire.ToolResult{}
	for _, e := range c.Seen {
		switch e.Type {
		case wire.TypeApprovalRequired:
			t.Fatalf("tether's own tools were asked about: %s", e.Payload)
		case wire.TypeToolCall:
			var tc wire.ToolCall
			wstest.Decode(t, e, &tc)
			calls[tc.SessionID] = append(calls[tc.SessionID], tc.Tool)
		case wire.TypeToolResult:
			var tr wire.ToolResult
			wstest.Decode(t, e, &tr)
			results[tr.SessionID+" "+tr.Tool] = tr
		}
	}
	if strings.Join(calls[impl], ",") != "mcp__tether__receive_messages,mcp__tether__send_to_agent" ||
		strings.Join(calls[rev], ",") != "mcp__tether__send_to_agent" {
		t.Fatalf("tool_call events %v", calls)
	}
	var sent, passed runs.SendResult
	if tr := results[impl+" mcp__tether__send_to_agent"]; !tr.Result.Success || json.Unmarshal([]byte(tr.Result.Content), &sent) != nil || sent.Seq != 2 {
		t.Fatalf("Codex's send_to_agent tool_result %+v", tr)
	}
	if tr := results[rev+" mcp__tether__send_to_agent"]; !tr.Result.Success || json.Unmarshal([]byte(tr.Result.Content), &passed) != nil || passed.Seq != 3 {
		t.Fatalf("Claude Code's send_to_agent tool_result %+v", tr)
	}

	var codexSaw []string
	for _, req := range codexAPI.Requests() {
		codexSaw = append(codexSaw, mapValues(req.Outputs())...)
	}
	joined := strings.Join(codexSaw, "\n")
	if !strings.Contains(joined, `{"messages":[]}`) || !strings.Contains(joined, `"id":"`+sent.ID+`"`) {
		t.Fatalf("Codex's model was answered %q", codexSaw)
	}
	var claudeSaw []string
	for _, req := range claudeAPI.MessageRequests() {
		for _, b := range req.ToolResults() {
			claudeSaw = append(claudeSaw, b.ResultText())
		}
	}
	if len(claudeSaw) == 0 || !strings.Contains(claudeSaw[len(claudeSaw)-1], `"id":"`+passed.ID+`"`) {
		t.Fatalf("Claude Code's model was answered %q", claudeSaw)
	}
}
