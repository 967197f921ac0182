package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/wire"
)

// daemon is a running `tether serve` with a paired device and a project
// directory sessions may work in.
type daemon struct {
	t       testing.TB
	env     []string
	info    runtimeInfo
	stop    func()
	token   string
	project string
}

func newDaemon(t testing.TB, args ...string) *daemon {
	t.Helper()
	return newDaemonEnv(t, nil, args...)
}

// newDaemonEnv starts a daemon whose environment also holds extraEnv.
func newDaemonEnv(t testing.TB, extraEnv []string, args ...string) *daemon {
	t.Helper()
	root := t.TempDir()
	project := filepath.Join(root, "project")
	os.MkdirAll(project, 0o755)
	git := exec.Command("git", "init", "-q", "-b", "main", project)
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	env := append([]string{"TETHER_DATA=" + filepath.Join(t.TempDir(), "data"), "HOME=" + root, "TETHER_ROOT=" + root,
		"PATH=" + os.Getenv("PATH")}, extraEnv...)
	d := &daemon{t: t, env: env, project: project}
	d.start(args...)
	_, out, _ := runCmd(t, env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	c := d.connect(p.Token, nil)
	var ack wire.ConnectionAck
	wstest.Decode(t, c.Read(), &ack)
	d.token = ack.DeviceToken
	c.WS.Close()
	return d
}

func (d *daemon) start(args ...string) {
	d.info, _, d.stop = startDaemon(d.t, d.env, args...)
}

// connect opens a phone connection and sends auth; the caller reads the
// answer.
func (d *daemon) connect(token string, extra map[string]any) *wstest.Client {
	d.t.Helper()
	c := wstest.Dial(d.t, wstest.PinnedDialer(d.info.Fingerprint), d.info.URL, nil)
	// A client of the test answers hook approvals, as the web client does.
	p := map[string]any{"token": token, "client_version": "1.0.0", "platform": "test", "capabilities": []string{"hook_approvals"}}
	for k, v := range extra {
		p[k] = v
	}
	c.Send(wire.TypeAuth, "auth", p)
	return c
}

// phone connects with the device token and returns after connection_ack.
func (d *daemon) phone(extra map[string]any) (*wstest.Client, wire.ConnectionAck) {
	d.t.Helper()
	c := d.connect(d.token, extra)
	var ack wire.ConnectionAck
	c.Expect(wire.TypeConnectionAck, &ack)
	return c, ack
}

func (d *daemon) startSession(c *wstest.Client, id, policy string) {
	d.t.Helper()
	c.Send(wire.TypeSessionStart, "start-"+id, map[string]any{
		"agent": "demo", "session_id": id, "working_directory": d.project, "resume": false, "policy": policy,
	})
}

// readySession starts a demo session and waits until it is ready.
func (d *daemon) readySession(c *wstest.Client, id, policy string) {
	d.t.Helper()
	d.startSession(c, id, policy)
	c.WaitFor(wire.TypeSessionReady, nil, forSession(id))
}

func forSession(id string) func(wire.Envelope) bool {
	return func(e wire.Envelope) bool {
		var p struct {
			SessionID string `json:"session_id"`
		}
		json.Unmarshal(e.Payload, &p)
		return p.SessionID == id
	}
}

// streamed collects the text of the stream chunks seen so far.
func streamed(c *wstest.Client) string {
	var b strings.Builder
	for _, e := range c.Seen {
		if e.Type == wire.TypeStreamChunk {
			var p wire.StreamChunk
			json.Unmarshal(e.Payload, &p)
			b.WriteString(p.Content)
		}
	}
	return b.String()
}

func TestChatStreamsFromASandboxedAgent(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "0b9a6c9e-4b8e-4f57-9d6a-2f1c5d7e8a90"
	d.startSession(c, id, "ask")
	// The first message goes before session_ready, as the ReCursor app does.
	c.Send(wire.TypeMessage, "msg-1", map[string]any{"session_id": id, "content": "hello from the phone", "role": "user"})

	var ready wire.SessionReady
	env := c.WaitFor(wire.TypeSessionReady, &ready, nil)
	if env.ID != "start-"+id || ready.SessionID != id || ready.Agent != "demo" || ready.WorkingDirectory != d.project || ready.Sandbox == nil {
		t.Fatalf("session_ready %s = %+v", env.ID, ready)
	}
	var done wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &done, forSession(id))
	chunks := 0
	for _, e := range c.Seen {
		if e.Type == wire.TypeStreamChunk {
			chunks++
		}
		if e.Seq == 0 && e.Type != wire.TypeConnectionAck {
			t.Errorf("%s without seq", e.Type)
		}
	}
	if chunks < 2 || !strings.Contains(streamed(c), "hello from the phone") || done.IsError || done.NumTurns != 1 {
		t.Fatalf("%d chunks %q, result %+v", chunks, streamed(c), done)
	}
	// Seqs only increase.
	var last int64
	for _, e := range c.Seen {
		if e.Seq != 0 {
			if e.Seq <= last {
				t.Fatalf("seq %d after %d", e.Seq, last)
			}
			last = e.Seq
		}
	}

	// The same message id again (a retry after a reconnect) is not run twice.
	c.Send(wire.TypeMessage, "msg-1", map[string]any{"session_id": id, "content": "hello from the phone"})
	c.Send(wire.TypeMessage, "msg-2", map[string]any{"session_id": id, "content": "second"})
	c.WaitFor(wire.TypeTurnComplete, &done, forSession(id))
	if n := strings.Count(streamed(c), "hello from the phone"); n != 1 || !strings.Contains(done.Result, "turn 2 of this conversation") {
		t.Fatalf("after a re-sent id: prompt answered %d times, result %q", n, done.Result)
	}
	_, ack := d.phone(nil)
	if len(ack.ActiveSessions) != 1 || ack.ActiveSessions[0].SessionID != id || ack.ActiveSessions[0].Status != "idle" {
		t.Fatalf("active_sessions = %+v", ack.ActiveSessions)
	}
}

func TestApproveAndRejectCommands(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "approvals"
	d.startSession(c, id, "ask")
	c.WaitFor(wire.TypeSessionReady, nil, nil)

	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: echo ran > marker.txt && echo done-ok"})
	var ar wire.ApprovalRequired
	arEnv := c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	if ar.Source != "agent_sdk" || ar.Tool != "Bash" || ar.RiskLevel != "high" || ar.ToolCallID == "" || !strings.Contains(string(ar.Params), "marker.txt") {
		t.Fatalf("approval_required = %+v", ar)
	}
	c.Send(wire.TypeApprovalResponse, "resp-x", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved", "modifications": nil})
	var tr wire.ToolResult
	trEnv := c.WaitFor(wire.TypeToolResult, &tr, nil)
	if !tr.Result.Success || !strings.Contains(tr.Result.Content, "done-ok") || tr.ToolCallID != ar.ToolCallID || trEnv.ID == arEnv.ID {
		t.Fatalf("tool_result %s = %+v (approval id %s)", trEnv.ID, tr, arEnv.ID)
	}
	if b, err := os.ReadFile(filepath.Join(d.project, "marker.txt")); err != nil || string(b) != "ran\n" {
		t.Fatalf("the approved command did not run: %q %v", b, err)
	}
	// Answering again is an error.
	c.Send(wire.TypeApprovalResponse, "again", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	var ep wire.ErrorPayload
	if c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == "again" }); ep.Code != wire.CodeToolError {
		t.Fatalf("second answer: %+v", ep)
	}
	// The turn may have ended before that error came (the first turn: any
	// turn_complete seen is its own).
	if !slices.ContainsFunc(c.Seen, func(e wire.Envelope) bool { return e.Type == wire.TypeTurnComplete }) {
		c.WaitFor(wire.TypeTurnComplete, nil, nil)
	}

	c.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "run: touch rejected.txt"})
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	c.Send(wire.TypeApprovalResponse, "", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "rejected", "reason": "not now"})
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	if tr.Result.Success || !strings.Contains(tr.Result.Content, "not now") {
		t.Fatalf("rejected tool_result = %+v", tr)
	}
	if _, err := os.Stat(filepath.Join(d.project, "rejected.txt")); !os.IsNotExist(err) {
		t.Fatal("the rejected command ran")
	}
	c.WaitFor(wire.TypeTurnComplete, nil, nil)

	// "modified" with instructions: the tool does not run, the agent is told.
	c.Send(wire.TypeMessage, "m3", map[string]any{"session_id": id, "content": "write: notes.txt\nfirst draft"})
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	if ar.Tool != "Write" || ar.RiskLevel != "medium" {
		t.Fatalf("write approval = %+v", ar)
	}
	c.Send(wire.TypeApprovalResponse, "", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "modified",
		"modifications": map[string]any{"content": "edited on the phone"}})
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	if b, _ := os.ReadFile(filepath.Join(d.project, "notes.txt")); string(b) != "edited on the phone" {
		t.Fatalf("modified write wrote %q", b)
	}
}

func TestReconnectReplaysWithoutGapOrDuplicate(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "replay"
	d.startSession(c, id, "auto_approve")
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "first"})
	c.WaitFor(wire.TypeTurnComplete, nil, nil)
	lastSeen := c.Seen[len(c.Seen)-1].Seq
	c.WS.Close()

	// Events happen while no phone is connected.
	other, _ := d.phone(nil)
	other.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "while you were away"})
	other.WaitFor(wire.TypeTurnComplete, nil, nil)
	// Every seq after lastSeen up to the last one the other phone saw.
	want := []int64{}
	for seq := lastSeen + 1; seq <= other.Seen[len(other.Seen)-1].Seq; seq++ {
		want = append(want, seq)
	}

	// With last_seq: exactly what came after it.
	c2, _ := d.phone(map[string]any{"last_seq": lastSeen})
	c2.WaitFor(wire.TypeTurnComplete, nil, nil)
	var got []int64
	for _, e := range c2.Seen {
		if e.Seq != 0 {
			got = append(got, e.Seq)
		}
	}
	if len(got) < len(want) || !equalPrefix(got, want) {
		t.Fatalf("replayed seqs %v, want %v", got, want)
	}
	if !strings.Contains(streamed(c2), "while you were away") || strings.Contains(streamed(c2), "first") {
		t.Fatalf("replayed text %q", streamed(c2))
	}
	c2.WS.Close()
	other.WS.Close()

	// Without last_seq (as the ReCursor app reconnects): nothing it was sent
	// already comes again.
	time.Sleep(100 * time.Millisecond)
	c3, _ := d.phone(nil)
	c3.Send(wire.TypeHeartbeatPing, "p", nil)
	c3.WaitFor(wire.TypeHeartbeatPong, nil, nil)
	for _, e := range c3.Seen {
		if e.Seq != 0 && e.Type != wire.TypeNotification {
			t.Fatalf("reconnect without last_seq replayed %s seq %d", e.Type, e.Seq)
		}
	}
}

func equalPrefix(got, want []int64) bool {
	for i := range want {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestNotificationsStayPendingUntilAcked(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "notes"
	d.startSession(c, id, "auto_approve")
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "hi"})
	var n wire.Notification
	env := c.WaitFor(wire.TypeNotification, &n, nil)
	if n.NotificationID == "" || n.NotificationType != "turn_complete" || n.Data == nil {
		t.Fatalf("notification = %+v", n)
	}
	c.WS.Close()
	// Not acknowledged: it comes again on reconnect, even without last_seq.
	c2, _ := d.phone(nil)
	var again wire.Notification
	redelivered := c2.WaitFor(wire.TypeNotification, &again, nil)
	if again.NotificationID != n.NotificationID {
		t.Fatalf("pending notification = %+v", again)
	}
	// A new delivery, not the old event again: no seq that would take the
	// log backwards.
	if redelivered.Seq != 0 || !redelivered.Redelivered {
		t.Fatalf("redelivered with seq %d, marked %v", redelivered.Seq, redelivered.Redelivered)
	}
	c2.Send(wire.TypeNotificationAck, "", map[string]any{"notification_ids": []string{n.NotificationID}})
	c2.Send(wire.TypeHeartbeatPing, "p", nil)
	c2.WaitFor(wire.TypeHeartbeatPong, nil, nil)
	c2.WS.Close()
	// Acknowledged: never again, not even with an old last_seq.
	c3, _ := d.phone(map[string]any{"last_seq": env.Seq - 1})
	c3.Send(wire.TypeHeartbeatPing, "p", nil)
	c3.WaitFor(wire.TypeHeartbeatPong, nil, nil)
	for _, e := range c3.Seen {
		if e.Type == wire.TypeNotification && e.Seq == env.Seq {
			t.Fatal("an acknowledged notification came back")
		}
	}
}

func TestRestartKeepsSessionsResumable(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "restart"
	d.startSession(c, id, "auto_approve")
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "before"})
	c.WaitFor(wire.TypeTurnComplete, nil, nil)
	last := c.Seen[len(c.Seen)-1].Seq

	// Stop the daemon and start another on the same data directory.
	d.stop()
	d.start()
	c2, ack := d.phone(map[string]any{"last_seq": last})
	if len(ack.ActiveSessions) != 1 || ack.ActiveSessions[0].Status != "idle" {
		t.Fatalf("after restart: %+v", ack.ActiveSessions)
	}
	c2.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "after"})
	var done wire.TurnComplete
	c2.WaitFor(wire.TypeTurnComplete, &done, nil)
	// The demo agent counts the turns of its conversation in its reply.
	if !strings.Contains(done.Result, "turn 2 of this conversation") {
		t.Fatalf("the conversation did not resume: %q", done.Result)
	}
}

func TestInterruptAndEnd(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "interrupt"
	d.startSession(c, id, "auto_approve")
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: sleep 30"})
	c.WaitFor(wire.TypeToolCall, nil, nil)
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	c.Send(wire.TypeInterrupt, "i", map[string]any{"session_id": id})
	var done wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &done, nil)
	if took := time.Since(start); took > time.Second || done.Subtype != "error_during_execution" {
		t.Fatalf("interrupt: %+v after %v", done, took)
	}
	c.Send(wire.TypeSessionEnd, "", map[string]any{"session_id": id, "reason": "user_request"})
	var end wire.SessionEnd
	c.WaitFor(wire.TypeSessionEnd, &end, nil)
	if end.Reason != "user_request" {
		t.Fatalf("session_end = %+v", end)
	}
	_, ack := d.phone(nil)
	if len(ack.ActiveSessions) != 0 {
		t.Fatalf("ended session still listed: %+v", ack.ActiveSessions)
	}
	c.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "anyone?"})
	var ep wire.ErrorPayload
	c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == "m2" })
	if ep.Code != wire.CodeSessionNotFound {
		t.Fatalf("message to an ended session: %+v", ep)
	}
}

func TestCrashedBridgeBecomesSessionError(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "crash"
	// The clock starts once the sandbox runs: what is measured is how fast
	// a crash is noticed, not how fast a sandbox starts on a busy machine.
	d.readySession(c, id, "auto_approve")
	start := time.Now()
	// The command kills the bridge process that runs it.
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: kill -9 $PPID"})
	var st wire.SessionStatus
	c.WaitFor(wire.TypeSessionStatus, &st, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), `"error"`) })
	var ep wire.ErrorPayload
	c.WaitFor(wire.TypeError, &ep, nil)
	if ep.Code != wire.CodeAgentError || !strings.Contains(ep.Message, "crashed") || time.Since(start) > 5*time.Second {
		t.Fatalf("crash reported as %+v after %v", ep, time.Since(start))
	}
	_, ack := d.phone(nil)
	if len(ack.ActiveSessions) != 0 {
		t.Fatalf("crashed session still live: %+v", ack.ActiveSessions)
	}
}

func TestSessionStartRefusals(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	outside := t.TempDir()
	link := filepath.Join(d.project, "escape")
	os.Symlink(outside, link)
	for name, p := range map[string]map[string]any{
		"outside the roots":  {"agent": "demo", "working_directory": outside},
		"symlink out":        {"agent": "demo", "working_directory": link},
		"dot-dot out":        {"agent": "demo", "working_directory": d.project + "/../../.."},
		"relative":           {"agent": "demo", "working_directory": "project"},
		"missing":            {"agent": "demo", "working_directory": filepath.Join(d.project, "nope")},
		"unknown agent":      {"agent": "gpt-9", "working_directory": d.project},
		"bad policy":         {"agent": "demo", "working_directory": d.project, "policy": "yolo"},
		"bad session id":     {"agent": "demo", "working_directory": d.project, "session_id": "../x"},
		"resume unknown":     {"agent": "demo", "working_directory": d.project, "session_id": "nope", "resume": true},
		"wrong type of path": {"agent": "demo", "working_directory": 7},
	} {
		c.Send(wire.TypeSessionStart, name, p)
		var ep wire.ErrorPayload
		c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == name })
		if ep.Message == "" {
			t.Errorf("%s: %+v", name, ep)
		}
	}
	for _, tt := range []struct{ typ, payload string }{
		{wire.TypeMessage, `{"session_id":5}`},
		{wire.TypeMessage, `{"session_id":"nope","content":"x"}`},
		{wire.TypeMessage, `{"content":"x"}`},
		{wire.TypeSessionEnd, `{"session_id":"nope"}`},
		{wire.TypeSessionEnd, `{"session_id":[]}`},
		{wire.TypeInterrupt, `{"session_id":"nope"}`},
		{wire.TypeInterrupt, `{}`},
		{wire.TypeApprovalResponse, `{"tool_call_id":"nope","decision":"approved"}`},
		{wire.TypeApprovalResponse, `{"tool_call_id":"x","decision":"maybe"}`},
		{wire.TypeApprovalResponse, `{"tool_call_id":"x","decision":"modified","modifications":null}`},
		{wire.TypeApprovalResponse, `{"tool_call_id":{}}`},
		{wire.TypeNotificationAck, `{"notification_ids":"x"}`},
		{wire.TypeNotificationAck, `{}`},
		{wire.TypeSessionStart, `{"resume":"yes"}`},
	} {
		c.SendRaw(`{"type":"` + tt.typ + `","id":"bad","payload":` + tt.payload + `}`)
		var ep wire.ErrorPayload
		c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == "bad" })
		if ep.Code == "" || ep.Code == wire.CodeBridgeError || !ep.Recoverable {
			t.Errorf("%s %s: %+v", tt.typ, tt.payload, ep)
		}
	}
}

// TestCommandKilledByTheMemoryLimitIsReportedSo: a command that outgrows
// the sandbox's memory limit is killed by the kernel; its tool result says
// out of memory, with the limit, where it used to say "exit code 137".
func TestCommandKilledByTheMemoryLimitIsReportedSo(t *testing.T) {
	t.Parallel()
	if caps := sandbox.Probe(); !caps.Cgroup.Available {
		t.Skipf("no cgroups here: %s", caps.Cgroup.Detail)
	}
	d := newDaemon(t, "--sandbox-memory-mb", "128")
	c, _ := d.phone(nil)
	const id = "oom"
	d.readySession(c, id, "auto_approve")
	// tail holds the endless line in memory.
	c.Send(wire.TypeMessage, "m", map[string]any{"session_id": id, "content": "run: head -c 1000000000 /dev/zero | tail -n 1 >/dev/null"})
	var res wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &res, forSession(id))
	if res.Result.Success || !res.Result.OutOfMemory || res.Result.MemoryLimitBytes != 128<<20 ||
		!strings.Contains(res.Result.Error, "Out of memory") || !strings.Contains(res.Result.Error, "128 MiB") {
		t.Fatalf("tool result = %+v", res.Result)
	}
	// The agent survives it.
	c.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
	c.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "still there?"})
	var tc wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &tc, forSession(id))
	if tc.IsError {
		t.Fatalf("the next turn: %+v", tc)
	}
}

// TestSessionConfigure: the demo agent takes settings while it runs; a
// session whose sandbox a restart stopped keeps them for its next start.
func TestSessionConfigure(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "cfg-demo"
	d.readySession(c, id, "ask")
	c.Send(wire.TypeSessionConfigure, "c1", map[string]any{"session_id": id, "model": "demo-large"})
	var got wire.SessionSettings
	c.WaitFor(wire.TypeSessionConfigResp, &got, func(e wire.Envelope) bool { return e.ID == "c1" })
	if got.Model != "demo-large" {
		t.Fatalf("session_configure_response = %+v", got)
	}
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "hi"})
	var info wire.AgentInfo
	c.WaitFor(wire.TypeAgentInfo, &info, forSession(id))
	if info.Model != "demo-large" || info.PermissionMode != "default" {
		t.Fatalf("agent_info = %+v", info)
	}
	c.WaitFor(wire.TypeTurnComplete, nil, forSession(id))

	d.stop()
	d.start()
	c, _ = d.phone(nil)
	c.Send(wire.TypeSessionConfigure, "c2", map[string]any{"session_id": id, "permission_mode": "plan"})
	c.WaitFor(wire.TypeSessionConfigResp, &got, func(e wire.Envelope) bool { return e.ID == "c2" })
	if got != (wire.SessionSettings{SessionID: id, Model: "demo-large", PermissionMode: "plan"}) {
		t.Fatalf("settings of a stopped session = %+v", got)
	}
	var ev wire.SessionSettings
	c.WaitFor(wire.TypeSessionSettings, &ev, func(e wire.Envelope) bool {
		var p wire.SessionSettings
		json.Unmarshal(e.Payload, &p)
		return p.PermissionMode == "plan"
	})
	c.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "hi again"})
	c.WaitFor(wire.TypeAgentInfo, &info, func(e wire.Envelope) bool {
		var p wire.AgentInfo
		json.Unmarshal(e.Payload, &p)
		return p.SessionID == id && p.PermissionMode == "plan"
	})
	if info.Model != "demo-large" {
		t.Fatalf("agent_info after the restart = %+v", info)
	}
}

// TestBypassPermissionsOnlyWhereAllowed: the mode in which an agent runs
// every tool without asking a phone is refused at a session's start unless
// the daemon allows it.
func TestBypassPermissionsOnlyWhereAllowed(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		var args []string
		if allow {
			args = append(args, "--allow-bypass-permissions")
		}
		d := newDaemon(t, args...)
		c, _ := d.phone(nil)
		c.Send(wire.TypeSessionStart, "start", map[string]any{"agent": "demo", "session_id": "bypass", "working_directory": d.project,
			"permission_mode": "bypassPermissions"})
		if !allow {
			var ep wire.ErrorPayload
			c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == "start" })
			if ep.Code != wire.CodeInvalidMessage || !strings.Contains(ep.Message, "--allow-bypass-permissions") {
				t.Fatalf("refused start: %+v", ep)
			}
			continue
		}
		var ready wire.SessionReady
		c.WaitFor(wire.TypeSessionReady, &ready, nil)
		if ready.PermissionMode != "bypassPermissions" {
			t.Fatalf("allowed start: %+v", ready)
		}
	}
}
