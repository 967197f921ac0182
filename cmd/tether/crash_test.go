package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tetherdev/tether/internal/eventually"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// startProcess runs the daemon as a process of its own (this test binary
// standing in for tether), so that it can be killed with SIGKILL.
func startProcess(t *testing.T, env []string) (*exec.Cmd, runtimeInfo) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := envMap(env)["TETHER_DATA"]
	os.Remove(filepath.Join(dir, runtimeFile))
	cmd := exec.Command(exe, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(append(os.Environ(), isolated(env)...), "TETHER_TEST_AS_TETHER=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var info runtimeInfo
	eventually.True(t, "the daemon process starts", func() bool {
		i, err := readRuntimeInfo(dir)
		info = i
		return err == nil && i.PID == cmd.Process.Pid
	})
	return cmd, info
}

// TestKillNineLosesNothingSent kills the daemon with SIGKILL in the middle of
// a turn: the sandbox outlives it, the turn goes on (its command ends while
// no daemon runs) and the next daemon adopts the sandbox. A phone that
// comes back with its last seq gets the rest of the turn, each event once,
// in order, up to turn_complete; one that comes back from the start gets
// every event it had seen before the kill too.
func TestKillNineLosesNothingSent(t *testing.T) {
	restartMidTurn(t, syscall.SIGKILL)
}

// TestStopKeepsARunningTurn: with --keep-running-turns (the service's), a
// stop (SIGTERM, as systemctl restart sends) leaves the running turn's
// sandbox to the next daemon, as a crash does.
func TestStopKeepsARunningTurn(t *testing.T) {
	restartMidTurn(t, syscall.SIGTERM, "TETHER_KEEP_RUNNING_TURNS=true")
}

// restartMidTurn ends the daemon with sig while a turn runs, lets the turn
// end with no daemon, starts the daemon again and checks what the phones
// see.
func restartMidTurn(t *testing.T, sig syscall.Signal, extraEnv ...string) {
	cmd, d, pc := pairedProcess(t, extraEnv...)

	const id = "kill9"
	d.startSession(pc, id, "auto_approve")
	pc.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "first"})
	pc.WaitFor(wire.TypeTurnComplete, nil, nil)
	// The second turn is running a command, which waits for "go", when
	// the daemon dies.
	pc.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "run: while [ ! -e go ]; do sleep 0.02; done; echo went"})
	var call wire.ToolCall
	pc.WaitFor(wire.TypeToolCall, &call, forSession(id))
	var seen []int64
	for _, e := range pc.Seen {
		if e.Seq != 0 {
			seen = append(seen, e.Seq)
		}
	}
	last := seen[len(seen)-1]
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The command ends, and the turn with it, while no daemon runs.
	if err := os.WriteFile(filepath.Join(d.project, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	cmd, d.info = startProcess(t, d.env)
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	c, ack := d.phone(map[string]any{"last_seq": last})
	if len(ack.ActiveSessions) != 1 || ack.ActiveSessions[0].SessionID != id {
		t.Fatalf("after %v the sessions are %+v, want %s", sig, ack.ActiveSessions, id)
	}
	var done wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &done, forSession(id))
	if done.IsError {
		t.Errorf("the adopted turn ended in error: %+v", done)
	}
	prev := last
	counts := map[string]int{}
	for _, e := range c.Seen {
		if e.Seq == 0 {
			continue
		}
		if e.Seq <= prev {
			t.Fatalf("event %d (%s) after %d: out of order or repeated", e.Seq, e.Type, prev)
		}
		prev = e.Seq
		if forSession(id)(e) {
			counts[e.Type]++
		}
	}
	if counts[wire.TypeToolResult] != 1 || counts[wire.TypeTurnComplete] != 1 || counts[wire.TypeToolCall] != 0 {
		t.Errorf("after the kill the phone got %v: want the tool's result and the turn's end once, and not the call again", counts)
	}
	var result wire.ToolResult
	for _, e := range c.Seen {
		if e.Type == wire.TypeToolResult {
			wstest.Decode(t, e, &result)
		}
	}
	if result.ToolCallID != call.ToolCallID || !strings.Contains(string(mustJSON(t, result.Result)), "went") {
		t.Errorf("tool result %+v, want the output of call %s", result, call.ToolCallID)
	}

	// From the start, the log holds everything seen before the kill.
	c2, _ := d.phone(map[string]any{"last_seq": 0})
	c2.Send(wire.TypeHeartbeatPing, "sync", nil)
	c2.WaitFor(wire.TypeHeartbeatPong, nil, func(e wire.Envelope) bool { return e.ID == "sync" })
	replayed := map[int64]bool{}
	for _, e := range c2.Seen {
		replayed[e.Seq] = true
	}
	for _, seq := range seen {
		if !replayed[seq] {
			t.Fatalf("event %d was sent before the kill and is lost", seq)
		}
	}
	// The session goes on as any other.
	c.Send(wire.TypeMessage, "m3", map[string]any{"session_id": id, "content": "after the crash"})
	c.WaitFor(wire.TypeTurnComplete, &done, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), "after the crash") })
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKillNineKeepsTheQuestion kills the daemon while the agent waits for a
// phone's answer: after the restart the question is still pending (not
// cancelled, not asked twice), and the answer reaches the agent, whose
// turn then ends.
func TestKillNineKeepsTheQuestion(t *testing.T) {
	cmd, d, pc := pairedProcess(t)

	const id = "kill9q"
	d.startSession(pc, id, "ask")
	pc.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: echo answered"})
	var asked wire.ApprovalRequired
	pc.WaitFor(wire.TypeApprovalRequired, &asked, forSession(id))
	last := pc.Seen[len(pc.Seen)-1].Seq
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	cmd, d.info = startProcess(t, d.env)
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	c, ack := d.phone(map[string]any{"last_seq": last})
	if len(ack.PendingApprovals) != 1 || !strings.Contains(string(ack.PendingApprovals[0]), asked.ToolCallID) {
		t.Fatalf("after kill -9 the pending approvals are %s, want %s", ack.PendingApprovals, asked.ToolCallID)
	}
	c.Send(wire.TypeApprovalResponse, "yes", map[string]any{"session_id": id, "tool_call_id": asked.ToolCallID, "decision": "approved"})
	var result wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &result, forSession(id))
	if !strings.Contains(string(mustJSON(t, result.Result)), "answered") {
		t.Errorf("tool result %+v, want the command's output", result)
	}
	c.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
	for _, e := range c.Seen {
		if e.Type == wire.TypeApprovalRequired || e.Type == wire.TypeApprovalCancelled {
			t.Errorf("after the restart the phone got %s %s: the question was asked once and is answered", e.Type, e.Payload)
		}
	}
}

// pairedProcess starts a daemon process (one that can be killed) on a fresh
// data directory, with extraEnv, and a phone paired with it.
func pairedProcess(t *testing.T, extraEnv ...string) (*exec.Cmd, *daemon, *wstest.Client) {
	t.Helper()
	root := t.TempDir()
	project := filepath.Join(root, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append([]string{"TETHER_DATA=" + filepath.Join(t.TempDir(), "data"), "HOME=" + root, "TETHER_ROOT=" + root}, extraEnv...)
	cmd, info := startProcess(t, env)
	d := &daemon{t: t, env: env, info: info, project: project}
	_, out, _ := runCmd(t, env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	pc := d.connect(p.Token, nil)
	var ack wire.ConnectionAck
	pc.Expect(wire.TypeConnectionAck, &ack)
	d.token = ack.DeviceToken
	return cmd, d, pc
}
