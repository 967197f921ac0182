package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/sandbox/demo"
)

// host records what the agent emits and answers permission requests with
// decide.
type host struct {
	mu       sync.Mutex
	msgs     []map[string]any
	requests []agent.PermissionRequest
	decide   func(ctx context.Context, req agent.PermissionRequest) (agent.PermissionDecision, error)
}

func (h *host) Emit(msg json.RawMessage) {
	var m map[string]any
	if err := json.Unmarshal(msg, &m); err != nil {
		panic(err)
	}
	h.mu.Lock()
	h.msgs = append(h.msgs, m)
	h.mu.Unlock()
}

func (h *host) RequestPermission(ctx context.Context, req agent.PermissionRequest) (agent.PermissionDecision, error) {
	h.mu.Lock()
	h.requests = append(h.requests, req)
	h.mu.Unlock()
	return h.decide(ctx, req)
}

func answer(d agent.PermissionDecision) func(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) {
	return func(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) { return d, nil }
}

// ofType returns the recorded messages of type typ.
func (h *host) ofType(typ string) []map[string]any {
	var out []map[string]any
	for _, m := range h.msgs {
		if m["type"] == typ {
			out = append(out, m)
		}
	}
	return out
}

func (h *host) result(t *testing.T) map[string]any {
	t.Helper()
	rs := h.ofType("result")
	if len(rs) != 1 {
		t.Fatalf("%d result messages, want 1", len(rs))
	}
	if h.msgs[len(h.msgs)-1]["type"] != "result" {
		t.Errorf("last message is %v, want the result", h.msgs[len(h.msgs)-1]["type"])
	}
	return rs[0]
}

// toolResult returns the tool_result block.
func (h *host) toolResult(t *testing.T) map[string]any {
	t.Helper()
	for _, m := range h.ofType("user") {
		for _, c := range m["message"].(map[string]any)["content"].([]any) {
			if b := c.(map[string]any); b["type"] == "tool_result" {
				return b
			}
		}
	}
	t.Fatal("no tool_result")
	return nil
}

func newAgent(t *testing.T, opts demo.Options) *demo.Agent {
	t.Helper()
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	opts.ChunkDelay = -1
	a, err := demo.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPlainTurnHasClaudeShapes(t *testing.T) {
	t.Parallel()
	a := newAgent(t, demo.Options{})
	h := &host{}
	if a.SessionID() != "" {
		t.Errorf("session id %q before the first turn", a.SessionID())
	}
	if err := a.Query(context.Background(), "ping ünïcode", h); err != nil {
		t.Fatal(err)
	}
	init := h.msgs[0]
	if init["type"] != "system" || init["subtype"] != "init" || init["session_id"] != a.SessionID() || a.SessionID() == "" {
		t.Errorf("first message %v, want system/init with the session id", init)
	}
	var text strings.Builder
	deltas := 0
	for _, m := range h.ofType("stream_event") {
		ev := m["event"].(map[string]any)
		if ev["type"] == "content_block_delta" {
			deltas++
			text.WriteString(ev["delta"].(map[string]any)["text"].(string))
		}
	}
	if deltas < 3 || !strings.Contains(text.String(), `"ping ünïcode"`) {
		t.Errorf("%d deltas, text %q; want several quoting the prompt", deltas, text.String())
	}
	asst := h.ofType("assistant")
	if len(asst) != 1 {
		t.Fatalf("%d assistant messages, want 1", len(asst))
	}
	block := asst[0]["message"].(map[string]any)["content"].([]any)[0].(map[string]any)
	if block["type"] != "text" || block["text"] != text.String() {
		t.Errorf("assistant block %v, want the streamed text", block)
	}
	res := h.result(t)
	for k, want := range map[string]any{"subtype": "success", "is_error": false, "num_turns": 1.0, "total_cost_usd": 0.0, "session_id": a.SessionID()} {
		if res[k] != want {
			t.Errorf("result %s = %v, want %v", k, res[k], want)
		}
	}
	for _, k := range []string{"duration_ms", "usage", "result"} {
		if _, ok := res[k]; !ok {
			t.Errorf("result lacks %s", k)
		}
	}
}

func TestRunCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		prompt    string
		decision  agent.PermissionDecision
		wantError bool
		wantOut   string
		wantFile  bool
	}{
		{"allowed", "run: echo out; echo err >&2; touch made", agent.PermissionDecision{Behavior: "allow"}, false, "out\nerr", true},
		{"failing", "run: echo bad; exit 3", agent.PermissionDecision{Behavior: "allow"}, true, "Exit code 3\nbad", false},
		{"killed", "run: kill -9 $$", agent.PermissionDecision{Behavior: "allow"}, true, "Exit code 137", false},
		{"silent", "run: true", agent.PermissionDecision{Behavior: "allow"}, false, "(Bash completed with no output)", false},
		{"updated input", "run: touch wrong", agent.PermissionDecision{Behavior: "allow", UpdatedInput: json.RawMessage(`{"command":"touch made"}`)}, false, "(Bash completed with no output)", true},
		{"denied", "run: touch made", agent.PermissionDecision{Behavior: "deny", Message: "not now"}, true, "not now", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := t.TempDir()
			a := newAgent(t, demo.Options{WorkDir: work})
			h := &host{decide: answer(tt.decision)}
			if err := a.Query(context.Background(), tt.prompt, h); err != nil {
				t.Fatal(err)
			}
			if len(h.requests) != 1 || h.requests[0].ToolName != "Bash" {
				t.Fatalf("requests %+v, want one for Bash", h.requests)
			}
			var in map[string]string
			json.Unmarshal(h.requests[0].Input, &in)
			if in["command"] != strings.TrimPrefix(tt.prompt, "run: ") {
				t.Errorf("asked for %v", in)
			}
			// The tool_use block comes before the question, with its id.
			var toolUse map[string]any
			for _, m := range h.ofType("assistant") {
				if b := m["message"].(map[string]any)["content"].([]any)[0].(map[string]any); b["type"] == "tool_use" {
					toolUse = b
				}
			}
			if toolUse == nil || toolUse["id"] != h.requests[0].ToolUseID {
				t.Errorf("tool_use %v, want id %s", toolUse, h.requests[0].ToolUseID)
			}
			tr := h.toolResult(t)
			if tr["content"] != tt.wantOut || tr["is_error"] != tt.wantError || tr["tool_use_id"] != h.requests[0].ToolUseID {
				t.Errorf("tool_result %v, want content %q, is_error %v", tr, tt.wantOut, tt.wantError)
			}
			_, err := os.Stat(filepath.Join(work, "made"))
			if tt.wantFile != (err == nil) {
				t.Errorf("file made: %v, want %v", err == nil, tt.wantFile)
			}
			res := h.result(t)
			if res["subtype"] != "success" || res["num_turns"] != 2.0 {
				t.Errorf("result %v, want success in 2 turns", res)
			}
			if denials := res["permission_denials"].([]any); (len(denials) == 1) != (tt.decision.Behavior == "deny") {
				t.Errorf("permission_denials %v", denials)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	a := newAgent(t, demo.Options{WorkDir: work})
	h := &host{decide: answer(agent.PermissionDecision{Behavior: "allow"})}
	if err := a.Query(context.Background(), "write: a/b.txt\nline one\nline two", h); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(work, "a", "b.txt"))
	if err != nil || string(b) != "line one\nline two" {
		t.Errorf("file: %q, %v", b, err)
	}
	if tr := h.toolResult(t); tr["is_error"] != false || !strings.HasPrefix(tr["content"].(string), "File created successfully at: ") {
		t.Errorf("tool_result %v", tr)
	}
}

func TestInterruptKillsCommand(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	a := newAgent(t, demo.Options{WorkDir: work})
	ctx, cancel := context.WithCancel(context.Background())
	h := &host{decide: func(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) {
		time.AfterFunc(200*time.Millisecond, cancel)
		return agent.PermissionDecision{Behavior: "allow"}, nil
	}}
	start := time.Now()
	if err := a.Query(ctx, "run: sleep 30; touch late", h); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("interrupted turn took %v", d)
	}
	res := h.result(t)
	if res["subtype"] != "error_during_execution" || res["is_error"] != true {
		t.Errorf("result %v, want error_during_execution", res)
	}
	users := h.ofType("user")
	last := users[len(users)-1]["message"].(map[string]any)["content"].([]any)[0].(map[string]any)
	if last["text"] != "[Request interrupted by user]" {
		t.Errorf("last user message %v", last)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(work, "late")); err == nil {
		t.Error("the command went on after the interrupt")
	}
}

func TestInterruptWhileAsking(t *testing.T) {
	t.Parallel()
	a := newAgent(t, demo.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	h := &host{decide: func(ctx context.Context, _ agent.PermissionRequest) (agent.PermissionDecision, error) {
		cancel()
		<-ctx.Done()
		return agent.PermissionDecision{}, ctx.Err()
	}}
	if err := a.Query(ctx, "run: touch x", h); err != nil {
		t.Fatal(err)
	}
	if res := h.result(t); res["subtype"] != "error_during_execution" {
		t.Errorf("result %v", res)
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	a := newAgent(t, demo.Options{StateDir: state})
	for _, p := range []string{"one", "two"} {
		if err := a.Query(context.Background(), p, &host{}); err != nil {
			t.Fatal(err)
		}
	}
	b := newAgent(t, demo.Options{StateDir: state, SessionID: a.SessionID()})
	if b.SessionID() != a.SessionID() || b.Turns() != 2 {
		t.Fatalf("resumed session %q with %d turns, want %q with 2", b.SessionID(), b.Turns(), a.SessionID())
	}
	h := &host{}
	if err := b.Query(context.Background(), "three", h); err != nil {
		t.Fatal(err)
	}
	if res := h.result(t); !strings.Contains(res["result"].(string), "turn 3 ") || res["session_id"] != a.SessionID() {
		t.Errorf("result %v, want turn 3 of session %s", res, a.SessionID())
	}
	for _, opts := range []demo.Options{{StateDir: state, SessionID: "missing"}, {SessionID: a.SessionID()}} {
		if _, err := demo.New(opts); !errors.Is(err, demo.ErrUnknownSession) {
			t.Errorf("New(%+v) = %v, want ErrUnknownSession", opts, err)
		}
	}
}

func TestRunCommandCannotStart(t *testing.T) {
	t.Parallel()
	a := newAgent(t, demo.Options{WorkDir: filepath.Join(t.TempDir(), "gone")})
	h := &host{decide: answer(agent.PermissionDecision{Behavior: "allow"})}
	if err := a.Query(context.Background(), "run: true", h); err != nil {
		t.Fatal(err)
	}
	if tr := h.toolResult(t); tr["is_error"] != true || !strings.HasPrefix(tr["content"].(string), "Error: ") {
		t.Errorf("tool_result %v, want an error", tr)
	}
}

func TestPlanQuestionAndThinking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newAgent(t, demo.Options{Settings: agent.Settings{PermissionMode: "plan"}})
	h := &host{decide: answer(agent.PermissionDecision{Behavior: "allow"})}
	if err := a.Query(ctx, "plan: # Plan\n1. Go", h); err != nil {
		t.Fatal(err)
	}
	if r := h.requests[0]; r.ToolName != "ExitPlanMode" || string(r.Input) != `{"plan":"# Plan\n1. Go"}` {
		t.Fatalf("plan request = %+v", r)
	}
	var modes []any
	for _, m := range h.ofType("system") {
		if m["subtype"] == "status" {
			modes = append(modes, m["permissionMode"])
		}
	}
	if len(modes) != 1 || modes[0] != "default" || !strings.Contains(h.toolResult(t)["content"].(string), "approved your plan") {
		t.Fatalf("after the plan's approval: status modes %v, tool_result %v", modes, h.toolResult(t))
	}

	h = &host{decide: answer(agent.PermissionDecision{Behavior: "allow", UpdatedInput: json.RawMessage(`{"questions":[],"answers":{"Which color?":"Blue"}}`)})}
	if err := a.Query(ctx, "ask: Which color? | Red | Blue", h); err != nil {
		t.Fatal(err)
	}
	var in struct {
		Questions []struct {
			Question string
			Options  []struct{ Label string }
		}
	}
	json.Unmarshal(h.requests[0].Input, &in)
	if h.requests[0].ToolName != "AskUserQuestion" || len(in.Questions) != 1 || in.Questions[0].Question != "Which color?" || len(in.Questions[0].Options) != 2 || in.Questions[0].Options[1].Label != "Blue" {
		t.Fatalf("question request = %+v", h.requests[0])
	}
	if c := h.toolResult(t)["content"].(string); !strings.Contains(c, `"Which color?"="Blue"`) {
		t.Fatalf("answer's tool_result = %q", c)
	}

	h = &host{}
	if err := a.Query(ctx, "think: colors", h); err != nil {
		t.Fatal(err)
	}
	thought := ""
	for _, m := range h.ofType("stream_event") {
		if d, ok := m["event"].(map[string]any)["delta"].(map[string]any); ok && d["type"] == "thinking_delta" {
			thought += d["thinking"].(string)
		}
	}
	if !strings.Contains(thought, "colors") || len(h.ofType("result")) != 1 {
		t.Fatalf("thinking %q", thought)
	}

	h = &host{}
	if err := a.Query(ctx, "/help", h); err != nil {
		t.Fatal(err)
	}
	if cmds := h.ofType("system")[0]["slash_commands"].([]any); len(cmds) != 1 || cmds[0] != "help" || !strings.Contains(h.result(t)["result"].(string), "plan: MARKDOWN") {
		t.Fatalf("/help: commands %v, result %v", cmds, h.result(t)["result"])
	}
}
