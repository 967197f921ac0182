package history

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/internal/openaimock"
)

// TestRealCodexRollout: the Codex CLI's own rollout of a turn with a
// command (codex exec, against the mock Responses API) is listed with its
// project and prompt, and read back with every step of the turn.
func TestRealCodexRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Codex CLI")
	}
	t.Parallel()
	bin := openaimock.CodexBin(t)
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("I will run it."), openaimock.Command("echo hi-from-codex")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("It ran.")}},
	))
	f := newFixture(t, nil)
	work := t.TempDir()
	os.MkdirAll(filepath.Join(f.home, ".codex"), 0o700)
	args := []string{"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	for _, c := range api.CodexConfig("MOCK_API_KEY") {
		args = append(args, "-c", c)
	}
	cmd := exec.CommandContext(context.Background(), bin, append(args, "say hello to codex")...)
	cmd.Dir = work
	cmd.Env = []string{"CODEX_HOME=" + filepath.Join(f.home, ".codex"), "HOME=" + f.home, "PATH=" + os.Getenv("PATH"), "MOCK_API_KEY=mock-key"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out)
	}
	f.scan()
	p := f.list(Query{})
	if len(p.Sessions) != 1 || p.Sessions[0].Project != work || p.Sessions[0].Title != "say hello to codex" || p.Sessions[0].Agent != "codex" {
		t.Fatalf("sessions = %+v", p.Sessions)
	}
	c, err := f.index.Read(context.Background(), p.Sessions[0].ID, 0, 100)
	want := "[user_message say hello to codex stream_start stream_chunk I will run it. stream_end tool_call exec_command tool_result exec_command stream_start stream_chunk It ran. stream_end]"
	if err != nil || fmt.Sprint(types(t, c.Frames)) != want {
		t.Fatalf("read %q, %v", types(t, c.Frames), err)
	}
}

// TestRealClaudePrint: transcripts the Claude Code CLI writes in -p mode
// (against the mock Messages API), a turn with a command and a second
// turn resuming the first, are listed with their project and first prompt
// and read back with every turn.
func TestRealClaudePrint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Claude Code CLI")
	}
	t.Parallel()
	bin := anthropicmock.ClaudeBin(t)
	api := anthropicmock.New(t, anthropicmock.Queue(
		anthropicmock.Reply{Blocks: []anthropicmock.Block{
			anthropicmock.Text("I'll run it."),
			anthropicmock.ToolUse("Bash", map[string]any{"command": "echo hi-from-claude", "description": "Say hi"}),
		}, StopReason: "tool_use"},
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("It ran.")}},
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Still here.")}},
	))
	f := newFixture(t, nil)
	work := filepath.Join(f.home, "work")
	os.MkdirAll(work, 0o755)
	out := runClaude(t, bin, api, f.home, work, "please run the greeting")
	id := between(out, `"session_id":"`, `"`)
	runClaude(t, bin, api, f.home, work, "--resume", id, "and once more")
	f.scan()
	p := f.list(Query{})
	if len(p.Sessions) != 1 || p.Sessions[0].Project != work || p.Sessions[0].Title != "please run the greeting" || p.Sessions[0].AgentSessionID != id {
		t.Fatalf("sessions = %+v (session %s)", p.Sessions, id)
	}
	c, err := f.index.Read(context.Background(), p.Sessions[0].ID, 0, 100)
	got := strings.Join(types(t, c.Frames), "|")
	for _, want := range []string{"user_message please run the greeting", "stream_chunk I'll run it.", "tool_call Bash", "tool_result Bash",
		"stream_chunk It ran.", "user_message and once more", "stream_chunk Still here."} {
		if err != nil || !strings.Contains(got, want) {
			t.Fatalf("read %q, %v: no %q", got, err, want)
		}
	}
	if p := f.list(Query{Text: "once more"}); len(p.Sessions) != 1 {
		t.Fatalf("search for the second prompt: %+v", p.Sessions)
	}
}

// runClaude runs the Claude Code CLI bin in -p mode in dir, with home as
// its home and api as its API, and returns its output.
func runClaude(t *testing.T, bin string, api *anthropicmock.Server, home, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-p", "--output-format", "json", "--allowedTools=Bash"}, args...)...)
	cmd.Dir = dir
	cmd.Env = api.ClaudeEnv(home)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("claude %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestRealClaudeLookAlikes: the Claude Code CLI run in <home>/a-b and in
// <home>/a/b keeps both conversations in one directory; each is listed
// under the directory it ran in, and neither resumes from the history.
func TestRealClaudeLookAlikes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Claude Code CLI")
	}
	t.Parallel()
	bin := anthropicmock.ClaudeBin(t)
	api := anthropicmock.New(t, anthropicmock.Queue(
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Hello from a-b.")}},
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Hello from a/b.")}},
	))
	f := newFixture(t, nil)
	dashed, nested := filepath.Join(f.home, "a-b"), filepath.Join(f.home, "a", "b")
	for _, dir := range []string{dashed, nested} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		runClaude(t, bin, api, f.home, dir, "hello from "+filepath.Base(filepath.Dir(dir)))
	}
	f.scan()
	p := f.list(Query{})
	projects := map[string]bool{}
	for _, s := range p.Sessions {
		projects[s.Project] = true
		if s.Resumable {
			t.Errorf("%s of %s is resumable beside its look-alike", s.ID, s.Project)
		}
	}
	if len(p.Sessions) != 2 || !projects[dashed] || !projects[nested] {
		t.Fatalf("sessions = %+v", p.Sessions)
	}
}

func between(s, start, end string) string {
	_, rest, _ := strings.Cut(s, start)
	v, _, _ := strings.Cut(rest, end)
	return v
}
