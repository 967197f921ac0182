package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/openaimock"
)

// TestCodexGetsTheUsersSetup runs the real Codex CLI in a real sandbox
// against the Responses API mock, in a fake home holding a Codex setup.
// The session's ~/.codex is its own: the user's config.toml copied in
// (which names the mock as provider), AGENTS.md and the login read-only,
// other sessions' rollouts and the history not there; the thread's
// rollout stays in the session's state.
func TestCodexGetsTheUsersSetup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the Codex CLI")
	}
	bin := openaimock.CodexBin(t)
	caps := probeOnce()
	if !caps.Bwrap.Available {
		t.Skipf("bubblewrap unavailable: %s", caps.Bwrap.Detail)
	}
	h := newFakeHome(t)
	codexDir := func(p string) string { return filepath.Join(h.home, ".codex", p) }
	script := strings.Join([]string{
		"grep -c USER-CONFIG-MARKER " + codexDir("config.toml"),
		"cat " + codexDir("AGENTS.md"),
		"(echo tampered >> " + codexDir("auth.json") + ") 2>/dev/null || echo auth=readonly",
		"cat " + codexDir("history.jsonl") + " " + codexDir("sessions/2026/01/01/rollout-old.jsonl") + " " + filepath.Join(h.home, ".ssh/id_ed25519"),
		"echo end",
	}, "; ")
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Command(script)}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("done")}},
	))
	config := "# USER-CONFIG-MARKER\nmodel = \"gpt-5.5\"\nmodel_provider = \"mock\"\n[model_providers.mock]\nname = \"Mock\"\n" +
		fmt.Sprintf("base_url = %q\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n", api.URL)
	files := map[string]string{
		".codex/config.toml":                           config,
		".codex/AGENTS.md":                             "Answer briefly. USER-AGENTS-5521",
		".codex/auth.json":                             `{"OPENAI_API_KEY": null}`,
		".codex/history.jsonl":                         "CODEX-HISTORY-SECRET",
		".codex/sessions/2026/01/01/rollout-old.jsonl": "OTHER-ROLLOUT",
	}
	for name, content := range files {
		p := filepath.Join(h.home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec := h.spec(t, filepath.Join(h.home, "proj"))
	spec.Agent = "codex"
	spec.Egress = []string{strings.TrimSuffix(strings.TrimPrefix(api.URL, "http://"), "/v1")}
	spec.StateDir = filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(spec.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	spec.ReadOnly = []string{filepath.Dir(filepath.Dir(real))}
	spec.Env = []string{"HOME=" + h.home, "PATH=" + filepath.Dir(real) + ":" + os.Getenv("PATH"), "XDG_RUNTIME_DIR=" + h.runtime, "OPENAI_API_KEY=sk-mock"}
	evs, out := allowedTurn(t, spawn(t, spec))
	for _, want := range []string{"1\n", "USER-AGENTS-5521", "auth=readonly", "end"} {
		if !strings.Contains(out, want) {
			t.Errorf("tool output lacks %q", want)
		}
	}
	for _, secret := range []string{"CODEX-HISTORY-SECRET", "OTHER-ROLLOUT", "ssh-private-key"} {
		if strings.Contains(out, secret) {
			t.Errorf("the CLI's sandbox read %q", secret)
		}
	}
	if b, _ := os.ReadFile(codexDir("auth.json")); string(b) != files[".codex/auth.json"] {
		t.Errorf("auth.json now %q", b)
	}
	thread := evs[len(evs)-1].AgentSessionID
	if m, _ := filepath.Glob(filepath.Join(spec.StateDir, "codex", "home", "sessions", "*", "*", "*", "rollout-*-"+thread+".jsonl")); thread == "" || len(m) != 1 {
		t.Errorf("rollout of thread %q in the session's state: %q", thread, m)
	}
	if m, _ := filepath.Glob(codexDir("sessions/*/*/*/rollout-*-" + thread + ".jsonl")); len(m) != 0 {
		t.Errorf("the thread's rollout reached the user's ~/.codex: %q", m)
	}
	if !strings.Contains(string(api.Requests()[0].Body), "USER-AGENTS-5521") {
		t.Error("the user's AGENTS.md did not reach the model")
	}
}
