package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
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

// TestClaudeCodeSettings: a session starts with the model and permission
// mode the phone chose, tells the phone the models and slash commands the
// CLI offers, and changes both while it runs; the CLI's requests to the
// API show each.
func TestClaudeCodeSettings(t *testing.T) {
	t.Parallel()
	bin := anthropicmock.ClaudeBin(t)
	api := anthropicmock.New(t, func(*anthropicmock.Request) anthropicmock.Reply {
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("ok")}}
	})
	d := newDaemonEnv(t, []string{
		"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, "--claude-bin", bin)
	c, _ := d.phone(nil)
	const id = "claude-settings"
	c.Send(wire.TypeSessionStart, "start", map[string]any{"agent": "claude-code", "session_id": id, "working_directory": d.project,
		"model": "claude-sonnet-4-5", "permission_mode": "plan"})
	var ready wire.SessionReady
	c.WaitFor(wire.TypeSessionReady, &ready, nil)
	if ready.Model != "claude-sonnet-4-5" || ready.PermissionMode != "plan" {
		t.Fatalf("session_ready = %+v", ready)
	}
	last := func() *anthropicmock.Request {
		reqs := api.MessageRequests()
		return reqs[len(reqs)-1]
	}
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "hello"})
	var info wire.AgentInfo
	c.WaitFor(wire.TypeAgentInfo, &info, nil)
	c.WaitFor(wire.TypeTurnComplete, nil, nil)
	if r := last(); r.Model != "claude-sonnet-4-5" || !r.HasText("user", "Plan mode is active") {
		t.Fatalf("first request: model %q, plan mode %v", r.Model, r.HasText("user", "Plan mode is active"))
	}
	var review *wire.SlashCommand
	for i, sc := range info.SlashCommands {
		if sc.Name == "review" {
			review = &info.SlashCommands[i]
		}
	}
	if info.Model != "claude-sonnet-4-5" || info.PermissionMode != "plan" || len(info.Models) == 0 || info.Models[0].Value == "" || review == nil || review.Description == "" {
		t.Fatalf("agent_info = %+v", info)
	}

	// While it runs: the answer is the new state, every device sees it.
	c.Send(wire.TypeSessionConfigure, "cfg", map[string]any{"session_id": id, "model": "claude-haiku-4-5", "permission_mode": "default", "max_thinking_tokens": 2048})
	var got wire.SessionSettings
	c.WaitFor(wire.TypeSessionConfigResp, &got, func(e wire.Envelope) bool { return e.ID == "cfg" })
	want := wire.SessionSettings{SessionID: id, Model: "claude-haiku-4-5", PermissionMode: "default", MaxThinkingTokens: 2048}
	if got != want {
		t.Fatalf("session_configure_response = %+v, want %+v", got, want)
	}
	var ev wire.SessionSettings
	evEnv := c.WaitFor(wire.TypeSessionSettings, &ev, nil)
	if ev.ChangedBy == "" || ev.Model != want.Model || ev.PermissionMode != want.PermissionMode {
		t.Fatalf("session_settings event = %+v", ev)
	}
	c.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "again"})
	c.WaitFor(wire.TypeTurnComplete, nil, func(e wire.Envelope) bool { return e.Seq > evEnv.Seq })
	// The plan mode reminder goes with each user message sent in plan
	// mode: the new message has none.
	r := last()
	inPlan := false
	for _, b := range r.LastMessage().Content {
		inPlan = inPlan || strings.Contains(b.Text, "Plan mode is active")
	}
	if r.Model != "claude-haiku-4-5" || inPlan || !strings.Contains(string(r.Body), `"budget_tokens":2048`) {
		t.Fatalf("after the change: model %q, plan mode %v", r.Model, inPlan)
	}

	// Refused: what this daemon does not allow, and malformed requests.
	for name, p := range map[string]any{
		"bypass":      map[string]any{"session_id": id, "permission_mode": "bypassPermissions"},
		"bad-mode":    map[string]any{"session_id": id, "permission_mode": "yolo"},
		"bad-model":   map[string]any{"session_id": id, "model": "sonnet; rm -rf /"},
		"bad-budget":  map[string]any{"session_id": id, "max_thinking_tokens": 5},
		"no-session":  map[string]any{"model": "sonnet"},
		"wrong-type":  map[string]any{"session_id": id, "model": 7},
		"not-object":  "sonnet",
		"unknown-ses": map[string]any{"session_id": "nope", "model": "sonnet"},
	} {
		c.Send(wire.TypeSessionConfigure, name, p)
		var ep wire.ErrorPayload
		c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == name })
		if want := wire.CodeInvalidMessage; name == "unknown-ses" && ep.Code != wire.CodeSessionNotFound || name != "unknown-ses" && ep.Code != want {
			t.Errorf("%s: error %+v", name, ep)
		}
	}
	_, ack := d.phone(nil)
	for _, s := range ack.ActiveSessions {
		if s.SessionID == id && (s.Model != want.Model || s.PermissionMode != want.PermissionMode || s.MaxThinkingTokens != 2048) {
			t.Errorf("active_sessions entry = %+v", s)
		}
	}
}

// TestClaudeCodePlansAndQuestions: in plan mode the agent's plan reaches
// the phone as a plan, which the phone sends back for more planning with
// feedback, then approves (the agent leaves plan mode); the agent's
// question reaches it as choices, and the chosen answer reaches the model
// as the tool's result.
func TestClaudeCodePlansAndQuestions(t *testing.T) {
	t.Parallel()
	const plan = "# Plan\n\n1. Add the flag.\n2. Test it."
	question := map[string]any{"question": "Which color?", "header": "Color", "multiSelect": false,
		"options": []any{map[string]any{"label": "Red", "description": "warm"}, map[string]any{"label": "Blue", "description": "cool"}}}
	bin := anthropicmock.ClaudeBin(t)
	api := anthropicmock.New(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		last := r.LastMessage()
		if len(last.Content) > 0 && last.Content[0].Type == "tool_result" {
			if strings.Contains(last.Content[0].ResultText(), "keep planning") {
				return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.ToolUse("ExitPlanMode", map[string]any{"plan": plan + "\n3. Add tests."})}}
			}
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("ok")}}
		}
		if r.HasText("user", "ask me") {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.ToolUse("AskUserQuestion", map[string]any{"questions": []any{question}})}}
		}
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.ToolUse("ExitPlanMode", map[string]any{"plan": plan})}}
	})
	d := newDaemonEnv(t, []string{
		"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, "--claude-bin", bin)
	c, _ := d.phone(nil)
	const id = "claude-plan"
	// Even a session that approves everything asks for plans and answers.
	c.Send(wire.TypeSessionStart, "start", map[string]any{"agent": "claude-code", "session_id": id, "working_directory": d.project,
		"permission_mode": "plan", "policy": "auto_approve"})
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "plan the flag"})

	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	var params struct {
		Plan string `json:"plan"`
	}
	json.Unmarshal(ar.Params, &params)
	if ar.Kind != "plan" || ar.Tool != "ExitPlanMode" || params.Plan != plan || !strings.HasPrefix(ar.RememberScope, "not remembered") {
		t.Fatalf("approval_required = %+v", ar)
	}
	c.Send(wire.TypeApprovalResponse, "keep", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "rejected", "reason": "add tests"})
	first := ar.ToolCallID
	c.WaitFor(wire.TypeApprovalRequired, &ar, func(e wire.Envelope) bool {
		var p wire.ApprovalRequired
		json.Unmarshal(e.Payload, &p)
		return p.ToolCallID != first
	})
	json.Unmarshal(ar.Params, &params)
	if ar.Kind != "plan" || !strings.HasSuffix(params.Plan, "3. Add tests.") {
		t.Fatalf("second plan = %+v", ar)
	}
	fed := false
	for _, r := range api.MessageRequests() {
		for _, b := range r.ToolResults() {
			fed = fed || b.IsError && strings.Contains(b.ResultText(), "keep planning: add tests")
		}
	}
	if !fed {
		t.Fatal("the model never got the feedback")
	}
	c.Send(wire.TypeApprovalResponse, "go", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	var st wire.SessionSettings
	c.WaitFor(wire.TypeSessionSettings, &st, nil)
	if st.PermissionMode != "default" || st.ChangedBy != "agent" {
		t.Fatalf("after the plan's approval: session_settings %+v", st)
	}
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), ar.ToolCallID) })
	if !tr.Result.Success || !strings.Contains(tr.Result.Content, "approved your plan") {
		t.Fatalf("the plan's tool_result = %+v", tr)
	}
	c.WaitFor(wire.TypeTurnComplete, nil, nil)

	c.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "ask me"})
	asked := c.WaitFor(wire.TypeApprovalRequired, &ar, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), "AskUserQuestion") })
	if ar.Kind != "question" || !strings.Contains(string(ar.Params), "Which color?") {
		t.Fatalf("question = %+v", ar)
	}
	// Malformed answers leave the question pending.
	for name, p := range map[string]map[string]any{
		"none":       {"decision": "approved"},
		"empty":      {"decision": "approved", "answers": map[string]string{"Which color?": " "}},
		"not-asked":  {"decision": "approved", "answers": map[string]string{"Which color?": "Blue", "Why?": "because"}},
		"wrong-type": {"decision": "approved", "answers": []string{"Blue"}},
		"too-long":   {"decision": "approved", "answers": map[string]string{"Which color?": strings.Repeat("b", 4097)}},
		"modified":   {"decision": "modified", "modifications": map[string]any{"instructions": "pick one"}},
		"rejected":   {"decision": "rejected", "answers": map[string]string{"Which color?": "Blue"}},
	} {
		p["session_id"], p["tool_call_id"] = id, ar.ToolCallID
		c.Send(wire.TypeApprovalResponse, name, p)
		var ep wire.ErrorPayload
		c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == name })
		if ep.Code != wire.CodeInvalidMessage {
			t.Errorf("%s: %+v", name, ep)
		}
	}
	c.Send(wire.TypeApprovalResponse, "answer", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved",
		"answers": map[string]string{"Which color?": "Blue"}})
	c.WaitFor(wire.TypeTurnComplete, nil, func(e wire.Envelope) bool { return e.Seq > asked.Seq })
	got := false
	for _, r := range api.MessageRequests() {
		for _, b := range r.ToolResults() {
			got = got || !b.IsError && strings.Contains(b.ResultText(), `"Which color?"="Blue"`)
		}
	}
	if !got {
		t.Fatal("the model never got the answer")
	}
}
