package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/bridge/wire"
	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/internal/wstest"
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

// TestClaudeCodeThinkingAndUsage: the model's thinking reaches the phone
// as its own events, and every turn_complete says what the turn cost and
// what the session has used so far, which connection_ack lists too.
func TestClaudeCodeThinkingAndUsage(t *testing.T) {
	t.Parallel()
	bin := anthropicmock.ClaudeBin(t)
	api := anthropicmock.New(t, func(*anthropicmock.Request) anthropicmock.Reply {
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{
			anthropicmock.Thinking("The user wants a greeting; a short one will do."),
			anthropicmock.Text("Hello."),
		}}
	})
	d := newDaemonEnv(t, []string{
		"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, "--claude-bin", bin)
	c, _ := d.phone(nil)
	const id = "claude-think"
	c.Send(wire.TypeSessionStart, "start", map[string]any{"agent": "claude-code", "session_id": id, "working_directory": d.project})
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	var turns []wire.TurnComplete
	for i, msg := range []string{"hi", "hi again"} {
		c.Send(wire.TypeMessage, fmt.Sprintf("m%d", i), map[string]any{"session_id": id, "content": msg})
		var tc wire.TurnComplete
		c.WaitFor(wire.TypeTurnComplete, &tc, nil)
		turns = append(turns, tc)
	}
	var thought strings.Builder
	for _, e := range c.Seen {
		if e.Type == wire.TypeThinkingChunk {
			var p wire.ThinkingChunk
			wstest.Decode(t, e, &p)
			if p.SessionID != id || p.MessageID == "" {
				t.Errorf("thinking_chunk = %+v", p)
			}
			thought.WriteString(p.Content)
		}
	}
	if want := strings.Repeat("The user wants a greeting; a short one will do.", 2); thought.String() != want {
		t.Errorf("thinking = %q, want %q", thought.String(), want)
	}
	// The CLI's total grows over the process's turns; each turn's cost is
	// its share, and the session's cost their sum.
	first, second := turns[0], turns[1]
	if first.TurnCostUSD <= 0 || first.TurnCostUSD != first.TotalCostUSD || second.TotalCostUSD <= first.TotalCostUSD {
		t.Fatalf("costs: first %+v, second %+v", first, second)
	}
	if diff := second.TurnCostUSD - (second.TotalCostUSD - first.TotalCostUSD); diff > 1e-12 || diff < -1e-12 {
		t.Errorf("second turn's cost %v, totals %v then %v", second.TurnCostUSD, first.TotalCostUSD, second.TotalCostUSD)
	}
	su := second.SessionUsage
	if su == nil || su.Turns != 2 || su.InputTokens <= first.SessionUsage.InputTokens || su.OutputTokens == 0 {
		t.Fatalf("session_usage: first %+v, second %+v", first.SessionUsage, su)
	}
	if diff := su.CostUSD - second.TotalCostUSD; diff > 1e-9 || diff < -1e-9 {
		t.Errorf("session cost %v, the process's total %v", su.CostUSD, second.TotalCostUSD)
	}
	_, ack := d.phone(nil)
	for _, s := range ack.ActiveSessions {
		if s.SessionID == id && (s.Usage == nil || *s.Usage != *su) {
			t.Errorf("active_sessions usage = %+v, want %+v", s.Usage, su)
		}
	}
}
