package sandbox_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
)

// TestClaudeCodeGetsTheUsersSetup runs the real Claude Code CLI in a real
// sandbox against the API mock, in a fake home holding a Claude Code
// setup. The CLI reads the user's CLAUDE.md, settings and commands, may
// not change them, writes its credentials and this project's transcript
// through to the user's ~/.claude, keeps ~/.claude.json's changes in the
// session, and sees neither other projects' transcripts, the prompt
// history nor the home's other secrets.
func TestClaudeCodeGetsTheUsersSetup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the Claude Code CLI")
	}
	bin := anthropicmock.ClaudeBin(t)
	caps := probeOnce()
	if !caps.Bwrap.Available {
		t.Skipf("bubblewrap unavailable: %s", caps.Bwrap.Detail)
	}
	h := newFakeHome(t)
	files := map[string]string{
		".claude/settings.json":                `{"includeCoAuthoredBy": false, "marker": "USER-SETTINGS"}`,
		".claude/CLAUDE.md":                    "Always answer politely. USER-MEMORY-7731",
		".claude/commands/hello.md":            "USER-COMMAND-HELLO",
		".claude/.credentials.json":            `{"claudeAiOauth": {"accessToken": "fake"}}`,
		".claude/history.jsonl":                `{"display": "HISTORY-SECRET"}`,
		".claude/projects/-other-proj/t.jsonl": "OTHER-PROJECT-TRANSCRIPT",
		".claude.json":                         `{"numStartups": 5, "marker": "GLOBAL-STATE"}`,
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
	claude := func(p string) string { return filepath.Join(h.home, ".claude", p) }
	script := strings.Join([]string{
		"cat " + claude("settings.json") + " " + claude("commands/hello.md"),
		"cat " + claude("history.jsonl") + " " + claude("projects/-other-proj/t.jsonl") + " " + filepath.Join(h.home, ".ssh/id_ed25519"),
		"(echo tampered > " + claude("settings.json") + ") 2>/dev/null || echo settings=readonly",
		"echo >> " + claude(".credentials.json") + " && echo credentials=writable",
		"grep -c GLOBAL-STATE " + filepath.Join(h.home, ".claude.json"),
	}, "; ")
	api := anthropicmock.New(t, anthropicmock.Queue(
		anthropicmock.Reply{Blocks: []anthropicmock.Block{
			anthropicmock.ToolUse("Bash", map[string]any{"command": script, "description": "look around"}),
		}, StopReason: "tool_use"},
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("done")}},
	))
	spec := claudeSpec(t, h, bin, api, filepath.Join(h.home, "proj"))
	evs, out := allowedTurn(t, spawn(t, spec))
	for _, want := range []string{"USER-SETTINGS", "USER-COMMAND-HELLO", "settings=readonly", "credentials=writable", "1"} {
		if !strings.Contains(out, want) {
			t.Errorf("tool output lacks %q", want)
		}
	}
	for _, secret := range []string{"HISTORY-SECRET", "OTHER-PROJECT-TRANSCRIPT", "ssh-private-key"} {
		if strings.Contains(out, secret) {
			t.Errorf("the CLI's sandbox read %q", secret)
		}
	}
	if reqs := api.MessageRequests(); len(reqs) == 0 || !bytes.Contains(reqs[0].Body, []byte("USER-MEMORY-7731")) {
		t.Errorf("the user's CLAUDE.md did not reach the model")
	}

	// On the host: settings untouched, credentials written through, the
	// transcript in the user's project directory, ~/.claude.json's changes
	// in the session's copy only.
	if b, _ := os.ReadFile(claude("settings.json")); string(b) != files[".claude/settings.json"] {
		t.Errorf("settings.json now %q", b)
	}
	if b, _ := os.ReadFile(claude(".credentials.json")); string(b) != files[".claude/.credentials.json"]+"\n" {
		t.Errorf("credentials %q, want the sandbox's write", b)
	}
	sessionID := evs[len(evs)-1].AgentSessionID
	if matches, _ := filepath.Glob(claude("projects/*/" + sessionID + ".jsonl")); len(matches) != 1 || !strings.HasSuffix(filepath.Dir(matches[0]), "-home-proj") {
		t.Errorf("transcripts of session %s in the user's ~/.claude/projects: %q", sessionID, matches)
	}
	if b, _ := os.ReadFile(filepath.Join(h.home, ".claude.json")); string(b) != files[".claude.json"] {
		t.Errorf("the user's ~/.claude.json changed: %s", b)
	}
	var copied map[string]any
	b, err := os.ReadFile(filepath.Join(spec.StateDir, "claude", "claude.json"))
	if err == nil {
		err = json.Unmarshal(b, &copied)
	}
	if err != nil || copied["marker"] != "GLOBAL-STATE" || copied["firstStartTime"] == nil {
		t.Errorf("session's ~/.claude.json %s (%v), want the user's, updated by the CLI", b, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(spec.StateDir, "claude", "dot-claude")); len(entries) == 0 {
		t.Errorf("no scratch state in the session's ~/.claude")
	}
}

// claudeSpec is a spec for the real Claude Code CLI bin in workDir, in the
// fake home h, against api, with a state directory of its own.
func claudeSpec(t *testing.T, h fakeHome, bin string, api *anthropicmock.Server, workDir string) sandbox.Spec {
	t.Helper()
	spec := h.spec(t, workDir)
	spec.Agent = "claude-code"
	spec.Egress = []string{strings.TrimPrefix(api.URL, "http://")} // the mock listens on the host's loopback
	spec.StateDir = filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(spec.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	spec.ReadOnly = []string{filepath.Dir(real)}
	spec.Env = append(api.ClaudeEnv(h.home), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "XDG_RUNTIME_DIR="+h.runtime)
	return spec
}

// claudeTurn runs a turn in which the API's first answer asks for a
// command, allows it, and returns the turn's events and the command's
// output.
func allowedTurn(t *testing.T, sb *sandbox.Sandbox) ([]sandbox.Event, string) {
	t.Helper()
	if err := sb.Query("look around", "s", false); err != nil {
		t.Fatal(err)
	}
	req := permission(t, sb)
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	evs := until(t, sb, isEv(sandbox.EvDone))
	out, isErr := toolResult(t, evs)
	t.Logf("tool output (error %v):\n%s", isErr, out)
	return evs, out
}

// TestClaudeCodeInALookAlikeDirectory: the real CLI in a real sandbox
// working in <home>/a/b, beside <home>/a-b whose conversation lies in the
// transcripts' directory the two share, reads nothing of it, and its own
// conversation lands in the session's ~/.claude, not in the shared
// directory.
func TestClaudeCodeInALookAlikeDirectory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the Claude Code CLI")
	}
	bin := anthropicmock.ClaudeBin(t)
	if caps := probeOnce(); !caps.Bwrap.Available {
		t.Skipf("bubblewrap unavailable: %s", caps.Bwrap.Detail)
	}
	h := newFakeHome(t)
	dashed, nested := filepath.Join(h.home, "a-b"), filepath.Join(h.home, "a", "b")
	shared := filepath.Join(h.home, ".claude", "projects", sandbox.ClaudeProjectDir(nested))
	for _, d := range []string{dashed, nested, shared} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(shared, "other.jsonl"), []byte("LOOK-ALIKE-CONVERSATION\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := "cat " + filepath.Join(h.home, ".claude", "projects", sandbox.ClaudeProjectDir(nested)) + "/*.jsonl; echo listed; touch marker"
	api := anthropicmock.New(t, anthropicmock.Queue(
		anthropicmock.Reply{Blocks: []anthropicmock.Block{
			anthropicmock.ToolUse("Bash", map[string]any{"command": script, "description": "read the transcripts"}),
		}, StopReason: "tool_use"},
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("done")}},
	))
	spec := claudeSpec(t, h, bin, api, nested)
	evs, out := allowedTurn(t, spawn(t, spec))
	if !strings.Contains(out, "listed") || strings.Contains(out, "LOOK-ALIKE-CONVERSATION") {
		t.Errorf("the look-alike's conversation reached the sandbox, or the command did not run: %q", out)
	}
	sessionID := evs[len(evs)-1].AgentSessionID
	own := filepath.Join(spec.StateDir, "claude", "dot-claude", "projects", sandbox.ClaudeProjectDir(nested), sessionID+".jsonl")
	if _, err := os.Stat(own); sessionID == "" || err != nil {
		t.Errorf("session %q's transcript not in its own ~/.claude: %v", sessionID, err)
	}
	if entries, _ := os.ReadDir(shared); len(entries) != 1 {
		t.Errorf("the shared transcripts' directory now holds %d entries", len(entries))
	}
}
