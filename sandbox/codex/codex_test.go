package codex

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

	"github.com/tetherdev/tether/internal/eventually"
	"github.com/tetherdev/tether/internal/openaimock"
	"github.com/tetherdev/tether/sandbox/agent"
)

// host records what the adapter emits and answers its permission requests
// with decide.
type host struct {
	mu       sync.Mutex
	msgs     []map[string]any
	asked    []agent.PermissionRequest
	decide   func(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error)
	askedNow chan agent.PermissionRequest
}

func (h *host) Emit(m json.RawMessage) {
	var v map[string]any
	if err := json.Unmarshal(m, &v); err != nil {
		panic(err)
	}
	h.mu.Lock()
	h.msgs = append(h.msgs, v)
	h.mu.Unlock()
}

func (h *host) RequestPermission(ctx context.Context, r agent.PermissionRequest) (agent.PermissionDecision, error) {
	h.mu.Lock()
	h.asked = append(h.asked, r)
	h.mu.Unlock()
	if h.askedNow != nil {
		h.askedNow <- r
	}
	return h.decide(ctx, r)
}

// text joins the streamed text deltas.
func (h *host) text() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, m := range h.msgs {
		if ev, ok := m["event"].(map[string]any); ok && ev["type"] == "content_block_delta" {
			b.WriteString(ev["delta"].(map[string]any)["text"].(string))
		}
	}
	return b.String()
}

func (h *host) last() map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msgs[len(h.msgs)-1]
}

// toolResults returns the tool_result blocks emitted.
func (h *host) toolResults() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, m := range h.msgs {
		if m["type"] != "user" {
			continue
		}
		for _, b := range m["message"].(map[string]any)["content"].([]any) {
			out = append(out, b.(map[string]any))
		}
	}
	return out
}

func newAdapter(t *testing.T, api *openaimock.Server, work, resume string) agent.Agent {
	t.Helper()
	return newAdapterWith(t, api, work, resume, nil)
}

// newAdapterWith is newAdapter whose CLI also starts the MCP servers.
func newAdapterWith(t *testing.T, api *openaimock.Server, work, resume string, servers map[string]agent.MCPServer) agent.Agent {
	t.Helper()
	home := t.TempDir()
	a, err := New(Options{
		Bin: openaimock.CodexBin(t), WorkDir: work, ResumeID: resume, Config: api.CodexConfig("MOCK_API_KEY"), MCPServers: servers,
		Env: []string{"CODEX_HOME=" + filepath.Join(home, ".codex"), "HOME=" + home, "PATH=" + os.Getenv("PATH"), "MOCK_API_KEY=mock-key"},
	})
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	t.Cleanup(func() { a.Close() })
	return a
}

func TestPlainAnswerStreams(t *testing.T) {
	t.Parallel()
	api := openaimock.New(t, openaimock.Queue(openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Hello from the mock model, streamed.")}}))
	a := newAdapter(t, api, t.TempDir(), "")
	h := &host{}
	if err := a.Query(context.Background(), "say hello", h); err != nil {
		t.Fatal(err)
	}
	if init := h.msgs[0]; init["subtype"] != "init" || init["session_id"] != a.SessionID() || init["model"] != "gpt-5.5" || init["claude_code_version"] != openaimock.CodexVersion {
		t.Errorf("system/init %v", init)
	}
	if got := h.text(); got != "Hello from the mock model, streamed." {
		t.Errorf("streamed %q", got)
	}
	res := h.last()
	if res["type"] != "result" || res["subtype"] != "success" || res["result"] != "Hello from the mock model, streamed." ||
		res["session_id"] != a.SessionID() || a.SessionID() == "" {
		t.Errorf("result %v, session %q", res, a.SessionID())
	}
	// The mock's 10 tokens in, 4 of them cached, 5 out.
	if u := res["usage"].(map[string]any); u["input_tokens"].(float64) != 6 || u["cache_read_input_tokens"].(float64) != 4 || u["output_tokens"].(float64) != 5 {
		t.Errorf("usage %v", u)
	}
	if r := api.Requests(); len(r) != 1 || !r[0].HasText("user", "say hello") || r[0].Header.Get("Authorization") != "Bearer mock-key" {
		t.Errorf("requests %+v", r)
	}
}

func TestApprovedCommandRunsAndRejectionReachesTheModel(t *testing.T) {
	t.Parallel()
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Command("echo visible-output > out.txt; cat out.txt")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Command("rm -rf build")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Understood.")}},
	))
	work := t.TempDir()
	a := newAdapter(t, api, work, "")
	h := &host{decide: func(_ context.Context, r agent.PermissionRequest) (agent.PermissionDecision, error) {
		if strings.Contains(string(r.Input), "rm -rf") {
			return agent.PermissionDecision{Behavior: "deny", Message: "Not the build directory, please."}, nil
		}
		return agent.PermissionDecision{Behavior: "allow"}, nil
	}}
	if err := a.Query(context.Background(), "go", h); err != nil {
		t.Fatal(err)
	}
	if len(h.asked) != 2 || h.asked[0].ToolName != "Bash" || string(h.asked[0].Input) != `{"command":"echo visible-output \u003e out.txt; cat out.txt"}` ||
		h.asked[0].ToolUseID == "" {
		t.Fatalf("asked %+v", h.asked)
	}
	if b, err := os.ReadFile(filepath.Join(work, "out.txt")); err != nil || string(b) != "visible-output\n" {
		t.Fatalf("out.txt: %q %v", b, err)
	}
	tr := h.toolResults()
	if len(tr) != 2 || tr[0]["content"] != "visible-output\n" || tr[0]["is_error"] != false || tr[1]["is_error"] != true {
		t.Fatalf("tool results %v", tr)
	}
	reqs := api.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if out := reqs[1].Outputs(); !strings.Contains(strings.Join(values(out), ""), "visible-output") {
		t.Errorf("the command's output did not reach the model: %q", out)
	}
	if !reqs[2].HasText("user", "Not the build directory, please.") || !strings.Contains(strings.Join(values(reqs[2].Outputs()), ""), "rejected") {
		t.Errorf("the rejection did not reach the model: %q %q", reqs[2].Texts("user"), reqs[2].Outputs())
	}
}

func values(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestInterruptKillsTheSlowCommand interrupts a command that has run for
// two seconds: Codex itself stops a command interrupted within its first
// second or so, but leaves one that ran longer.
func TestInterruptKillsTheSlowCommand(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Command("sleep 2; echo started > started; sleep 30; echo late > late")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("next turn")}},
	))
	a := newAdapter(t, api, work, "")
	h := &host{decide: func(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) {
		return agent.PermissionDecision{Behavior: "allow"}, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Query(ctx, "slow", h) }()
	waitFile(t, filepath.Join(work, "started"))
	start := time.Now()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Query = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("interrupt took %v", d)
	}
	if res := h.last(); res["type"] != "result" || res["subtype"] != "error_during_execution" {
		t.Errorf("last message %v", res)
	}
	// The command is gone (once the kill has been delivered), and the
	// next turn runs.
	eventually.True(t, "the interrupted command ends", func() bool { return len(running("echo late > late")) == 0 })
	if err := a.Query(context.Background(), "again", &host{}); err != nil {
		t.Fatal(err)
	}
}

// running lists the processes whose command line holds s.
func running(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			out = append(out, e.Name()+": "+string(b))
		}
	}
	return out
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	eventually.True(t, path+" appears", func() bool { _, err := os.Stat(path); return err == nil })
}

func TestResumeInANewProcess(t *testing.T) {
	t.Parallel()
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("first answer")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("second answer")}},
	))
	work := t.TempDir()
	home := t.TempDir()
	mk := func(resume string) agent.Agent {
		os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
		a, err := New(Options{Bin: openaimock.CodexBin(t), WorkDir: work, ResumeID: resume, Config: api.CodexConfig("MOCK_API_KEY"),
			Env: []string{"CODEX_HOME=" + filepath.Join(home, ".codex"), "HOME=" + home, "PATH=" + os.Getenv("PATH"), "MOCK_API_KEY=k"}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := mk("")
	if err := a.Query(context.Background(), "remember the word kumquat", &host{}); err != nil {
		t.Fatal(err)
	}
	id := a.SessionID()
	a.Close()
	b := mk(id)
	defer b.Close()
	hb := &host{}
	if err := b.Query(context.Background(), "which word?", hb); err != nil {
		t.Fatal(err)
	}
	// The turn's own tokens, not the thread's since its start.
	if u := hb.last()["usage"].(map[string]any); u["input_tokens"].(float64) != 6 || u["cache_read_input_tokens"].(float64) != 4 || u["output_tokens"].(float64) != 5 {
		t.Errorf("usage of the turn after resuming: %v", u)
	}
	if b.SessionID() != id {
		t.Errorf("resumed thread %q, want %q", b.SessionID(), id)
	}
	last := api.Requests()[1]
	if !last.HasText("user", "remember the word kumquat") || !last.HasText("assistant", "first answer") || !last.HasText("user", "which word?") {
		t.Errorf("the resumed request lacks the history: user %q assistant %q", last.Texts("user"), last.Texts("assistant"))
	}
}

func TestFileChangesAreAskedAsWritesAndEdits(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "old.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Patch("*** Begin Patch\n*** Add File: new.txt\n+hello-from-patch\n*** End Patch\n")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Patch("*** Begin Patch\n*** Update File: old.txt\n@@\n-one\n+two\n*** End Patch\n")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Patched.")}},
	))
	a := newAdapter(t, api, work, "")
	h := &host{decide: func(_ context.Context, r agent.PermissionRequest) (agent.PermissionDecision, error) {
		if r.ToolName == "Edit" {
			return agent.PermissionDecision{Behavior: "deny", Message: "Leave old.txt alone."}, nil
		}
		return agent.PermissionDecision{Behavior: "allow"}, nil
	}}
	if err := a.Query(context.Background(), "patch", h); err != nil {
		t.Fatal(err)
	}
	if len(h.asked) != 2 {
		t.Fatalf("asked %+v", h.asked)
	}
	var add, upd map[string]string
	json.Unmarshal(h.asked[0].Input, &add)
	json.Unmarshal(h.asked[1].Input, &upd)
	if h.asked[0].ToolName != "Write" || add["file_path"] != filepath.Join(work, "new.txt") || add["content"] != "hello-from-patch\n" {
		t.Errorf("the new file was asked as %s %s", h.asked[0].ToolName, h.asked[0].Input)
	}
	if h.asked[1].ToolName != "Edit" || upd["file_path"] != filepath.Join(work, "old.txt") || !strings.Contains(upd["diff"], "+two") {
		t.Errorf("the change was asked as %s %s", h.asked[1].ToolName, h.asked[1].Input)
	}
	if b, err := os.ReadFile(filepath.Join(work, "new.txt")); err != nil || string(b) != "hello-from-patch\n" {
		t.Errorf("new.txt: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "old.txt")); string(b) != "one\n" {
		t.Errorf("the rejected edit changed old.txt: %q", b)
	}
	tr := h.toolResults()
	if len(tr) != 2 || tr[0]["is_error"] != false || tr[1]["is_error"] != true {
		t.Errorf("tool results %v", tr)
	}
	last := api.Requests()[2]
	if !last.HasText("user", "Leave old.txt alone.") || !strings.Contains(strings.Join(values(last.Outputs()), "|"), "rejected") {
		t.Errorf("the rejection did not reach the model: %q %q", last.Texts("user"), last.Outputs())
	}
}

func TestTheModelIsSetAtStartAndWhileItRuns(t *testing.T) {
	t.Parallel()
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("one")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("two")}},
	))
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	a, err := New(Options{Bin: openaimock.CodexBin(t), WorkDir: t.TempDir(), Config: api.CodexConfig("MOCK_API_KEY"),
		Settings: agent.Settings{Model: "gpt-5.4", PermissionMode: "plan"},
		Env:      []string{"CODEX_HOME=" + filepath.Join(home, ".codex"), "HOME=" + home, "PATH=" + os.Getenv("PATH"), "MOCK_API_KEY=k"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Query(context.Background(), "first", &host{}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []agent.Settings{{Model: "gpt-5.5", PermissionMode: "plan"}, {MaxThinkingTokens: 1024}} {
		if _, err := a.Configure(context.Background(), bad); !errors.Is(err, errUnsupported) {
			t.Errorf("Configure(%+v) = %v", bad, err)
		}
	}
	if s, err := a.Configure(context.Background(), agent.Settings{Model: "gpt-5.5", PermissionMode: "default"}); err != nil || s != (agent.Settings{Model: "gpt-5.5"}) {
		t.Fatalf("Configure = %+v, %v", s, err)
	}
	if err := a.Query(context.Background(), "second", &host{}); err != nil {
		t.Fatal(err)
	}
	if r := api.Requests(); len(r) != 2 || r[0].Model != "gpt-5.4" || r[1].Model != "gpt-5.5" {
		t.Fatalf("models asked for: %q, %q", r[0].Model, r[1].Model)
	}
}

func TestAPatchOfSeveralFilesIsAskedWhole(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Patch("*** Begin Patch\n*** Add File: a.txt\n+A\n*** Add File: b.txt\n+B\n*** End Patch\n")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Both written.")}},
	))
	a := newAdapter(t, api, work, "")
	h := &host{decide: func(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) {
		return agent.PermissionDecision{Behavior: "allow"}, nil
	}}
	if err := a.Query(context.Background(), "patch", h); err != nil {
		t.Fatal(err)
	}
	if len(h.asked) != 1 || h.asked[0].ToolName != "apply_patch" {
		t.Fatalf("asked %+v", h.asked)
	}
	var in struct {
		Changes []map[string]string `json:"changes"`
	}
	json.Unmarshal(h.asked[0].Input, &in)
	paths := map[string]string{}
	for _, c := range in.Changes {
		paths[filepath.Base(c["path"])] = c["kind"] + ":" + c["diff"]
	}
	if len(paths) != 2 || paths["a.txt"] != "add:A\n" || paths["b.txt"] != "add:B\n" {
		t.Errorf("the patch was asked as %s", h.asked[0].Input)
	}
	for name, want := range map[string]string{"a.txt": "A\n", "b.txt": "B\n"} {
		if b, err := os.ReadFile(filepath.Join(work, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
}
