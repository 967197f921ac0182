package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/bridge/wire"
	"github.com/tetherdev/tether/internal/anthropicmock"
)

// TestClaudeCodeSessionEndToEnd drives the real Claude Code CLI inside a
// tether sandbox from a phone connection; only the model is mocked.
func TestClaudeCodeSessionEndToEnd(t *testing.T) {
	bin := anthropicmock.ClaudeBin(t)
	api := anthropicmock.New(t, anthropicmock.Queue(
		anthropicmock.Reply{Blocks: []anthropicmock.Block{
			anthropicmock.Text("I'll write the marker."),
			anthropicmock.ToolUse("Bash", map[string]any{"command": "echo hello-from-claude > marker.txt", "description": "Write marker file"}),
		}, StopReason: "tool_use"},
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Done: the marker is written.")}},
	))
	d := newDaemonEnv(t, []string{
		"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, "--claude-bin", bin)
	c, ack := d.phone(nil)
	if !strings.Contains(strings.Join(ack.SupportedAgents, ","), "claude-code") {
		t.Fatalf("supported_agents = %v", ack.SupportedAgents)
	}
	const id = "claude-e2e"
	c.Send(wire.TypeSessionStart, "start", map[string]any{"agent": "claude-code", "session_id": id, "working_directory": d.project, "policy": "ask"})
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "please write the marker"})

	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	if ar.Tool != "Bash" || ar.Source != "agent_sdk" || !strings.Contains(string(ar.Params), "hello-from-claude") {
		t.Fatalf("approval_required = %+v", ar)
	}
	c.Send(wire.TypeApprovalResponse, "r1", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	var done wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &done, nil)
	if !tr.Result.Success || done.IsError || !strings.Contains(streamed(c), "Done: the marker is written.") {
		t.Fatalf("tool_result %+v, turn %+v, text %q", tr, done, streamed(c))
	}
	if b, err := os.ReadFile(filepath.Join(d.project, "marker.txt")); err != nil || string(b) != "hello-from-claude\n" {
		t.Fatalf("marker: %q, %v", b, err)
	}
	// The tool's output went back to the model.
	last := api.MessageRequests()[len(api.MessageRequests())-1]
	if len(last.ToolResults()) == 0 {
		t.Fatal("the mock never got the tool_result")
	}
}
