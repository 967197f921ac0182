package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/openaimock"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// codexDaemon starts a daemon that offers the real Codex CLI, whose API is
// api; the user's ~/.codex/config.toml names a model the CLI knows.
func codexDaemon(t testing.TB, api *openaimock.Server) *daemon {
	t.Helper()
	bin := openaimock.CodexBin(t)
	d := newDaemonEnv(t, []string{"OPENAI_API_KEY=sk-mock-not-a-key", "OPENAI_BASE_URL=" + api.URL}, "--codex-bin", bin)
	dir := filepath.Join(filepath.Dir(d.project), ".codex")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte("model = \"gpt-5.5\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

// codexSessionID is a session id of this test process: a sandbox's socket
// directory is named after its session's id alone, and the same test run
// by two processes at once (a CI run beside a developer's) must not share
// one.
func codexSessionID(name string) string {
	return fmt.Sprintf("%s-%d", name, os.Getpid())
}

// codexSession starts a codex session with policy and waits until it is
// ready.
func codexSession(t testing.TB, d *daemon, c interface {
	Send(string, string, any)
}, id, policy string) {
	t.Helper()
	c.Send(wire.TypeSessionStart, "start-"+id, map[string]any{"agent": "codex", "session_id": id, "working_directory": d.project, "policy": policy})
}

// TestCodexSessionEndToEnd drives the real Codex CLI inside a tether
// sandbox from a phone connection; only the model is mocked. The answer
// streams, the shell command is asked on the phone with the shell's risk,
// runs in the sandbox once approved, and its output reaches the model;
// the sandbox reaches only the API.
func TestCodexSessionEndToEnd(t *testing.T) {
	t.Parallel()
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Hello from Codex, streamed to the phone.")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("I'll write the marker."), openaimock.Command("echo hello-from-codex > marker.txt && cat marker.txt")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Done: the marker is written.")}},
	))
	d := codexDaemon(t, api)
	c, ack := d.phone(nil)
	if !strings.Contains(strings.Join(ack.SupportedAgents, ","), "codex") {
		t.Fatalf("supported_agents = %v", ack.SupportedAgents)
	}
	id := codexSessionID("codex-e2e")
	codexSession(t, d, c, id, "ask")
	var ready wire.SessionReady
	c.WaitFor(wire.TypeSessionReady, &ready, nil)
	if ready.Agent != "codex" || ready.Sandbox == nil {
		t.Fatalf("session_ready = %+v", ready)
	}
	if ready.Sandbox.Bubblewrap {
		if want := strings.TrimSuffix(strings.TrimPrefix(api.URL, "http://"), "/v1"); len(ready.Sandbox.Egress) != 1 || ready.Sandbox.Egress[0] != want {
			t.Fatalf("egress %v, want only the API %s", ready.Sandbox.Egress, want)
		}
	}

	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "say hello"})
	var first wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &first, nil)
	chunks := 0
	for _, e := range c.Seen {
		if e.Type == wire.TypeStreamChunk {
			chunks++
		}
	}
	if got := streamed(c); got != "Hello from Codex, streamed to the phone." || chunks < 2 || first.IsError {
		t.Fatalf("streamed %q in %d chunks, turn %+v", got, chunks, first)
	}
	var info wire.AgentInfo
	for _, e := range c.Seen {
		if e.Type == wire.TypeAgentInfo {
			wstest.Decode(t, e, &info)
		}
	}
	if info.Model != "gpt-5.5" || info.Version != openaimock.CodexVersion {
		t.Errorf("agent_info = %+v", info)
	}
	if first.Result != "Hello from Codex, streamed to the phone." || first.Usage == nil || first.SessionUsage == nil || first.SessionUsage.InputTokens != 6 ||
		first.SessionUsage.CacheReadInputTokens != 4 {
		t.Fatalf("turn_complete = %+v", first)
	}

	c.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "please write the marker"})
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	if ar.Tool != "Bash" || ar.Source != "agent_sdk" || ar.RiskLevel != "high" ||
		string(ar.Params) != `{"command":"echo hello-from-codex \u003e marker.txt \u0026\u0026 cat marker.txt"}` {
		t.Fatalf("approval_required = %+v %s", ar, ar.Params)
	}
	c.Send(wire.TypeApprovalResponse, "r1", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	var done wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &done, nil)
	if !tr.Result.Success || tr.ToolCallID != ar.ToolCallID || tr.Result.Content != "hello-from-codex\n" || done.IsError ||
		!strings.Contains(streamed(c), "Done: the marker is written.") {
		t.Fatalf("tool_result %+v, turn %+v, text %q", tr, done, streamed(c))
	}
	if b, err := os.ReadFile(filepath.Join(d.project, "marker.txt")); err != nil || string(b) != "hello-from-codex\n" {
		t.Fatalf("marker: %q, %v", b, err)
	}
	reqs := api.Requests()
	if out := reqs[len(reqs)-1].Outputs(); !strings.Contains(strings.Join(mapValues(out), ""), "hello-from-codex") {
		t.Fatalf("the mock never got the command's output: %q", out)
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-mock-not-a-key" {
		t.Errorf("Authorization %q", got)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestCodexRejectionReachesTheModel: a command rejected on the phone with
// a reason does not run, and the model gets the reason.
func TestCodexRejectionReachesTheModel(t *testing.T) {
	t.Parallel()
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Command("touch rejected-marker")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Understood, I will not.")}},
	))
	d := codexDaemon(t, api)
	c, _ := d.phone(nil)
	id := codexSessionID("codex-reject")
	codexSession(t, d, c, id, "ask")
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "touch it"})
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	c.Send(wire.TypeApprovalResponse, "r1", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "rejected",
		"reason": "Not in this repository, please."})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	c.WaitFor(wire.TypeTurnComplete, nil, nil)
	if tr.Result.Success {
		t.Fatalf("tool_result %+v", tr)
	}
	if _, err := os.Stat(filepath.Join(d.project, "rejected-marker")); err == nil {
		t.Fatal("the rejected command ran")
	}
	last := api.Requests()[len(api.Requests())-1]
	if !last.HasText("user", "Not in this repository, please.") || !strings.Contains(strings.Join(mapValues(last.Outputs()), ""), "rejected") {
		t.Fatalf("the model did not get the reason: user %q, outputs %q", last.Texts("user"), last.Outputs())
	}
}

// TestCodexInterruptDuringASlowCommand: an interrupt from the phone while
// an approved command runs ends the turn within a second and kills the
// command, which Codex alone leaves running.
func TestCodexInterruptDuringASlowCommand(t *testing.T) {
	t.Parallel()
	const marker = "sleep 2; echo started > started; sleep 30; echo late > late"
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Command(marker)}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Back.")}},
	))
	d := codexDaemon(t, api)
	c, _ := d.phone(nil)
	id := codexSessionID("codex-interrupt")
	codexSession(t, d, c, id, "auto_approve")
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run the slow thing"})
	c.WaitFor(wire.TypeToolCall, nil, nil)
	waitFor(t, 30*time.Second, "the command to start", func() bool { _, err := os.Stat(filepath.Join(d.project, "started")); return err == nil })
	start := time.Now()
	c.Send(wire.TypeInterrupt, "i", map[string]any{"session_id": id})
	var done wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &done, nil)
	if took := time.Since(start); took > time.Second || done.Subtype != "error_during_execution" {
		t.Fatalf("interrupt: %+v after %v", done, took)
	}
	waitFor(t, 5*time.Second, "the command to end", func() bool { return len(processesRunning(marker)) == 0 })
	c.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "still there?"})
	var next wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &next, func(e wire.Envelope) bool { return e.Seq > 0 && strings.Contains(string(e.Payload), "Back.") })
}

// processesRunning lists the processes of this machine whose command line
// holds s.
func processesRunning(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCodexResumesAfterADaemonRestart: after a restart the session's next
// message continues the same Codex thread, whose history the model gets.
func TestCodexResumesAfterADaemonRestart(t *testing.T) {
	t.Parallel()
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Noted: kumquat.")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("You said kumquat.")}},
	))
	d := codexDaemon(t, api)
	c, _ := d.phone(nil)
	id := codexSessionID("codex-restart")
	codexSession(t, d, c, id, "ask")
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "remember kumquat"})
	c.WaitFor(wire.TypeTurnComplete, nil, nil)
	last := c.Seen[len(c.Seen)-1].Seq

	d.stop()
	d.start("--codex-bin", openaimock.CodexBin(t))
	c2, ack := d.phone(map[string]any{"last_seq": last})
	if len(ack.ActiveSessions) != 1 || ack.ActiveSessions[0].Status != "idle" || ack.ActiveSessions[0].Agent != "codex" {
		t.Fatalf("after restart: %+v", ack.ActiveSessions)
	}
	c2.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "which fruit?"})
	var done wire.TurnComplete
	c2.WaitFor(wire.TypeTurnComplete, &done, nil)
	// The session's usage adds this turn's tokens, not the thread's since
	// its start, which Codex reports after a resume.
	if done.Result != "You said kumquat." || done.SessionUsage == nil || done.SessionUsage.InputTokens != 12 || done.SessionUsage.CacheReadInputTokens != 8 ||
		done.SessionUsage.Turns != 2 {
		t.Fatalf("turn_complete = %+v, session usage %+v", done, done.SessionUsage)
	}
	reqs := api.Requests()
	if len(reqs) != 2 || !reqs[1].HasText("user", "remember kumquat") || !reqs[1].HasText("assistant", "Noted: kumquat.") ||
		reqs[1].Header.Get("Session_id") != reqs[0].Header.Get("Session_id") {
		t.Fatalf("the resumed request lacks the thread: user %q, assistant %q", reqs[1].Texts("user"), reqs[1].Texts("assistant"))
	}
}

// TestCodexEgressOnlyToItsAPI: the real Codex CLI reaches its API (a mock
// on the host's loopback) through the sandbox's proxy, while the command
// the model asks for reaches neither another service on the same loopback
// through the proxy (403) nor around it, and its environment holds the
// OpenAI key but none of another agent's.
func TestCodexEgressOnlyToItsAPI(t *testing.T) {
	t.Parallel()
	svc, hits := hostService(t)
	script := "env | grep -c ANTHROPIC_; curl -s --max-time 3 http://" + svc + "/; curl -s --noproxy '*' --max-time 3 http://" + svc + "/; echo tried"
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.Command(script)}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Done.")}},
	))
	bin := openaimock.CodexBin(t)
	d := newDaemonEnv(t, []string{"OPENAI_API_KEY=sk-mock-not-a-key", "OPENAI_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-4242"}, "--codex-bin", bin)
	c, _ := d.phone(nil)
	id := codexSessionID("codex-egress")
	codexSession(t, d, c, id, "auto_approve")
	var ready wire.SessionReady
	c.WaitFor(wire.TypeSessionReady, &ready, nil)
	if ready.Sandbox == nil || !ready.Sandbox.Bubblewrap {
		t.Skip("no bubblewrap here")
	}
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "reach out"})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	c.WaitFor(wire.TypeTurnComplete, nil, nil)
	if !strings.HasPrefix(tr.Result.Content, "0\n") || !strings.Contains(tr.Result.Content, "tried") || !strings.Contains(tr.Result.Content, "may not reach") ||
		strings.Contains(tr.Result.Content, "host-service-answered") || hits.Load() != 0 {
		t.Fatalf("the command's output %q, %d hits on the host service", tr.Result.Content, hits.Load())
	}
	if !strings.Contains(streamed(c), "Done.") {
		t.Fatalf("the session did not finish through its API: %q", streamed(c))
	}
}

// TestWebClientOffersCodex drives Debian's chromium through the web client
// (web/e2e/codex.mjs) against a daemon offering the real Codex CLI: codex
// is in the agent list, its session starts without Claude Code's
// permission mode, the answer streams in, and its settings are the model
// alone.
func TestWebClientOffersCodex(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("drives a real browser")
	}
	api := openaimock.New(t, openaimock.Queue(openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Hello from Codex in the browser.")}}))
	d := codexDaemon(t, api)
	runBrowser(t, d, "codex.mjs")
}

// TestFindCodexReplacesTheNpmLauncher: the npm package's Node launcher,
// found through a bin link, is replaced by the native binary of its
// platform package, in npm's nested and flat layouts; the sandbox binds
// the binary's target directory, which holds its tools.
func TestFindCodexReplacesTheNpmLauncher(t *testing.T) {
	t.Parallel()
	for _, layout := range []string{"node_modules/@openai/codex/node_modules/@openai/codex-linux-x64", "node_modules/@openai/codex-linux-x64"} {
		root := t.TempDir()
		launcher := filepath.Join(root, "node_modules/@openai/codex/bin/codex.js")
		native := filepath.Join(root, layout, "vendor/x86_64-unknown-linux-musl/bin/codex")
		for _, f := range []string{launcher, native} {
			os.MkdirAll(filepath.Dir(f), 0o755)
			os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755)
		}
		link := filepath.Join(root, "bin", "codex")
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(launcher, link); err != nil {
			t.Fatal(err)
		}
		got := findCodex(link)
		if real, _ := filepath.EvalSymlinks(native); got != real {
			t.Errorf("%s: findCodex = %s, want %s", layout, got, real)
		}
		if dirs := codexDirs(got); len(dirs) != 1 || filepath.Base(dirs[0]) != "x86_64-unknown-linux-musl" {
			t.Errorf("%s: bound %v", layout, dirs)
		}
	}
	if dirs := codexDirs("/usr/local/bin/codex"); len(dirs) != 1 || dirs[0] != "/usr/local/bin" {
		t.Errorf("a plain install binds %v", dirs)
	}
}

func TestCodexProviderAndEgress(t *testing.T) {
	t.Parallel()
	login := map[string]string{}
	if c := codexConfig(login); c != nil {
		t.Errorf("without a key: %q", c)
	}
	if e := codexEgress(login, []string{"x.example:443"}); strings.Join(e, ",") != "api.openai.com:443,chatgpt.com:443,auth.openai.com:443,x.example:443" {
		t.Errorf("login egress %v", e)
	}
	key := map[string]string{"OPENAI_API_KEY": "k"}
	if c := strings.Join(codexConfig(key), " "); !strings.Contains(c, `base_url="https://api.openai.com/v1"`) || !strings.Contains(c, `env_key="OPENAI_API_KEY"`) {
		t.Errorf("with a key: %s", c)
	}
	if e := codexEgress(key, nil); strings.Join(e, ",") != "api.openai.com:443" {
		t.Errorf("key egress %v", e)
	}
	local := map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}
	if e := codexEgress(local, nil); strings.Join(e, ",") != "127.0.0.1:8080" {
		t.Errorf("local egress %v", e)
	}
	if c := strings.Join(codexConfig(local), " "); !strings.Contains(c, `base_url="http://127.0.0.1:8080/v1"`) {
		t.Errorf("local config %s", c)
	}
}
