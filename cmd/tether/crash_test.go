package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	for start := time.Now(); time.Since(start) < 15*time.Second; time.Sleep(20 * time.Millisecond) {
		if info, err := readRuntimeInfo(dir); err == nil && info.PID == cmd.Process.Pid {
			return cmd, info
		}
	}
	t.Fatal("the daemon process did not start")
	return nil, runtimeInfo{}
}

// TestKillNineLosesNothingSent kills the daemon with SIGKILL in the middle of
// a session and checks that every event a phone had received is replayed
// after a restart, and that the session resumes instead of hanging as busy.
func TestKillNineLosesNothingSent(t *testing.T) {
	root := t.TempDir()
	project := filepath.Join(root, "project")
	os.MkdirAll(project, 0o755)
	env := []string{"TETHER_DATA=" + filepath.Join(t.TempDir(), "data"), "HOME=" + root, "TETHER_ROOT=" + root}
	cmd, info := startProcess(t, env)
	d := &daemon{t: t, env: env, info: info, project: project}
	_, out, _ := runCmd(t, env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	pc := d.connect(p.Token, nil)
	var ack wire.ConnectionAck
	pc.Expect(wire.TypeConnectionAck, &ack)
	d.token = ack.DeviceToken

	const id = "kill9"
	d.startSession(pc, id, "auto_approve")
	pc.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "first"})
	pc.WaitFor(wire.TypeTurnComplete, nil, nil)
	// The second turn is running (a long command) when the daemon dies.
	pc.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "run: sleep 30"})
	pc.WaitFor(wire.TypeToolCall, nil, nil)
	var seen []int64
	for _, e := range pc.Seen {
		if e.Seq != 0 {
			seen = append(seen, e.Seq)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	_, info = startProcess(t, env)
	d.info = info
	c, ack := d.phone(map[string]any{"last_seq": 0})
	if len(ack.ActiveSessions) != 1 || ack.ActiveSessions[0].Status != "idle" {
		t.Fatalf("after kill -9 the session is %+v, want idle (resumable)", ack.ActiveSessions)
	}
	c.Send(wire.TypeHeartbeatPing, "sync", nil)
	c.WaitFor(wire.TypeHeartbeatPong, nil, func(e wire.Envelope) bool { return e.ID == "sync" })
	replayed := map[int64]bool{}
	for _, e := range c.Seen {
		replayed[e.Seq] = true
	}
	for _, seq := range seen {
		if !replayed[seq] {
			t.Fatalf("event %d was sent before the kill and is lost", seq)
		}
	}
	c.Send(wire.TypeMessage, "m3", map[string]any{"session_id": id, "content": "after the crash"})
	var done wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &done, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), "after the crash") })
}
