package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/eventually"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
)

var probeOnce = sync.OnceValue(sandbox.Probe)

// newSpec returns a spec for agent in fresh directories, run by this test
// binary.
func newSpec(t testing.TB, agentName string) sandbox.Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	caps := probeOnce()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	for _, d := range []string{work, filepath.Join(root, "sock")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return sandbox.Spec{
		ID:           fmt.Sprintf("t%d", time.Now().UnixNano()%1e12),
		Executable:   exe,
		Agent:        agentName,
		WorkDir:      work,
		SocketDir:    filepath.Join(root, "sock"),
		Capabilities: &caps,
		Env:          os.Environ(),
	}
}

func spawn(t testing.TB, spec sandbox.Spec) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.Spawn(context.Background(), spec)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	t.Cleanup(func() {
		sb.Close()
		assertGone(t, sb, spec)
	})
	return sb
}

// next returns the next event, failing after timeout.
func next(t testing.TB, sb *sandbox.Sandbox, timeout time.Duration) sandbox.Event {
	t.Helper()
	select {
	case ev, ok := <-sb.Events():
		if !ok {
			t.Fatalf("events closed; exit %+v", sb.Exit())
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("no event within %v", timeout)
	}
	return sandbox.Event{}
}

// until collects events up to and including the first that stop accepts.
func until(t testing.TB, sb *sandbox.Sandbox, stop func(sandbox.Event) bool) []sandbox.Event {
	t.Helper()
	var evs []sandbox.Event
	for {
		ev := next(t, sb, 10*time.Second)
		evs = append(evs, ev)
		if stop(ev) {
			return evs
		}
	}
}

func isEv(name string) func(sandbox.Event) bool {
	return func(ev sandbox.Event) bool { return ev.Ev == name }
}

// msg is the part of an agent message the tests look at.
type msg struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	IsError   bool   `json:"is_error"`
	NumTurns  int    `json:"num_turns"`
	Result    string `json:"result"`
	Event     struct {
		Type  string `json:"type"`
		Delta struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	} `json:"event"`
	Message struct {
		Content []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Content string `json:"content"`
			IsError bool   `json:"is_error"`
		} `json:"content"`
	} `json:"message"`
}

func messages(t testing.TB, evs []sandbox.Event) []msg {
	t.Helper()
	var out []msg
	for _, ev := range evs {
		if ev.Ev != sandbox.EvMessage {
			continue
		}
		var m msg
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("message %s: %v", ev.Data, err)
		}
		out = append(out, m)
	}
	return out
}

// toolResult returns the tool_result block of the turn's messages.
func toolResult(t testing.TB, evs []sandbox.Event) (content string, isError bool) {
	t.Helper()
	for _, m := range messages(t, evs) {
		for _, c := range m.Message.Content {
			if m.Type == "user" && c.Type == "tool_result" {
				return c.Content, c.IsError
			}
		}
	}
	t.Fatalf("no tool_result in %d events", len(evs))
	return "", false
}

func lastResult(t testing.TB, evs []sandbox.Event) msg {
	t.Helper()
	ms := messages(t, evs)
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Type == "result" {
			return ms[i]
		}
	}
	t.Fatalf("no result message in %d events", len(evs))
	return msg{}
}

// permission waits for the next permission_request.
func permission(t testing.TB, sb *sandbox.Sandbox) *agent.PermissionRequest {
	t.Helper()
	evs := until(t, sb, isEv(sandbox.EvPermissionRequest))
	return evs[len(evs)-1].Request
}

// assertGone checks that nothing of the sandbox is left: no process with its
// id in the environment, no socket directory, no cgroup directory.
func assertGone(t testing.TB, sb *sandbox.Sandbox, spec sandbox.Spec) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(spec.SocketDir, spec.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket directory left behind: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", sb.Pid())); err == nil {
		t.Errorf("process %d left behind", sb.Pid())
	}
	marker := []byte(sandbox.EnvSandboxID + "=" + spec.ID + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, marker) {
			t.Errorf("process %s of the sandbox left behind", filepath.Dir(p))
		}
	}
	for _, dir := range cgroupDirs(t, spec.ID) {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left behind: %v", dir, err)
		}
	}
}

// cgroupDirs returns where the sandbox's cgroups would be.
func cgroupDirs(t testing.TB, id string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch parts[1] {
		case "memory", "pids", "cpu":
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parts[1], parts[2], "tether-"+id))
		case "":
			if probeOnce().CgroupVersion == 2 {
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parts[2], "tether-"+id))
			}
		}
	}
	return dirs
}

func TestSpawnDemoTurnStreams(t *testing.T) {
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	if err := sb.Query("hello there", "s1", true); err != nil {
		t.Fatal(err)
	}
	evs := until(t, sb, isEv(sandbox.EvDone))
	done := evs[len(evs)-1]
	if done.SessionID != "s1" || done.AgentSessionID == "" {
		t.Errorf("done = %+v, want sessionId s1 and an agent session id", done)
	}
	ms := messages(t, evs)
	if ms[0].Type != "system" || ms[0].Subtype != "init" || ms[0].SessionID != done.AgentSessionID {
		t.Errorf("first message %+v, want system/init with session %s", ms[0], done.AgentSessionID)
	}
	var deltas []string
	for _, m := range ms {
		if m.Type == "stream_event" && m.Event.Type == "content_block_delta" && m.Event.Delta.Type == "text_delta" {
			deltas = append(deltas, m.Event.Delta.Text)
		}
	}
	if len(deltas) < 3 {
		t.Errorf("%d text deltas, want several", len(deltas))
	}
	if got := strings.Join(deltas, ""); !strings.Contains(got, `"hello there"`) {
		t.Errorf("streamed text %q does not quote the prompt", got)
	}
	res := lastResult(t, evs)
	if res.Subtype != "success" || res.IsError || res.NumTurns != 1 {
		t.Errorf("result %+v, want success in 1 turn", res)
	}

	// Without partial messages the deltas stay inside.
	if err := sb.Query("again", "s2", false); err != nil {
		t.Fatal(err)
	}
	for _, m := range messages(t, until(t, sb, isEv(sandbox.EvDone))) {
		if m.Type == "stream_event" {
			t.Fatalf("stream_event passed on without includePartialMessages")
		}
	}
	if err := sb.Shutdown(); err != nil {
		t.Fatal(err)
	}
	<-sb.Done()
	if err := sb.Err(); err != nil {
		t.Errorf("Err after shutdown = %v, want nil", err)
	}
	if x := sb.Exit(); x.Reason != sandbox.ExitClean {
		t.Errorf("exit %+v, want clean", x)
	}
}

func TestSpawnRunApprovedIsIsolated(t *testing.T) {
	spec := newSpec(t, "demo")
	caps := *spec.Capabilities
	if !caps.Bwrap.Available {
		t.Skipf("bubblewrap unavailable: %s", caps.Bwrap.Detail)
	}
	data := filepath.Join(filepath.Dir(spec.WorkDir), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.Hide = []string{data}
	spec.StateDir = filepath.Join(data, "state") // hidden with data, but bound back
	if err := os.Mkdir(spec.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A tool the agent needs, in a hidden directory, is bound back read-only.
	tools := filepath.Join(data, "tools")
	if err := os.Mkdir(tools, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "tool"), []byte("tool-visible"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.ReadOnly = []string{tools}
	spec.Env = append(os.Environ(), "TETHER_TEST_SECRET=leak1", "AWS_SECRET_ACCESS_KEY=leak2", "ANTHROPIC_API_KEY=leak3")
	sb := spawn(t, spec)
	script := strings.Join([]string{
		"echo ran > marker",
		"echo init=$(tr '\\0' ' ' < /proc/1/cmdline)",
		"echo ifaces=$(tail -n +3 /proc/net/dev | wc -l)",
		"echo procs=$(ls /proc | grep -c '^[0-9]')",
		"cat " + filepath.Join(data, "secret") + " 2>/dev/null || echo data=hidden",
		"echo nofile=$(ulimit -n)",
		"echo sockets=$(ls " + spec.SocketDir + " | wc -l)",
		"touch /usr/tether-test 2>/dev/null || echo root=readonly",
		"cat " + filepath.Join(data, "tools", "tool"),
		"touch " + filepath.Join(data, "tools", "new") + " 2>/dev/null || echo tools=readonly",
		"cat /proc/self/cgroup",
		"env",
	}, "; ")
	if err := sb.Query("run: "+script, "s", false); err != nil {
		t.Fatal(err)
	}
	req := permission(t, sb)
	if req.ToolName != "Bash" || !strings.Contains(string(req.Input), "echo ran") {
		t.Fatalf("permission request %+v, want Bash with the command", req)
	}
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	evs := until(t, sb, isEv(sandbox.EvDone))
	out, isErr := toolResult(t, evs)
	t.Logf("layers %+v; output:\n%s", sb.Layers, out)
	if isErr {
		t.Fatalf("tool_result is an error: %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(spec.WorkDir, "marker")); err != nil || string(b) != "ran\n" {
		t.Errorf("marker in the working directory: %q, %v", b, err)
	}
	want := []string{"bwrap --seccomp", "ifaces=1", "sockets=0", "data=hidden", "nofile=4096", "root=readonly", "PATH=",
		"tool-visible", "tools=readonly"}
	if sb.Layers.Cgroup != 0 {
		want = append(want, "tether-"+spec.ID)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	for _, leak := range []string{"leak1", "leak2", "leak3", "s3cret"} {
		if strings.Contains(out, leak) {
			t.Errorf("output shows %q:\n%s", leak, out)
		}
	}
	if procs := field(t, out, "procs="); procs > 10 {
		t.Errorf("%d processes visible: not a PID namespace of its own", procs)
	}
	res := lastResult(t, evs)
	if res.Subtype != "success" || res.NumTurns != 2 {
		t.Errorf("result %+v, want success in 2 turns", res)
	}
	if _, err := os.Stat(filepath.Join(spec.StateDir, "demo-"+res.SessionID+".json")); err != nil {
		t.Errorf("the agent's transcript is not in its state directory: %v", err)
	}
}

func field(t testing.TB, out, prefix string) int {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s%q: %v", prefix, v, err)
			}
			return n
		}
	}
	t.Fatalf("output lacks %s:\n%s", prefix, out)
	return 0
}

func TestSpawnRunDenied(t *testing.T) {
	tests := []struct {
		name, message, want string
	}{
		{"with reason", "not today", "not today"},
		{"without reason", "", "The user doesn't want to proceed with this tool use."},
	}
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := sb.Query("run: echo ran > marker", "s", false); err != nil {
				t.Fatal(err)
			}
			req := permission(t, sb)
			if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "deny", Message: tt.message}); err != nil {
				t.Fatal(err)
			}
			evs := until(t, sb, isEv(sandbox.EvDone))
			out, isErr := toolResult(t, evs)
			if !isErr || !strings.HasPrefix(out, tt.want) {
				t.Errorf("tool_result %q (error %v), want an error starting %q", out, isErr, tt.want)
			}
			if _, err := os.Stat(filepath.Join(spec.WorkDir, "marker")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("denied command ran: %v", err)
			}
		})
	}
}

func TestSpawnWriteHonoursUpdatedInput(t *testing.T) {
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	if err := sb.Query("write: sub/notes.txt\nfirst draft", "s", false); err != nil {
		t.Fatal(err)
	}
	req := permission(t, sb)
	var in map[string]string
	if err := json.Unmarshal(req.Input, &in); err != nil || req.ToolName != "Write" || in["file_path"] != "sub/notes.txt" || in["content"] != "first draft" {
		t.Fatalf("permission request %+v (%v), want Write of sub/notes.txt", req, err)
	}
	updated := json.RawMessage(`{"file_path":"sub/notes.txt","content":"edited on the phone"}`)
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow", UpdatedInput: updated}); err != nil {
		t.Fatal(err)
	}
	evs := until(t, sb, isEv(sandbox.EvDone))
	if out, isErr := toolResult(t, evs); isErr {
		t.Fatalf("tool_result error: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(spec.WorkDir, "sub", "notes.txt"))
	if err != nil || string(b) != "edited on the phone" {
		t.Errorf("file holds %q, %v; want the updated content", b, err)
	}
}

func TestSpawnInterruptAndBusy(t *testing.T) {
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	if err := sb.Query("run: echo started; exec sleep 60", "s1", false); err != nil {
		t.Fatal(err)
	}
	req := permission(t, sb)
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	// A second query while the first runs is refused, not queued.
	if err := sb.Query("hello", "s2", false); err != nil {
		t.Fatal(err)
	}
	ev := until(t, sb, isEv(sandbox.EvError))
	if busy := ev[len(ev)-1]; busy.Code != sandbox.CodeBusy || busy.SessionID != "s2" {
		t.Errorf("second query answered %+v, want error busy for s2", busy)
	}
	waitForProcess(t, spec.ID, "sleep")
	start := time.Now()
	if err := sb.Interrupt(); err != nil {
		t.Fatal(err)
	}
	evs := until(t, sb, isEv(sandbox.EvDone))
	if d := time.Since(start); d > time.Second {
		t.Errorf("interrupt took %v, want under a second", d)
	}
	if res := lastResult(t, evs); res.Subtype != "error_during_execution" || !res.IsError {
		t.Errorf("result %+v, want error_during_execution", res)
	}
	if n := countProcesses(spec.ID, "sleep"); n != 0 {
		t.Errorf("%d sleep processes still run after the interrupt", n)
	}
	// The bridge serves the next query.
	if err := sb.Query("after", "s3", false); err != nil {
		t.Fatal(err)
	}
	if res := lastResult(t, until(t, sb, isEv(sandbox.EvDone))); res.Subtype != "success" {
		t.Errorf("next result %+v, want success", res)
	}
}

// countProcesses counts the sandbox's processes named comm.
func countProcesses(id, comm string) int {
	marker := []byte(sandbox.EnvSandboxID + "=" + id + "\x00")
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		c, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		if env, err := os.ReadFile(filepath.Join(d, "environ")); err == nil && bytes.Contains(env, marker) {
			n++
		}
	}
	return n
}

func waitForProcess(t testing.TB, id, comm string) {
	t.Helper()
	eventually.True(t, "a "+comm+" process in sandbox "+id, func() bool { return countProcesses(id, comm) > 0 })
}

func TestSpawnResumeRemembersTurns(t *testing.T) {
	spec := newSpec(t, "demo")
	spec.StateDir = filepath.Join(filepath.Dir(spec.WorkDir), "state")
	if err := os.Mkdir(spec.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	sb := spawn(t, spec)
	if err := sb.Query("one", "s", false); err != nil {
		t.Fatal(err)
	}
	agentSession := until(t, sb, isEv(sandbox.EvDone))
	id := agentSession[len(agentSession)-1].AgentSessionID
	sb.Shutdown()
	<-sb.Done()

	spec2 := spec
	spec2.ID += "b"
	spec2.AgentSessionID = id
	sb2 := spawn(t, spec2)
	if err := sb2.Query("two", "s", false); err != nil {
		t.Fatal(err)
	}
	evs := until(t, sb2, isEv(sandbox.EvDone))
	res := lastResult(t, evs)
	if res.SessionID != id || !strings.Contains(res.Result, "turn 2 ") {
		t.Errorf("resumed result %+v, want session %s at turn 2", res, id)
	}
}

func TestSpawnFaults(t *testing.T) {
	tests := []struct {
		name   string
		agent  string
		limits sandbox.Limits
		needs  func(sandbox.Capabilities) string
		want   error
		reason sandbox.ExitReason
	}{
		{name: "crash", agent: "crash", want: sandbox.ErrCrashed, reason: sandbox.ExitCrash},
		{name: "hung", agent: "hang", want: sandbox.ErrHung, reason: sandbox.ExitHung},
		{
			name: "out of memory", agent: "hog", limits: sandbox.Limits{MemoryBytes: 96 << 20},
			needs: func(c sandbox.Capabilities) string {
				if !c.Cgroup.Available {
					return "no cgroups: " + c.Cgroup.Detail
				}
				return ""
			},
			want: sandbox.ErrOOM, reason: sandbox.ExitOOM,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := newSpec(t, tt.agent)
			if tt.needs != nil {
				if why := tt.needs(*spec.Capabilities); why != "" {
					t.Skip(why)
				}
			}
			spec.Limits = tt.limits
			if tt.reason == sandbox.ExitHung {
				spec.PingInterval, spec.PingTimeout = 100*time.Millisecond, 300*time.Millisecond
			}
			sb := spawn(t, spec)
			if err := sb.Query("go", "s", false); err != nil {
				t.Fatal(err)
			}
			select {
			case <-sb.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("sandbox did not end")
			}
			err := sb.Err()
			if !errors.Is(err, tt.want) {
				t.Fatalf("Err = %v, want %v", err, tt.want)
			}
			if x := sb.Exit(); x.Reason != tt.reason {
				t.Errorf("exit %+v, want reason %v", x, tt.reason)
			}
			assertGone(t, sb, spec)
		})
	}
}

// TestSpawnWithoutLayers runs a sandbox as on a machine with neither
// bubblewrap nor cgroups: it works, says what it lacks, sets RLIMIT_NPROC
// instead and still leaves nothing behind.
func TestSpawnWithoutLayers(t *testing.T) {
	spec := newSpec(t, "demo")
	spec.Capabilities = &sandbox.Capabilities{
		Bwrap:  sandbox.Layer{Detail: "pretend bwrap is missing"},
		Cgroup: sandbox.Layer{Detail: "pretend cgroups are missing"},
	}
	sb := spawn(t, spec)
	if sb.Layers.Bwrap || sb.Layers.Cgroup != 0 || !sb.Layers.Network || len(sb.Layers.Warnings) != 2 {
		t.Errorf("layers %+v, want none, with two warnings", sb.Layers)
	}
	if err := sb.Query("run: grep 'Max processes' /proc/self/limits", "s", false); err != nil {
		t.Fatal(err)
	}
	req := permission(t, sb)
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	if out, _ := toolResult(t, until(t, sb, isEv(sandbox.EvDone))); len(strings.Fields(out)) < 4 || strings.Fields(out)[2] != "512" {
		t.Errorf("RLIMIT_NPROC %q, want 512", out)
	}
	if err := sb.Query("run: sleep 60 & sleep 60", "s", false); err != nil {
		t.Fatal(err)
	}
	req = permission(t, sb)
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	waitForProcess(t, spec.ID, "sleep")
	sb.Close()
	if n := countProcesses(spec.ID, "sleep"); n != 0 {
		t.Errorf("%d sleep processes outlived Close", n)
	}
}

func TestSpawnBridgeFailsBeforeReady(t *testing.T) {
	spec := newSpec(t, "no-such-agent")
	start := time.Now()
	_, err := sandbox.Spawn(context.Background(), spec)
	if !errors.Is(err, sandbox.ErrNotReady) || !errors.Is(err, sandbox.ErrCrashed) || !strings.Contains(err.Error(), "unknown agent") {
		t.Fatalf("Spawn = %v, want not ready, crashed, naming the unknown agent", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("failure took %v to report", d)
	}
	if _, err := os.Stat(filepath.Join(spec.SocketDir, spec.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket directory left behind: %v", err)
	}
	for _, dir := range cgroupDirs(t, spec.ID) {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left behind", dir)
		}
	}
}

// TestSpawnCommandOOM runs a command that outgrows the memory limit: the
// kernel kills the command, not the agent, and the sandbox counts it.
func TestSpawnCommandOOM(t *testing.T) {
	spec := newSpec(t, "demo")
	if !spec.Capabilities.Cgroup.Available {
		t.Skipf("no cgroups: %s", spec.Capabilities.Cgroup.Detail)
	}
	spec.Limits = sandbox.Limits{MemoryBytes: 128 << 20}
	sb := spawn(t, spec)
	// tail holds the endless line in memory.
	if err := sb.Query("run: head -c 1000000000 /dev/zero | tail -n 1 >/dev/null", "s", false); err != nil {
		t.Fatal(err)
	}
	req := permission(t, sb)
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	if out, isErr := toolResult(t, until(t, sb, isEv(sandbox.EvDone))); !isErr || !strings.HasPrefix(out, "Exit code 137") {
		t.Errorf("tool_result %q, want exit code 137: the command was killed", out)
	}
	if n := sb.OOMKills(); n == 0 {
		t.Errorf("OOMKills = 0 after a command outgrew the limit")
	}
	if err := sb.Query("still there?", "s", false); err != nil {
		t.Fatal(err)
	}
	if res := lastResult(t, until(t, sb, isEv(sandbox.EvDone))); res.Subtype != "success" {
		t.Errorf("next turn %+v, want success: the agent should survive", res)
	}
}

func TestRemoveStaleCgroups(t *testing.T) {
	caps := probeOnce()
	if !caps.Cgroup.Available {
		t.Skipf("no cgroups: %s", caps.Cgroup.Detail)
	}
	live := spawn(t, newSpec(t, "demo"))
	staleID := fmt.Sprintf("stale%d", time.Now().UnixNano()%1e9)
	stale := cgroupDirs(t, staleID)
	long := time.Now().Add(-time.Hour)
	for _, dir := range stale {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dir, long, long); err != nil {
			t.Fatal(err)
		}
	}
	// An empty cgroup made this moment is a sandbox about to join it.
	fresh := cgroupDirs(t, fmt.Sprintf("fresh%d", time.Now().UnixNano()%1e9))
	for _, dir := range fresh {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(dir) })
	}
	n, err := sandbox.RemoveStaleCgroups(caps)
	if err != nil || n < len(stale) {
		t.Fatalf("RemoveStaleCgroups = %d, %v; want at least %d", n, err, len(stale))
	}
	for _, dir := range stale {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale cgroup %s still there", dir)
		}
	}
	for _, dir := range cgroupDirs(t, live.ID) {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("live sandbox's cgroup %s: %v", dir, err)
		}
	}
	for _, dir := range fresh {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("a cgroup made this moment was removed: %s: %v", dir, err)
		}
	}
}

// TestSpawnHugeMessagesAreCutOrRefused: an agent in a real sandbox emits a
// message with a 3 MB string, one of 2 MB that cannot be cut, and asks to
// write 2 MB. The first reaches the daemon cut below MaxMessage and
// marked, the second becomes an agent error, the question is denied
// without reaching the daemon, and the sandbox goes on.
func TestSpawnHugeMessagesAreCutOrRefused(t *testing.T) {
	sb := spawn(t, newSpec(t, "huge"))
	if err := sb.Query("go", "s", false); err != nil {
		t.Fatal(err)
	}
	evs := until(t, sb, isEv(sandbox.EvDone))
	var cut, refused bool
	for _, ev := range evs {
		switch ev.Ev {
		case sandbox.EvMessage:
			if len(ev.Data) > sandbox.MaxMessage {
				t.Errorf("a message of %d bytes passed", len(ev.Data))
			}
			cut = cut || strings.Contains(string(ev.Data), "tether cut")
		case sandbox.EvError:
			refused = refused || ev.Code == sandbox.CodeAgent && strings.Contains(ev.Error, "cannot be cut")
		case sandbox.EvPermissionRequest:
			t.Errorf("a question with a 2 MB input reached the daemon")
		}
	}
	res := lastResult(t, evs)
	if !cut || !refused || !strings.HasPrefix(res.Result, "deny: ") || !strings.Contains(res.Result, "1 MiB") {
		t.Fatalf("cut %v, refused %v, answer %q", cut, refused, res.Result)
	}
	if err := sb.Query("go", "s", false); err != nil {
		t.Fatalf("after huge messages: %v", err)
	}
	until(t, sb, isEv(sandbox.EvDone))
}

// TestSpawnOversizeLineIsASessionError: a line over DefaultMaxLine written
// to the daemon's socket from inside a real sandbox is dropped and becomes
// an agent error of the session; the daemon reads on, and the turn ends.
func TestSpawnOversizeLineIsASessionError(t *testing.T) {
	sb := spawn(t, newSpec(t, "oversize"))
	if err := sb.Query("go", "s", false); err != nil {
		t.Fatal(err)
	}
	evs := until(t, sb, isEv(sandbox.EvDone))
	var reported bool
	for _, ev := range evs {
		reported = reported || ev.Ev == sandbox.EvError && ev.Code == sandbox.CodeAgent && containsAll(ev.Error, "could not read", "line too long")
	}
	if res := lastResult(t, evs); !reported || res.Result != "after the long line" {
		t.Fatalf("reported %v, result %q", reported, res.Result)
	}
}

// containsAll reports whether text holds every one of words.
func containsAll(text string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

// TestSpawnBwrapWithoutCgroupLeavesNothing: with bubblewrap but no cgroup
// to kill what is left, closing a sandbox mid-command still ends the
// agent's processes (found below bwrap while it is alive).
func TestSpawnBwrapWithoutCgroupLeavesNothing(t *testing.T) {
	t.Parallel()
	caps := probeOnce()
	if !caps.Bwrap.Available {
		t.Skip("no bubblewrap here")
	}
	caps.Cgroup = sandbox.Layer{Detail: "pretend cgroups are missing"}
	spec := newSpec(t, "demo")
	spec.Capabilities = &caps
	sb := spawn(t, spec)
	if !sb.Layers.Bwrap || sb.Layers.Cgroup != 0 {
		t.Fatalf("layers %+v, want bwrap without a cgroup", sb.Layers)
	}
	if err := sb.Query("run: sleep 60 & sleep 60", "s", false); err != nil {
		t.Fatal(err)
	}
	req := permission(t, sb)
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	waitForProcess(t, spec.ID, "sleep")
	sb.Close()
	eventually.True(t, "the agent's processes end after Close", func() bool { return countProcesses(spec.ID, "sleep") == 0 })
}
