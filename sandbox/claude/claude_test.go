package claude

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/sandbox/agent"
)

// cli is a real Claude Code CLI set up against a mock of the API, with a
// HOME and a working directory of its own.
type cli struct {
	bin, home, dir string
	mock           *anthropicmock.Server
}

func newCLI(t *testing.T, respond anthropicmock.Responder) *cli {
	t.Helper()
	c := &cli{bin: anthropicmock.ClaudeBin(t), home: t.TempDir(), dir: t.TempDir()}
	c.mock = anthropicmock.New(t, respond)
	return c
}

// adapter returns a new adapter on c, closed when the test ends.
func (c *cli) adapter(t *testing.T, resumeID string) agent.Agent {
	t.Helper()
	a, err := New(Options{
		Bin: c.bin, WorkDir: c.dir, ResumeID: resumeID,
		Env: c.mock.ClaudeEnv(c.home), Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

func query(t *testing.T, a agent.Agent, prompt string, h agent.Host) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Query(ctx, prompt, h); err != nil {
		t.Fatalf("Query(%q): %v", prompt, err)
	}
}

// toolThenText answers with a Bash tool_use running command until the
// conversation ends in a tool_result, then with final.
func toolThenText(command, final string) anthropicmock.Responder {
	return func(r *anthropicmock.Request) anthropicmock.Reply {
		last := r.LastMessage()
		if len(last.Content) > 0 && last.Content[0].Type == "tool_result" {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text(final)}}
		}
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{
			anthropicmock.Text("I will run the command."),
			anthropicmock.ToolUse("Bash", map[string]string{"command": command, "description": "test command"}),
		}}
	}
}

func TestTextTurn(t *testing.T) {
	t.Parallel()
	const reply = "Hello from the mock, streamed in several small pieces."
	c := newCLI(t, anthropicmock.Queue(anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text(reply)}}))
	a := c.adapter(t, "")
	if id := a.SessionID(); id != "" {
		t.Errorf("SessionID before the first turn = %q, want empty", id)
	}
	h := &recHost{}
	query(t, a, "say hello", h)

	msgs := h.decoded(t)
	inits := find(msgs, "system", "init")
	if len(inits) != 1 || inits[0].SessionID == "" {
		t.Fatalf("system/init lines = %+v, want one with a session_id", inits)
	}
	if got := a.SessionID(); got != inits[0].SessionID {
		t.Errorf("SessionID = %q, want %q from system/init", got, inits[0].SessionID)
	}
	deltas := textDeltas(msgs)
	if len(deltas) < 3 || strings.Join(deltas, "") != reply {
		t.Errorf("text deltas = %q, want several joining to %q", deltas, reply)
	}
	if n := len(find(msgs, "assistant", "")); n != 1 {
		t.Errorf("%d assistant lines, want 1", n)
	}
	results := find(msgs, "result", "")
	if len(results) != 1 || results[0].Subtype != "success" || msgs[len(msgs)-1].Type != "result" {
		t.Errorf("results = %+v, want one success as the last line", results)
	}
	// Of the control traffic, only the response to the adapter's
	// initialize is passed on: it lists the CLI's models and commands.
	h.mu.Lock()
	var controls []string
	for i, m := range msgs {
		if strings.HasPrefix(m.Type, "control_") {
			controls = append(controls, string(h.msgs[i]))
		}
	}
	h.mu.Unlock()
	if len(controls) != 1 || !strings.Contains(controls[0], `"request_id":"`+initializePrefix) ||
		!strings.Contains(controls[0], `"models":[`) || !strings.Contains(controls[0], `"commands":[`) {
		t.Errorf("control lines emitted: %.300q; want the initialize response only", controls)
	}
	reqs := c.mock.MessageRequests()
	if len(reqs) != 1 || !reqs[0].HasText("user", "say hello") || !reqs[0].Stream {
		t.Errorf("mock got %d message requests; want one streaming request carrying the prompt", len(reqs))
	}
}

func TestToolPermission(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		decide  agent.PermissionDecision
		// exist and absent are files in the working directory after the turn.
		exist, absent []string
		// resultHas is a text the tool_result sent to the model contains.
		resultHas string
		isError   bool
	}{
		{
			name: "allow", command: "echo ran > marker.txt",
			decide: agent.PermissionDecision{Behavior: "allow"},
			exist:  []string{"marker.txt"}, isError: false,
		},
		{
			name: "deny", command: "echo ran > marker.txt",
			decide: agent.PermissionDecision{Behavior: "deny", Message: "not on my watch"},
			absent: []string{"marker.txt"}, resultHas: "not on my watch", isError: true,
		},
		{
			name: "allow with updated input", command: "echo ran > original.txt",
			decide: agent.PermissionDecision{Behavior: "allow", UpdatedInput: []byte(`{"command":"echo changed > changed.txt","description":"changed"}`)},
			exist:  []string{"changed.txt"}, absent: []string{"original.txt"}, isError: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t, toolThenText(tt.command, "done"))
			a := c.adapter(t, "")
			h := &recHost{decide: func(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) {
				return tt.decide, nil
			}}
			query(t, a, "please run the command", h)

			reqs := h.requests()
			if len(reqs) != 1 || reqs[0].ToolName != "Bash" || reqs[0].RequestID == "" || !strings.HasPrefix(reqs[0].ToolUseID, "toolu_") ||
				!strings.Contains(string(reqs[0].Input), tt.command) {
				t.Fatalf("permission requests = %+v, want one for Bash %q", reqs, tt.command)
			}
			for _, f := range tt.exist {
				if _, err := os.Stat(filepath.Join(c.dir, f)); err != nil {
					t.Errorf("%s: %v, want the command to have run", f, err)
				}
			}
			for _, f := range tt.absent {
				if _, err := os.Stat(filepath.Join(c.dir, f)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s exists (err %v), want it absent", f, err)
				}
			}
			mreqs := c.mock.MessageRequests()
			if len(mreqs) != 2 {
				t.Fatalf("mock got %d message requests, want 2", len(mreqs))
			}
			results := mreqs[1].ToolResults()
			if len(results) != 1 || results[0].IsError != tt.isError || !strings.Contains(results[0].ResultText(), tt.resultHas) {
				t.Errorf("tool_result sent to the model = %+v, want is_error %v containing %q", results, tt.isError, tt.resultHas)
			}
			msgs := h.decoded(t)
			if r := find(msgs, "result", ""); len(r) != 1 || r[0].Subtype != "success" {
				t.Errorf("results = %+v, want one success", r)
			}
		})
	}
}

func TestInterruptDuringTool(t *testing.T) {
	t.Parallel()
	c := newCLI(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		if r.HasText("user", "after the interrupt") {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("still here")}}
		}
		return toolThenText("sleep 30 && touch slept.txt", "slept")(r)
	})
	a := c.adapter(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	allowed := make(chan struct{})
	h := &recHost{decide: func(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) {
		close(allowed)
		return agent.PermissionDecision{Behavior: "allow"}, nil
	}}
	errc := make(chan error, 1)
	go func() { errc <- a.Query(ctx, "sleep please", h) }()
	select {
	case <-allowed:
	case err := <-errc:
		t.Fatalf("Query returned before the tool ran: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no permission request")
	}
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("interrupted Query = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Query did not return within 5s of the interrupt")
	}
	took := time.Since(start)
	t.Logf("interrupt to return: %v", took)
	if took > 2500*time.Millisecond {
		t.Errorf("interrupt took %v, want about 2s at most", took)
	}
	if r := find(h.decoded(t), "result", ""); len(r) != 1 || r[0].Subtype != "error_during_execution" {
		t.Errorf("results = %+v, want one error_during_execution", r)
	}

	h2 := &recHost{}
	query(t, a, "after the interrupt", h2)
	if r := find(h2.decoded(t), "result", ""); len(r) != 1 || r[0].Subtype != "success" {
		t.Errorf("next turn's results = %+v, want one success", r)
	}
	reqs := c.mock.MessageRequests()
	if last := reqs[len(reqs)-1]; !last.HasText("user", "sleep please") {
		t.Errorf("next turn's request lacks the interrupted turn's prompt: %s", last.Body)
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	c := newCLI(t, anthropicmock.Queue(
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("I will remember pineapple.")}},
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("The word was pineapple.")}},
	))
	first := c.adapter(t, "")
	query(t, first, "remember the word pineapple", &recHost{})
	id := first.SessionID()
	if id == "" {
		t.Fatal("no session id after the first turn")
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := first.Query(context.Background(), "again", &recHost{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Query after Close = %v, want ErrClosed", err)
	}

	second := c.adapter(t, id)
	if got := second.SessionID(); got != id {
		t.Errorf("SessionID of the resuming adapter = %q, want %q", got, id)
	}
	h := &recHost{}
	query(t, second, "which word was it?", h)
	if got := second.SessionID(); got != id {
		t.Errorf("SessionID after resuming = %q, want %q", got, id)
	}
	reqs := c.mock.MessageRequests()
	last := reqs[len(reqs)-1]
	if !last.HasText("user", "remember the word pineapple") || !last.HasText("assistant", "I will remember pineapple.") {
		t.Errorf("resumed request lacks the earlier turn: %s", last.Body)
	}
}

// TestPermissionWithdrawn has a PermissionRequest hook allow the tool after
// the CLI asked the adapter, so that the CLI withdraws its can_use_tool with
// a control_cancel_request.
func TestPermissionWithdrawn(t *testing.T) {
	t.Parallel()
	c := newCLI(t, toolThenText("echo ran > marker.txt", "done"))
	hook := `sleep 2; echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}'`
	settings := `{"hooks":{"PermissionRequest":[{"matcher":"Bash","hooks":[{"type":"command","command":` + quote(hook) + `,"timeout":30}]}]}}`
	if err := os.MkdirAll(filepath.Join(c.dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, ".claude", "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	a := c.adapter(t, "")
	withdrawn := make(chan error, 1)
	h := &recHost{decide: func(ctx context.Context, _ agent.PermissionRequest) (agent.PermissionDecision, error) {
		select {
		case <-ctx.Done():
			withdrawn <- ctx.Err()
			return agent.PermissionDecision{}, ctx.Err()
		case <-time.After(30 * time.Second):
			withdrawn <- nil
			return agent.PermissionDecision{Behavior: "deny", Message: "too late"}, nil
		}
	}}
	query(t, a, "please run the command", h)
	select {
	case err := <-withdrawn:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("permission ctx ended with %v, want context.Canceled", err)
		}
	default:
		t.Fatal("the host was not asked, or its question is still pending")
	}
	if _, err := os.Stat(filepath.Join(c.dir, "marker.txt")); err != nil {
		t.Errorf("marker.txt: %v, want the hook's allow to have run the command", err)
	}
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// TestImagesReachTheModel: images sent with a prompt reach the Messages
// API as image content blocks, before the prompt's text, through the real
// CLI's stream-json input.
func TestImagesReachTheModel(t *testing.T) {
	t.Parallel()
	c := newCLI(t, anthropicmock.Queue(anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("a red pixel")}}))
	a := c.adapter(t, "").(agent.ImageAgent)
	// A 1×1 PNG.
	const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.QueryImages(ctx, "what is in this picture?", []agent.Image{{MediaType: "image/png", Data: pixel}}, &recHost{}); err != nil {
		t.Fatal(err)
	}
	reqs := c.mock.MessageRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d message requests, want 1", len(reqs))
	}
	// The CLI adds a system reminder before the user's blocks, and a
	// system message after.
	var blocks []anthropicmock.Block
	for _, m := range reqs[0].Messages {
		if m.Role == "user" {
			blocks = append(blocks, m.Content...)
		}
	}
	var image, text int = -1, -1
	var src struct{ Type, MediaType, Data string }
	for i, b := range blocks {
		switch {
		case b.Type == "image":
			image = i
			json.Unmarshal(b.Source, &struct {
				Type      *string `json:"type"`
				MediaType *string `json:"media_type"`
				Data      *string `json:"data"`
			}{&src.Type, &src.MediaType, &src.Data})
		case b.Type == "text" && strings.Contains(b.Text, "what is in this picture?"):
			text = i
		}
	}
	if image < 0 || text < 0 || image > text || src != (struct{ Type, MediaType, Data string }{"base64", "image/png", pixel}) {
		t.Fatalf("the API got the user blocks %+v: image block at %d (%+v), text at %d", blocks, image, src, text)
	}
}

// TestConfigure changes the settings of the real CLI before it runs,
// during a turn (while it waits for a permission answer) and between
// turns, and checks what it then asks the Messages API for.
func TestConfigure(t *testing.T) {
	t.Parallel()
	c := newCLI(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		last := r.LastMessage()
		if r.HasText("user", "run it") && (len(last.Content) == 0 || last.Content[0].Type != "tool_result") {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.ToolUse("Bash", map[string]string{"command": "echo x > out.txt", "description": "write a file"})}}
		}
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("ok")}}
	})
	a := c.adapter(t, "").(agent.Configurable)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lastReq := func() *anthropicmock.Request {
		reqs := c.mock.MessageRequests()
		return reqs[len(reqs)-1]
	}

	// No CLI yet: the settings are its command line.
	want := agent.Settings{Model: "claude-opus-4-8"}
	if got, err := a.Configure(ctx, want); err != nil || got != want {
		t.Fatalf("Configure before start = %+v, %v", got, err)
	}
	query(t, a, "one", &recHost{})
	if m := lastReq().Model; m != "claude-opus-4-8" {
		t.Fatalf("first request's model = %q", m)
	}

	// During a turn: the turn reads the CLI's answer.
	var during agent.Settings
	var duringErr error
	h := &recHost{decide: func(ctx context.Context, _ agent.PermissionRequest) (agent.PermissionDecision, error) {
		during, duringErr = a.Configure(ctx, agent.Settings{Model: "claude-haiku-4-5"})
		return agent.PermissionDecision{Behavior: "allow"}, nil
	}}
	query(t, a, "run it", h)
	if duringErr != nil || during.Model != "claude-haiku-4-5" {
		t.Fatalf("Configure during a turn = %+v, %v", during, duringErr)
	}
	// Claude Code 2.1.197 keeps a turn's model to its end (observed): the
	// request after the tool still asks for the old one.
	if r := lastReq(); len(r.ToolResults()) == 0 || r.Model != "claude-opus-4-8" {
		t.Fatalf("the request after the tool: model %q, %d tool results", r.Model, len(r.ToolResults()))
	}
	query(t, a, "and now?", &recHost{})
	if m := lastReq().Model; m != "claude-haiku-4-5" {
		t.Fatalf("the turn after the change asks for %q", m)
	}

	// Between turns: Configure reads the answers itself.
	want = agent.Settings{Model: "claude-sonnet-4-5", PermissionMode: "plan", MaxThinkingTokens: 2048}
	if got, err := a.Configure(ctx, want); err != nil || got != want {
		t.Fatalf("Configure between turns = %+v, %v", got, err)
	}
	query(t, a, "two", &recHost{})
	r := lastReq()
	if r.Model != "claude-sonnet-4-5" || !r.HasText("user", "Plan mode is active") || !strings.Contains(string(r.Body), `"budget_tokens":2048`) {
		t.Fatalf("after Configure: model %q, plan mode %v, thinking budget in %.200q", r.Model, r.HasText("user", "Plan mode is active"), r.Body)
	}

	// A new CLI (the old one died) starts with the settings.
	a.(*adapter).mu.Lock()
	p := a.(*adapter).proc
	a.(*adapter).mu.Unlock()
	if err := p.kill(); err != nil {
		t.Fatal(err)
	}
	query(t, a, "three", &recHost{})
	r = lastReq()
	if r.Model != "claude-sonnet-4-5" || !r.HasText("user", "Plan mode is active") || !strings.Contains(string(r.Body), `"budget_tokens":2048`) {
		t.Fatalf("after a restart: model %q, plan mode %v", r.Model, r.HasText("user", "Plan mode is active"))
	}
}
