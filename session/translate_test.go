package session

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// Lines as the real Claude Code CLI prints them (claude-code-observed.md),
// trimmed to the fields that matter.
var observedTurn = []string{
	`{"type":"system","subtype":"init","session_id":"fc37c3a1","cwd":"/home/dev/project","tools":["Bash"]}`,
	`{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_1","role":"assistant"}},"session_id":"fc37c3a1"}`,
	`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}`,
	`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}}`,
	`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check."}}}`,
	`{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"Let me check."}]},"session_id":"fc37c3a1"}`,
	`{"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}}}`,
	`{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}}}`,
	`{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls","description":"List files"}}]}}`,
	`{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}}`,
	`{"type":"stream_event","event":{"type":"message_stop"}}`,
	`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"a.txt\nb.txt","is_error":false}]},"tool_use_result":{"stdout":"a.txt\nb.txt"}}`,
	`{"type":"system","subtype":"hook_started","hook_id":"h","hook_event":"PostToolUse"}`,
	`{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_2"}}}`,
	`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Two files."}}}`,
	`{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"end_turn"}}}`,
	`{"type":"stream_event","event":{"type":"message_stop"}}`,
	`{"type":"assistant","message":{"id":"msg_2","content":[{"type":"text","text":"Two files."}]}}`,
	`{"type":"result","subtype":"success","is_error":false,"duration_ms":169,"num_turns":2,"result":"Two files.","session_id":"fc37c3a1","total_cost_usd":0.00035,"usage":{"input_tokens":20,"output_tokens":10}}`,
}

func translate(lines []string) ([]Entry, *translator) {
	var out []Entry
	tr := newTranslator("s1", func(e Entry) { out = append(out, e) }, time.Now)
	for _, l := range lines {
		tr.handle(json.RawMessage(l))
	}
	return out, tr
}

func TestTranslateObservedTurn(t *testing.T) {
	t.Parallel()
	out, tr := translate(observedTurn)
	if tr.agentSess != "fc37c3a1" {
		t.Errorf("agent session id = %q", tr.agentSess)
	}
	var types []string
	for _, e := range out {
		types = append(types, e.Type)
	}
	want := []string{
		wire.TypeAgentInfo,
		wire.TypeStreamStart, wire.TypeStreamChunk, wire.TypeStreamChunk, wire.TypeToolCall, wire.TypeStreamEnd,
		wire.TypeToolResult,
		wire.TypeStreamStart, wire.TypeStreamChunk, wire.TypeStreamEnd,
		wire.TypeTurnComplete,
	}
	if len(types) != len(want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("events %v, want %v", types, want)
		}
	}
	if end := out[5].Payload.(wire.StreamEnd); end.FinishReason != "tool_call" || end.MessageID != "msg_1" {
		t.Errorf("first stream_end = %+v", end)
	}
	call := out[4].Payload.(wire.ToolCall)
	if call.ToolCallID != "toolu_1" || call.Tool != "Bash" || call.Description != "List files" || out[4].ID != "call-toolu_1" {
		t.Errorf("tool_call = %+v", call)
	}
	res := out[6].Payload.(wire.ToolResult)
	if !res.Result.Success || res.Result.Content != "a.txt\nb.txt" || res.Tool != "Bash" || out[6].ID == out[4].ID {
		t.Errorf("tool_result = %+v", res)
	}
	done := out[10].Payload.(wire.TurnComplete)
	if done.NumTurns != 2 || done.TotalCostUSD != 0.00035 || done.Subtype != "success" || done.Result != "Two files." {
		t.Errorf("turn_complete = %+v", done)
	}
}

func TestTranslateWithoutPartialMessages(t *testing.T) {
	t.Parallel()
	out, _ := translate([]string{
		`{"type":"assistant","message":{"id":"msg_9","content":[{"type":"text","text":"Whole reply."}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_x","content":[{"type":"text","text":"line 1"},{"type":"text","text":"line 2"}],"is_error":true}]}}`,
		`{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":1}`,
		`not json`,
		`{"type":"stream_event"}`,
		`{"type":"assistant"}`,
	})
	types := []string{}
	for _, e := range out {
		types = append(types, e.Type)
	}
	if len(out) != 5 || types[0] != wire.TypeStreamStart || types[1] != wire.TypeStreamChunk || types[2] != wire.TypeStreamEnd ||
		types[3] != wire.TypeToolResult || types[4] != wire.TypeTurnComplete {
		t.Fatalf("events %v", types)
	}
	if c := out[1].Payload.(wire.StreamChunk); c.Content != "Whole reply." {
		t.Errorf("chunk = %+v", c)
	}
	if r := out[3].Payload.(wire.ToolResult); r.Result.Success || r.Result.Content != "line 1\nline 2" || r.Result.Error != r.Result.Content {
		t.Errorf("failed tool_result = %+v", r)
	}
}

func FuzzTranslate(f *testing.F) {
	for _, l := range observedTurn {
		f.Add(l)
	}
	f.Add(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}}`)
	f.Add(`{"type":"assistant","message":{"id":"m","content":[{"type":"thinking","thinking":"whole"}]}}`)
	f.Add(`{"type":"result","total_cost_usd":-1,"usage":{"input_tokens":"x"}}`)
	f.Fuzz(func(t *testing.T, line string) {
		tr := newTranslator("s", func(e Entry) {
			if _, err := json.Marshal(e.Payload); err != nil {
				t.Fatalf("unencodable %s: %v", e.Type, err)
			}
		}, time.Now)
		tr.handle(json.RawMessage(line))
	})
}

func TestTranslateThinking(t *testing.T) {
	t.Parallel()
	out, _ := translate([]string{
		`{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_t"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"let me "}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}}`,
		`{"type":"assistant","message":{"id":"msg_t","content":[{"type":"thinking","thinking":"let me think","signature":"sig"}]}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Answer."}}}`,
		`{"type":"assistant","message":{"id":"msg_t","content":[{"type":"text","text":"Answer."}]}}`,
		`{"type":"stream_event","event":{"type":"message_stop"}}`,
		// Without partial messages the thinking arrives whole; a redacted
		// block has nothing to show.
		`{"type":"assistant","message":{"id":"msg_u","content":[{"type":"redacted_thinking","data":"xx"},{"type":"thinking","thinking":"whole thought"},{"type":"text","text":"Two."}]}}`,
	})
	var got []string
	for _, e := range out {
		switch p := e.Payload.(type) {
		case wire.ThinkingChunk:
			got = append(got, "think:"+p.MessageID+":"+p.Content)
		case wire.StreamChunk:
			got = append(got, "text:"+p.MessageID+":"+p.Content)
		}
	}
	want := []string{"think:msg_t:let me ", "think:msg_t:think", "text:msg_t:Answer.", "think:msg_u:whole thought", "text:msg_u:Two."}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// Claude Code's total_cost_usd is the process's running total (observed:
// 0.099, 0.298, 0.498 over three turns of one process; a resumed process
// starts again from zero): a turn's cost is what it grew by.
func TestTranslateTurnCost(t *testing.T) {
	t.Parallel()
	out, _ := translate([]string{
		`{"type":"result","subtype":"success","total_cost_usd":0.25,"usage":{"input_tokens":100,"output_tokens":7,"cache_read_input_tokens":3,"cache_creation_input_tokens":2}}`,
		`{"type":"result","subtype":"success","total_cost_usd":0.75,"usage":{"input_tokens":200,"output_tokens":8}}`,
		`{"type":"result","subtype":"success","total_cost_usd":0.125,"usage":{"input_tokens":50,"output_tokens":1}}`,
		`{"type":"result","subtype":"success","usage":"not an object"}`,
	})
	var costs []float64
	var usage []store.Usage
	for _, e := range out {
		tc := e.Payload.(wire.TurnComplete)
		costs = append(costs, tc.TurnCostUSD)
		usage = append(usage, turnUsage(tc))
	}
	if want := []float64{0.25, 0.5, 0.125, 0}; len(costs) != 4 || costs[0] != want[0] || costs[1] != want[1] || costs[2] != want[2] || costs[3] != want[3] {
		t.Fatalf("turn costs = %v, want %v", costs, want)
	}
	if u := usage[0]; u != (store.Usage{Turns: 1, InputTokens: 100, OutputTokens: 7, CacheReadTokens: 3, CacheCreationTokens: 2, CostUSD: 0.25}) {
		t.Errorf("first turn's usage = %+v", u)
	}
	if u := usage[3]; u != (store.Usage{Turns: 1}) {
		t.Errorf("a malformed usage counts the turn only: %+v", u)
	}
}

func TestTranslateAgentInfo(t *testing.T) {
	t.Parallel()
	var modes []string
	var out []Entry
	tr := newTranslator("s1", func(e Entry) { out = append(out, e) }, time.Now)
	tr.onMode = func(m string) { modes = append(modes, m) }
	for _, l := range []string{
		`{"type":"system","subtype":"init","session_id":"a","model":"claude-opus-4-8[1m]","permissionMode":"plan","slash_commands":["review","init"],"claude_code_version":"2.1.197"}`,
		`{"type":"result","subtype":"success","total_cost_usd":0.5}`,
		// The same init again: nothing new to say.
		`{"type":"system","subtype":"init","session_id":"a","model":"claude-opus-4-8[1m]","permissionMode":"plan","slash_commands":["review","init"],"claude_code_version":"2.1.197"}`,
		`{"type":"system","subtype":"status","status":null,"permissionMode":"default"}`,
		// A new process: its initialize answer lists models and commands
		// with descriptions, and its cost counts from zero.
		`{"type":"control_response","response":{"subtype":"success","request_id":"tether_initialize_2","response":{"commands":[{"name":"review","description":"Review a pull request","argumentHint":"PR"}],"models":[{"value":"sonnet","displayName":"Sonnet","description":"` + strings.Repeat("é", 300) + `"}],"pid":7}}}`,
		`{"type":"control_response","response":{"subtype":"success","request_id":"tether_control_3"}}`,
		`{"type":"system","subtype":"init","session_id":"a","model":"claude-sonnet-5","permissionMode":"default","slash_commands":["review"],"claude_code_version":"2.1.197"}`,
		`{"type":"result","subtype":"success","total_cost_usd":0.75}`,
		`{"type":"system","subtype":"init","session_id":"a","slash_commands":{"not":"a list"}}`,
	} {
		tr.handle(json.RawMessage(l))
	}
	var infos []wire.AgentInfo
	var costs []float64
	for _, e := range out {
		switch p := e.Payload.(type) {
		case wire.AgentInfo:
			infos = append(infos, p)
		case wire.TurnComplete:
			costs = append(costs, p.TurnCostUSD)
		}
	}
	if len(infos) != 3 {
		t.Fatalf("agent_info events: %+v", infos)
	}
	if i := infos[0]; i.Model != "claude-opus-4-8[1m]" || i.PermissionMode != "plan" || i.Version != "2.1.197" || len(i.SlashCommands) != 2 || i.SlashCommands[1].Name != "init" || i.Models != nil {
		t.Errorf("first agent_info = %+v", i)
	}
	i := infos[1]
	if i.Model != "claude-sonnet-5" || len(i.Models) != 1 || i.Models[0].Value != "sonnet" || len([]rune(i.Models[0].Description)) != maxDescription ||
		len(i.SlashCommands) != 1 || i.SlashCommands[0] != (wire.SlashCommand{Name: "review", Description: "Review a pull request", ArgumentHint: "PR"}) {
		t.Errorf("agent_info after initialize = %+v", i)
	}
	if i := infos[2]; i.Model != "" || len(i.SlashCommands) != 1 || i.SlashCommands[0].Description == "" {
		t.Errorf("an init without a list keeps the described commands: %+v", i)
	}
	if want := []string{"plan", "plan", "default", "default"}; strings.Join(modes, ",") != strings.Join(want, ",") {
		t.Errorf("modes reported = %v, want %v", modes, want)
	}
	if len(costs) != 2 || costs[0] != 0.5 || costs[1] != 0.75 {
		t.Errorf("turn costs = %v: a new process counts from zero", costs)
	}
}
