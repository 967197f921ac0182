package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/hooks"
	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/internal/recursor"
	"github.com/tetherdev/tether/internal/wstest"
)

// These tests drive the daemon with internal/recursor, which sends exactly
// what the ReCursor app sends and fails the test on any frame the app's
// parsers would drop or misread.

// appModel is the model behind the app's claude-code sessions: a prompt
// "run: CMD" asks to run CMD with Bash, "read: PATH" reads PATH; a tool
// result is reported back; anything else is echoed.
func appModel(req *anthropicmock.Request) anthropicmock.Reply {
	// Claude Code appends "system" messages after the user's turn.
	var last anthropicmock.Message
	for _, m := range req.Messages {
		if m.Role == "user" {
			last = m
		}
	}
	for _, b := range last.Content {
		if b.Type == "tool_result" {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Tool said: " + b.ResultText())}}
		}
	}
	prompt := ""
	for _, b := range last.Content {
		if b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") {
			prompt = b.Text
		}
	}
	if path, ok := strings.CutPrefix(prompt, "read: "); ok {
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.ToolUse("Read", map[string]any{"file_path": path})}}
	}
	if cmd, ok := strings.CutPrefix(prompt, "run: "); ok {
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{
			anthropicmock.Text("Running it."),
			anthropicmock.ToolUse("Bash", map[string]any{"command": cmd, "description": "Run " + cmd}),
		}}
	}
	return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("You said: " + prompt)}}
}

// newAppDaemon starts a daemon whose claude-code agent (the only one the
// app asks for) is the real CLI against appModel, and scans a fresh app
// code into the app.
func newAppDaemon(t *testing.T) (*daemon, *recursor.App, *anthropicmock.Server) {
	t.Helper()
	bin := anthropicmock.ClaudeBin(t)
	api := anthropicmock.New(t, appModel)
	d := newDaemonEnv(t, []string{
		"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, "--claude-bin", bin)
	return d, scanAppCode(t, d), api
}

// scanAppCode runs `tether pair --app --json` and scans its payload.
func scanAppCode(t *testing.T, d *daemon, args ...string) *recursor.App {
	t.Helper()
	code, out, errOut := runCmd(t, d.env, append([]string{"pair", "--app", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("pair --app: %d %s", code, errOut)
	}
	return recursor.NewApp(t, trustingDialer(t, d), strings.TrimSpace(out))
}

// trustingDialer verifies the daemon's certificate against a trust store
// holding it, as a phone does once the user installed the certificate:
// the app pins nothing and ignores the QR's fp.
func trustingDialer(t *testing.T, d *daemon) *websocket.Dialer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDirOf(d.env), "tls", "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("tls/cert.pem holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return wstest.CADialer(cert)
}

// connectApp connects and fails unless the answer is connection_ack.
func connectApp(t *testing.T, app *recursor.App) (*recursor.Client, recursor.Frame) {
	t.Helper()
	c, f := app.Connect()
	if f.Type != "connection_ack" {
		t.Fatalf("auth answered %s %v", f.Type, f.Payload)
	}
	return c, f
}

func TestRecursorPairingWithAppCode(t *testing.T) {
	d := newDaemon(t)
	app := scanAppCode(t, d)

	// The agent screen's probe spends nothing: it pairs the device the
	// app's own connection then finds again.
	probe := app.Probe()
	if probe.Type != "connection_ack" {
		t.Fatalf("probe answered %s %v", probe.Type, probe.Payload)
	}
	// Every connect with the QR token is this one device: nothing in the
	// app's frames tells two phones apart.
	deviceID := probe.Payload["device_id"]
	for i := range 3 {
		c, ack := connectApp(t, app)
		if ack.Payload["device_id"] != deviceID {
			t.Fatalf("connect %d: device %v, want %v", i, ack.Payload["device_id"], deviceID)
		}
		// The app's pings carry no id; a pong of any id clears its timer.
		c.HeartbeatPing()
		c.WaitFor("heartbeat_pong", nil)
		id := c.HealthCheck()
		hs := c.WaitFor("health_status", nil) // the first of any id completes the check
		if hs.ID != id || hs.Payload["ready"] != true {
			t.Fatalf("health_status %s %v", hs.ID, hs.Payload)
		}
		c.WS.Close()
	}
	code, out, _ := runCmd(t, d.env, "devices", "list", "--json")
	var devs []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &devs) != nil || len(devs) != 2 {
		t.Fatalf("devices list: %d %s (want the fixture's phone and the app)", code, out)
	}

	// A plain code works once: an app that resends it is refused.
	_, out, _ = runCmd(t, d.env, "pair", "--json")
	once := recursor.NewApp(t, trustingDialer(t, d), strings.TrimSpace(out))
	connectApp(t, once)
	if _, f := once.Connect(); f.Type != "connection_error" {
		t.Fatalf("a plain code reused: %s %v", f.Type, f.Payload)
	}

	// An app code not claimed within its lifetime is refused.
	late := scanAppCode(t, d, "--ttl", "1s")
	time.Sleep(1100 * time.Millisecond)
	if _, f := late.Connect(); f.Type != "connection_error" || f.Payload["message"] == "" {
		t.Fatalf("an expired app code: %s %v", f.Type, f.Payload)
	}

	// Revoked: refused with a message the app shows on Bridge Setup.
	live, _ := connectApp(t, app)
	if code, _, errOut := runCmd(t, d.env, "devices", "revoke", deviceID.(string)); code != 0 {
		t.Fatalf("revoke: %s", errOut)
	}
	if f := live.WaitFor("connection_error", nil); f.Payload["message"] == "" {
		t.Fatalf("revoked live connection: %v", f.Payload)
	}
	if _, f := app.Connect(); f.Type != "connection_error" {
		t.Fatalf("revoked app code: %s %v", f.Type, f.Payload)
	}
}

func TestRecursorPairAppExplainsTheCertificate(t *testing.T) {
	d := newDaemon(t)
	_, out, _ := runCmd(t, d.env, "pair", "--app")
	if !strings.Contains(out, "app code") {
		t.Fatalf("pair --app output: %s", out)
	}
	for _, want := range []string{"self-signed", "--tls tailscale", "--tls files", "tether doctor"} {
		if !strings.Contains(out, want) {
			t.Errorf("pair --app does not say %q:\n%s", want, out)
		}
	}
}

func TestRecursorChatSession(t *testing.T) {
	d, app, _ := newAppDaemon(t)
	c, ack := connectApp(t, app)
	if !slices.Contains(toStrings(ack.Payload["supported_agents"]), recursor.Agent) {
		t.Fatalf("supported_agents %v", ack.Payload["supported_agents"])
	}
	sid := recursor.NewUUID()
	c.SessionStart(sid, d.project)
	c.Message(sid, "  hello from the app  ") // before session_ready, as the app does

	ready := c.WaitFor("session_ready", nil)
	if ready.Payload["session_id"] != sid || ready.Payload["working_directory"] != d.project {
		t.Fatalf("session_ready %v", ready.Payload)
	}
	c.WaitFor("stream_end", recursor.ForSession(sid))
	if text := appStreamed(c, sid); !strings.Contains(text, "You said: hello from the app") {
		t.Fatalf("streamed %q", text)
	}
	c.WaitFor("turn_complete", recursor.ForSession(sid))

	// The same id again is a clash.
	id := c.SessionStart(sid, d.project)
	if e := c.Reply(id); e.Type != "error" {
		t.Fatalf("session_start of a taken id: %s %v", e.Type, e.Payload)
	}

	// The app reconnects without last_seq: nothing it showed comes again,
	// acknowledged notifications included.
	shown := maxSeq(c)
	c.WS.Close()
	c2, ack2 := connectApp(t, app)
	if s := findSession(ack2, sid); s == nil || s["status"] == "closed" || s["status"] == "paused" {
		t.Fatalf("active_sessions %v", ack2.Payload["active_sessions"])
	}
	c2.Message(sid, "second")
	c2.WaitFor("turn_complete", recursor.ForSession(sid))
	for _, f := range c2.Frames {
		unacked := f.Type == "notification" && !slices.Contains(c.Acked, f.Payload["notification_id"].(string))
		if seq := frameSeq(f); seq != 0 && seq <= shown && !unacked {
			t.Errorf("replayed %s seq %d (already shown up to %d)", f.Type, seq, shown)
		}
	}
	if !strings.Contains(appStreamed(c2, sid), "You said: second") {
		t.Fatalf("second turn streamed %q", appStreamed(c2, sid))
	}

	// The app's client-to-server claude_event (git pull from the git
	// screen) is a pull; this branch has no upstream, so the answer is
	// GIT_ERROR, which the app ignores, and the connection stays.
	c2.ClaudeEvent("git_pull", "session_id", sid)
	if f := c2.WaitFor("error", nil); !strings.Contains(f.Payload["message"].(string), "no upstream") {
		t.Fatalf("pull without upstream: %v", f.Payload)
	}
	c2.HeartbeatPing()
	c2.WaitFor("heartbeat_pong", nil)

	// session_end without an id: the session is closed and not listed.
	c2.SessionEnd(sid)
	c2.WaitFor("session_end", recursor.ForSession(sid))
	c2.WS.Close()
	_, ack3 := connectApp(t, app)
	if s := findSession(ack3, sid); s != nil && s["status"] != "closed" {
		t.Fatalf("an ended session listed as %v", s)
	}
}

func TestRecursorApprovalsAndToolResults(t *testing.T) {
	d, app, api := newAppDaemon(t)
	c, _ := connectApp(t, app)
	sid := recursor.NewUUID()
	c.SessionStart(sid, d.project)
	c.WaitFor("session_ready", nil)

	ask := func(cmd string) recursor.Frame {
		t.Helper()
		c.Message(sid, "run: "+cmd)
		ar := c.WaitFor("approval_required", recursor.ForSession(sid))
		if ar.Payload["source"] == "hooks" || ar.Payload["tool"] != "Bash" || ar.Payload["tool_call_id"] == "" {
			t.Fatalf("approval_required %v", ar.Payload)
		}
		return ar
	}
	result := func(ar recursor.Frame) (recursor.Frame, map[string]any) {
		t.Helper()
		tr := c.WaitFor("tool_result", func(f recursor.Frame) bool { return f.Payload["tool_call_id"] == ar.Payload["tool_call_id"] })
		if tr.ID == ar.ID {
			t.Errorf("tool_result and approval_required share the envelope id %q: the app stores one over the other", tr.ID)
		}
		c.WaitFor("turn_complete", recursor.ForSession(sid))
		return tr, tr.Payload["result"].(map[string]any)
	}

	// Approved: the command runs; its output is in result.content.
	ar := ask("echo ran > approved.txt && echo done-ok")
	if c.ApprovalResponse(ar, recursor.Approved, "") == "" {
		t.Fatal("the app did not answer")
	}
	_, res := result(ar)
	if res["success"] != true || !strings.Contains(res["content"].(string), "done-ok") {
		t.Fatalf("approved result %v", res)
	}
	if _, err := os.Stat(filepath.Join(d.project, "approved.txt")); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	if _, ok := res["duration_ms"]; !ok {
		t.Errorf("result without duration_ms: %v", res)
	}

	// Rejected: nothing runs; success is false.
	ar = ask("touch rejected.txt")
	c.ApprovalResponse(ar, recursor.Rejected, "")
	_, res = result(ar)
	if res["success"] != false {
		t.Fatalf("rejected result %v", res)
	}
	if _, err := os.Stat(filepath.Join(d.project, "rejected.txt")); !os.IsNotExist(err) {
		t.Fatal("the rejected command ran")
	}

	// Modified with instructions: nothing runs; the agent is told the text.
	ar = ask("touch modified.txt")
	c.ApprovalResponse(ar, recursor.Modified, "use the Makefile target instead")
	_, res = result(ar)
	if _, err := os.Stat(filepath.Join(d.project, "modified.txt")); !os.IsNotExist(err) {
		t.Fatal("the command ran although the app sent instructions instead")
	}
	told := false
	for _, b := range api.MessageRequests()[len(api.MessageRequests())-1].ToolResults() {
		told = told || strings.Contains(b.ResultText(), "use the Makefile target instead")
	}
	if !told || res["success"] != false {
		t.Fatalf("instructions did not reach the agent (result %v)", res)
	}

	// A read runs without a question (low risk); its output is a string
	// in result.content too.
	os.WriteFile(filepath.Join(d.project, "notes.md"), []byte("line one\nline two\n"), 0o644)
	c.Message(sid, "read: "+filepath.Join(d.project, "notes.md"))
	tr := c.WaitFor("tool_result", recursor.ForSession(sid))
	if res := tr.Payload["result"].(map[string]any); res["success"] != true || !strings.Contains(res["content"].(string), "line two") {
		t.Fatalf("Read result %v", res)
	}
	c.WaitFor("turn_complete", recursor.ForSession(sid))
	// The turn's notification follows its turn_complete: read (and so
	// acknowledged) before the ping below, which must come behind every ack.
	c.WaitFor("notification", func(f recursor.Frame) bool {
		return f.Payload["session_id"] == sid && f.Payload["notification_type"] == "turn_complete"
	})

	// Every approval raised a notification, acknowledged at once without an
	// envelope id; none of them comes back on reconnect.
	if len(c.Acked) < 3 {
		t.Fatalf("notifications acknowledged: %v", c.Acked)
	}
	// The acks have no reply: a ping behind them shows they were read.
	c.HeartbeatPing()
	c.WaitFor("heartbeat_pong", nil)
	c.WS.Close()
	c2, _ := connectApp(t, app)
	c2.HeartbeatPing()
	c2.WaitFor("heartbeat_pong", nil)
	for _, f := range c2.Frames {
		if f.Type == "notification" && slices.Contains(c.Acked, f.Payload["notification_id"].(string)) {
			t.Errorf("an acknowledged notification came back: %v", f.Payload)
		}
	}
}

// appStreamed is what the app's chat shows for a session: the text of its
// stream chunks.
func appStreamed(c *recursor.Client, sessionID string) string {
	var b strings.Builder
	for _, f := range c.Frames {
		if f.Type == "stream_chunk" && f.Payload["session_id"] == sessionID {
			s, _ := f.Payload["content"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// frameSeq is a frame's seq (which the app ignores), 0 when it has none.
func frameSeq(f recursor.Frame) int64 {
	var env struct{ Seq int64 }
	json.Unmarshal(f.Raw, &env)
	return env.Seq
}

func maxSeq(c *recursor.Client) int64 {
	var m int64
	for _, f := range c.Frames {
		m = max(m, frameSeq(f))
	}
	return m
}

func findSession(ack recursor.Frame, id string) map[string]any {
	list, _ := ack.Payload["active_sessions"].([]any)
	for _, s := range list {
		if m, ok := s.(map[string]any); ok && m["session_id"] == id {
			return m
		}
	}
	return nil
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, s := range list {
		if str, ok := s.(string); ok {
			out = append(out, str)
		}
	}
	return out
}

func TestRecursorGit(t *testing.T) {
	d, app, _ := newAppDaemon(t)
	p := d.project
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(p, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, p, "config", "user.name", "App User")
	gitIn(t, p, "config", "user.email", "app@example.com")
	for name, content := range map[string]string{"mod.txt": "one\ntwo\n", "del.txt": "gone\n", "old.txt": "moving\nfile\nhere\n",
		"typ.txt": "becomes a link\n", "script.sh": "echo hi\n", "nonl.txt": "last\n", "both.txt": "a\n"} {
		write(name, content)
	}
	os.WriteFile(filepath.Join(p, "bin.dat"), []byte{0, 1, 2, 3}, 0o644)
	gitIn(t, p, "add", ".")
	gitIn(t, p, "commit", "-q", "-m", "first")

	write("mod.txt", "one\nTWO\n")
	write("staged.txt", "new\n")
	gitIn(t, p, "add", "staged.txt")
	os.Remove(filepath.Join(p, "del.txt"))
	write("untracked.txt", "u\n")
	gitIn(t, p, "mv", "old.txt", "new.txt")
	os.Remove(filepath.Join(p, "typ.txt"))
	os.Symlink("mod.txt", filepath.Join(p, "typ.txt"))
	os.WriteFile(filepath.Join(p, "bin.dat"), []byte{0, 9, 9}, 0o644)
	os.Chmod(filepath.Join(p, "script.sh"), 0o755)
	write("nonl.txt", "last, without newline")
	write("both.txt", "a\nb\n")
	gitIn(t, p, "add", "both.txt")
	write("both.txt", "a\nb\nc\n")

	c, _ := connectApp(t, app)
	sid := recursor.NewUUID()
	c.SessionStart(sid, p)
	c.WaitFor("session_ready", nil)

	type change struct {
		Path, Status       string
		Staged, Conflicted bool
		TypeChanged        bool `json:"type_changed"`
	}
	var st struct {
		Branch        string
		Ahead, Behind int
		Changes       []change
	}
	id := c.GitStatus(sid)
	if err := c.Reply(id).Decode(&st); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	paths := []string{}
	for _, ch := range st.Changes {
		kinds[ch.Status] = true
		paths = append(paths, ch.Path)
	}
	for _, k := range recursor.ChangeStatuses {
		if !kinds[k] {
			t.Errorf("no change of kind %s in %+v", k, st.Changes)
		}
	}
	byPath := map[string]change{}
	for _, ch := range st.Changes {
		byPath[ch.Path] = ch
	}
	if st.Branch != "main" || !byPath["typ.txt"].TypeChanged || byPath["typ.txt"].Status != "modified" ||
		byPath["new.txt"].Status != "renamed" || !byPath["staged.txt"].Staged || byPath["staged.txt"].Status != "added" {
		t.Errorf("status %+v", st)
	}

	// The diff screen: every file, binary ones and mode changes too.
	id = c.GitDiff(sid, nil)
	diff := c.Reply(id)
	var dr struct {
		Files []struct {
			Path      string
			Binary    bool
			Additions int
			Hunks     []struct {
				Lines []struct {
					Type, Content string
					NoNewline     bool `json:"no_newline"`
				}
			}
		}
	}
	if err := diff.Decode(&dr); err != nil || diff.Type != "git_diff_response" {
		t.Fatalf("git_diff %s: %v", diff.Type, err)
	}
	for _, f := range dr.Files {
		switch f.Path {
		case "bin.dat":
			if !f.Binary || f.Additions != 0 || len(f.Hunks) != 0 {
				t.Errorf("binary file %+v", f)
			}
		case "nonl.txt":
			lines := f.Hunks[len(f.Hunks)-1].Lines
			last := lines[len(lines)-1]
			if last.Type != "added" || last.Content != "last, without newline" || !last.NoNewline {
				t.Errorf("no trailing newline: %+v", lines)
			}
		}
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				if strings.HasPrefix(l.Content, `\ No newline`) {
					t.Errorf("%s: %q is a line", f.Path, l.Content)
				}
			}
		}
	}
	// The diff screen of the ticked files: every path the status named.
	id = c.GitDiff(sid, paths)
	if f := c.Reply(id); f.Type != "git_diff_response" {
		t.Fatalf("git_diff of the status's paths: %s %v", f.Type, f.Payload)
	}
	modes := strings.Contains(string(diff.Raw), `"old_mode":"100644"`) && strings.Contains(string(diff.Raw), `"new_mode":"100755"`)
	if !modes {
		t.Errorf("the mode change of script.sh is missing: %s", diff.Raw)
	}

	// Commit with every change ticked (the app's default): untracked and
	// deleted paths included. The app refreshes only on git_status_response.
	id = c.GitCommit(sid, "Everything from the phone", paths)
	c.WaitFor("git_commit_response", func(f recursor.Frame) bool { return f.ID == id })
	after := c.WaitFor("git_status_response", nil)
	var st2 struct {
		Changes []change
	}
	after.Decode(&st2)
	if len(st2.Changes) != 0 {
		t.Errorf("after committing every ticked change the status still shows %+v", st2.Changes)
	}

	// Detached HEAD: the branch is still a string.
	gitIn(t, p, "checkout", "-q", "--detach")
	id = c.GitStatus(sid)
	if f := c.Reply(id); f.Type != "git_status_response" || !strings.Contains(f.Payload["branch"].(string), "detached") {
		t.Errorf("detached: %s %v", f.Type, f.Payload)
	}
	gitIn(t, p, "checkout", "-q", "main")

	// A merge conflict: one change, status modified, conflicted.
	gitIn(t, p, "checkout", "-q", "-b", "other")
	write("mod.txt", "one\nOTHER\n")
	gitIn(t, p, "commit", "-q", "-am", "other")
	gitIn(t, p, "checkout", "-q", "main")
	write("mod.txt", "one\nMAIN\n")
	gitIn(t, p, "commit", "-q", "-am", "main")
	merge := exec.Command("git", "merge", "-q", "other")
	merge.Dir = p
	if out, err := merge.CombinedOutput(); err == nil {
		t.Fatalf("the merge did not conflict: %s", out)
	}
	id = c.GitStatus(sid)
	var st3 struct{ Changes []change }
	c.Reply(id).Decode(&st3)
	if len(st3.Changes) != 1 || st3.Changes[0].Path != "mod.txt" || st3.Changes[0].Status != "modified" || !st3.Changes[0].Conflicted {
		t.Errorf("conflict: %+v", st3.Changes)
	}
	if id = c.GitCommit(sid, "resolve", []string{"mod.txt"}); c.Reply(id).Type != "error" {
		t.Error("a commit with unmerged paths was not refused")
	}
}

func TestRecursorFileBrowsing(t *testing.T) {
	d, app, _ := newAppDaemon(t)
	p := d.project
	os.MkdirAll(filepath.Join(p, "lib", "models"), 0o755)
	os.WriteFile(filepath.Join(p, "lib", "models", "user.dart"), []byte("class User {}\n"), 0o644)
	os.WriteFile(filepath.Join(p, "lib", "main.dart"), []byte("void main() {}\n"), 0o644)
	os.WriteFile(filepath.Join(p, "README.md"), []byte("# project\n"), 0o644)
	os.Symlink("lib", filepath.Join(p, "liblink"))
	os.Symlink("nowhere", filepath.Join(p, "dangling"))

	c, _ := connectApp(t, app)
	sid := recursor.NewUUID()
	c.SessionStart(sid, p)
	c.WaitFor("session_ready", nil)

	type entry struct {
		Name, Path, Type string
		Symlink          bool
	}
	// list is RepoNotifier._fetchDirectory: the reply is matched by id, and
	// anything but file_list_response is shown as the failure.
	list := func(path string) map[string]entry {
		t.Helper()
		id := c.FileList(sid, path)
		f := c.Reply(id)
		var l struct{ Entries []entry }
		if err := f.Decode(&l); err != nil || f.Type != "file_list_response" {
			t.Fatalf("file_list %q: %s %v %v", path, f.Type, f.Payload, err)
		}
		out := map[string]entry{}
		for _, e := range l.Entries {
			out[e.Name] = e
		}
		return out
	}
	root := list(".")
	if root["lib"].Type != "directory" || root["README.md"].Type != "file" ||
		root["liblink"].Type != "directory" || !root["liblink"].Symlink || root["dangling"].Type != "file" || !root["dangling"].Symlink {
		t.Fatalf("root entries %+v", root)
	}
	lib := list(root["lib"].Path)
	models := list(lib["models"].Path)
	user := models["user.dart"]
	if user.Type != "file" {
		t.Fatalf("lib/models entries %+v", models)
	}
	if via := list(root["liblink"].Path); via["main.dart"].Type != "file" {
		t.Fatalf("through the symlink: %+v", via)
	}

	id := c.FileRead(sid, user.Path)
	f := c.Reply(id)
	if f.Type != "file_read_response" || f.Payload["content"] != "class User {}\n" {
		t.Fatalf("file_read %s %v", f.Type, f.Payload)
	}

	// Back up: the parent without its leading "/", then "/" at the top.
	up := recursor.ParentPath(lib["models"].Path)
	if again := list(up); again["main.dart"].Path != lib["main.dart"].Path {
		t.Fatalf("up to %q: %+v", up, again)
	}
	top := recursor.ParentPath(up)
	if again := list(top); top != "/" || len(again) != len(root) || again["lib"].Path != root["lib"].Path {
		t.Fatalf("up to %q: %+v", top, again)
	}
	// A failure is an error under the request's id, with a message to show.
	id = c.FileList(sid, "no/such/dir")
	if f := c.Reply(id); f.Type != "error" || f.Payload["message"] == "" {
		t.Fatalf("file_list of a missing directory: %s %v", f.Type, f.Payload)
	}
}

// postHook sends one Claude Code hook event to the daemon, as `tether
// hook` does, within wait.
func postHook(t *testing.T, d *daemon, wait time.Duration, event map[string]any) error {
	t.Helper()
	tok, err := hooks.ReadToken(dataDirOf(d.env))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(event)
	endpoint := strings.Replace(strings.TrimSuffix(d.info.URL, "/ws"), "wss://", "https://", 1) + hooks.Path
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: trustingDialer(t, d).TLSClientConfig}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("hook %v: HTTP %d", event["hook_event_name"], resp.StatusCode)
	}
	return nil
}

func TestRecursorHookEvents(t *testing.T) {
	d := newDaemon(t)
	app := scanAppCode(t, d)
	c, _ := connectApp(t, app)
	const sid = "0f3c2b1a-hook-session"
	hook := func(name string, fields map[string]any) recursor.Frame {
		t.Helper()
		ev := map[string]any{"session_id": sid, "hook_event_name": name, "cwd": d.project, "transcript_path": "/dev/null"}
		for k, v := range fields {
			ev[k] = v
		}
		if err := postHook(t, d, 10*time.Second, ev); err != nil {
			t.Fatalf("hook %s: %v", name, err)
		}
		// Claude Code's own field names stay inside, under the app's.
		return c.WaitFor("claude_event", func(f recursor.Frame) bool {
			in, _ := f.Payload["payload"].(map[string]any)
			return f.Payload["session_id"] == sid && in["hook_event_name"] == name
		})
	}
	inner := func(f recursor.Frame) map[string]any { return f.Payload["payload"].(map[string]any) }

	f := hook("SessionStart", map[string]any{"source": "startup"})
	if f.Payload["event_type"] != "SessionStart" || inner(f)["working_directory"] != d.project {
		t.Fatalf("SessionStart %v", f.Payload)
	}
	f = hook("UserPromptSubmit", map[string]any{"prompt": "tidy the tests"})
	if inner(f)["prompt"] != "tidy the tests" {
		t.Fatalf("UserPromptSubmit %v", f.Payload)
	}
	f = hook("PreToolUse", map[string]any{"tool_name": "Read", "tool_input": map[string]any{"file_path": "go.mod"}, "tool_use_id": "toolu_r1"})
	if in := inner(f); in["tool"] != "Read" || in["tool_name"] != "Read" || in["params"].(map[string]any)["file_path"] != "go.mod" {
		t.Fatalf("PreToolUse %v", f.Payload)
	}
	f = hook("PostToolUse", map[string]any{"tool_name": "Bash", "tool_input": map[string]any{"command": "false"}, "tool_use_id": "toolu_b1",
		"tool_response": map[string]any{"stdout": "", "stderr": "failed", "interrupted": false, "is_error": true}})
	if r, _ := inner(f)["result"].(map[string]any); r == nil || r["success"] != false || r["content"] != "failed" {
		t.Fatalf("PostToolUse %v", f.Payload)
	}

	// A hooks question: the app never answers those (source hooks) and
	// does not say it can at auth, so with only the app connected the
	// question goes back to the terminal at once instead of waiting on it.
	if err := postHook(t, d, 2*time.Second, map[string]any{"session_id": sid, "hook_event_name": "PreToolUse", "cwd": d.project,
		"tool_name": "Bash", "tool_input": map[string]any{"command": "rm -rf build"}, "tool_use_id": "toolu_b2"}); err != nil {
		t.Fatalf("a hooks question with only the app connected: %v", err)
	}

	// A turn's end must not read as the session's end ("Stop" closes it in
	// the app).
	f = hook("Stop", map[string]any{"stop_hook_active": false, "last_assistant_message": "done"})
	if f.Payload["event_type"] == "Stop" {
		t.Fatalf("a turn's end reads as the session's end: %v", f.Payload)
	}
	c.WS.Close()
	c, ack := connectApp(t, app)
	if s := findSession(ack, sid); s == nil || s["status"] == "closed" {
		t.Fatalf("after a turn the observed session is %v", s)
	}
	f = hook("SessionEnd", map[string]any{"reason": "exit"})
	if f.Payload["event_type"] != "SessionEnd" || inner(f)["reason"] != "exit" {
		t.Fatalf("SessionEnd %v", f.Payload)
	}
	c.WaitFor("session_end", recursor.ForSession(sid))
}

// TestRecursorAfterADaemonRestart: the app reconnects to the same address
// with the same token, never resumes, and keeps messaging its session.
func TestRecursorAfterADaemonRestart(t *testing.T) {
	d, app, _ := newAppDaemon(t)
	c, _ := connectApp(t, app)
	sid := recursor.NewUUID()
	c.SessionStart(sid, d.project)
	c.Message(sid, "before the restart")
	c.WaitFor("turn_complete", recursor.ForSession(sid))
	c.HeartbeatPing()
	c.WaitFor("heartbeat_pong", nil)
	shown := maxSeq(c)

	d.stop()
	c.WS.Close()
	u, err := url.Parse(app.URL)
	if err != nil {
		t.Fatal(err)
	}
	d.start("--listen", u.Host, "--claude-bin", anthropicmock.ClaudeBin(t))

	c2, ack := connectApp(t, app)
	if s := findSession(ack, sid); s == nil || s["status"] == "closed" {
		t.Fatalf("after a restart the session is %v", s)
	}
	c2.Message(sid, "after the restart")
	c2.WaitFor("turn_complete", recursor.ForSession(sid))
	if !strings.Contains(appStreamed(c2, sid), "You said: after the restart") {
		t.Fatalf("streamed %q", appStreamed(c2, sid))
	}
	for _, f := range c2.Frames {
		if seq := frameSeq(f); seq != 0 && seq <= shown && f.Type != "notification" {
			t.Errorf("replayed %s seq %d after the restart (shown up to %d)", f.Type, seq, shown)
		}
	}
}

// TestRecursorDirectPublicReconnect: over the public internet the app
// checks health and acknowledges the warning once, after its first
// connect; its reconnects send neither (contract, section d).
func TestRecursorDirectPublicReconnect(t *testing.T) {
	// A reverse proxy on 127.0.0.2 that the daemon trusts forwards a
	// public client; the fixture's own phone (127.0.0.1) stays local.
	d := newDaemonEnv(t, nil, "--trusted-proxy", "127.0.0.2/32")
	app := scanAppCode(t, d)
	app.Dialer.NetDialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext
	app.Header = http.Header{"X-Forwarded-For": {"203.0.113.7"}, "X-Forwarded-Proto": {"https"}}

	c, ack := connectApp(t, app)
	if ack.Payload["connection_mode"] != "direct_public" || ack.Payload["requires_health_verification"] != true {
		t.Fatalf("connection_ack %v", ack.Payload)
	}
	c.HealthCheck()
	hs := c.WaitFor("health_status", nil)
	if hs.Payload["requires_acknowledgment"] != true || !slices.Contains(toStrings(hs.Payload["warnings"]), "DIRECT_PUBLIC_CONNECTION") {
		t.Fatalf("health_status %v", hs.Payload)
	}
	id := c.AcknowledgeWarning("DIRECT_PUBLIC_CONNECTION")
	if f := c.Reply(id); f.Type != "acknowledgment_accepted" || f.Payload["ready"] != true {
		t.Fatalf("acknowledge_warning: %s %v", f.Type, f.Payload)
	}
	sid := recursor.NewUUID()
	c.GitStatus(sid) // any request: served, even if only with an error
	if f := c.WaitFor("error", nil); f.Payload["code"] == "ACKNOWLEDGMENT_REQUIRED" {
		t.Fatalf("after the acknowledgment: %v", f.Payload)
	}

	c.WS.Close()
	c2, _ := connectApp(t, app)
	id = c2.FileList(sid, ".")
	if f := c2.Reply(id); f.Payload["code"] == "ACKNOWLEDGMENT_REQUIRED" {
		t.Fatalf("the app's reconnect (no new health check, no new acknowledgment) is refused: %v", f.Payload)
	}
}
