package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
)

// awaitDone fails unless sb ends within a minute (a bound for a hang, not
// a measure).
func awaitDone(t *testing.T, sb *sandbox.Sandbox) {
	t.Helper()
	select {
	case <-sb.Done():
	case <-time.After(time.Minute):
		t.Fatal("the sandbox did not end")
	}
}

// detachAndAdopt detaches sb, as a daemon that goes away does, and adopts
// its bridge at the mark of nothing committed, as the next daemon would.
func detachAndAdopt(t *testing.T, sb *sandbox.Sandbox, spec sandbox.Spec) *sandbox.Sandbox {
	t.Helper()
	sb.Detach()
	for range sb.Events() {
	}
	sb2, err := sandbox.Adopt(context.Background(), spec, sandbox.Mark{Generation: sb.Generation()})
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	return sb2
}

// A daemon that goes away mid-turn (Detach, as a killed one does) leaves
// the bridge running; the turn goes on and its events wait in the bridge;
// the next daemon adopts it by its socket and, having acknowledged what it
// committed, gets every later event once, numbered without a gap, up to
// the turn's end.
func TestAdoptResumesTheTurnAfterTheDaemon(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	if err := sb.Query("run: while [ ! -e go ]; do sleep 0.02; done; echo finished", "s1", true); err != nil {
		t.Fatal(err)
	}
	var seen int64
	var req *agent.PermissionRequest
	for _, ev := range until(t, sb, isEv(sandbox.EvPermissionRequest)) {
		if ev.Seq != seen+1 {
			t.Fatalf("event %s has seq %d after %d", ev.Ev, ev.Seq, seen)
		}
		seen = ev.Seq
		req = ev.Request
	}
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	// The command now waits for "go": the daemon goes, the command ends,
	// and the rest of the turn happens with no daemon to hear it.
	sb.Detach()
	for ev := range sb.Events() {
		seen = ev.Seq
	}
	if err := os.WriteFile(filepath.Join(spec.WorkDir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The adopting daemon committed all but the last event it saw.
	committed := seen - 1
	sb2, err := sandbox.Adopt(context.Background(), spec, sandbox.Mark{Generation: sb.Generation(), Seq: committed})
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	t.Cleanup(func() { sb2.Close() })
	rest := until(t, sb2, isEv(sandbox.EvDone))
	for _, ev := range rest {
		if ev.Seq != committed+1 {
			t.Fatalf("adopted: event %s has seq %d after %d", ev.Ev, ev.Seq, committed)
		}
		committed = ev.Seq
	}
	if res := lastResult(t, rest); res.Subtype != "success" || res.IsError {
		t.Errorf("result %+v, want success", res)
	}
	if err := sb2.Shutdown(); err != nil {
		t.Fatal(err)
	}
	awaitDone(t, sb2)
	if err := sb2.Err(); err != nil {
		t.Errorf("adopted sandbox's end: %v", err)
	}
	awaitDone(t, sb)
	assertGone(t, sb, spec)
}

// A bridge whose daemon never comes back ends itself, agent and all, after
// its OrphanTimeout.
func TestOrphanBridgeEndsItself(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, "demo")
	spec.OrphanTimeout = 100 * time.Millisecond
	sb := spawn(t, spec)
	sb.Detach()
	awaitDone(t, sb)
	if x := sb.Exit(); x.Reason != sandbox.ExitClean {
		t.Errorf("orphan's exit %+v, want clean", x)
	}
	assertGone(t, sb, spec)
}

// What the agent could leave in its own socket directory is not adopted: a
// link to another socket, or the directory opened to others.
func TestAdoptRefusesWhatIsNotTheDaemons(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	sb.Detach()
	dir := filepath.Join(spec.SocketDir, spec.ID)
	sock := filepath.Join(dir, "tether-"+spec.ID+".sock")
	decoy := filepath.Join(t.TempDir(), "decoy.sock")
	ln, err := net.Listen("unix", decoy)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Rename(sock, sock+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(decoy, sock); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.Adopt(context.Background(), spec, sandbox.Mark{}); !errors.Is(err, sandbox.ErrNotAdoptable) {
		t.Errorf("Adopt through a link = %v, want ErrNotAdoptable", err)
	}
	if err := os.Rename(sock+".real", sock); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.Adopt(context.Background(), spec, sandbox.Mark{}); !errors.Is(err, sandbox.ErrNotAdoptable) {
		t.Errorf("Adopt of a directory open to others = %v, want ErrNotAdoptable", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sb2, err := sandbox.Adopt(context.Background(), spec, sandbox.Mark{})
	if err != nil {
		t.Fatalf("Adopt once all is in order: %v", err)
	}
	sb2.Close()
	awaitDone(t, sb)
	assertGone(t, sb, spec)
}

// A bridge that has numbered fewer events than the daemon committed of it
// is not adopted: its next events could not be told from those committed.
func TestAdoptRefusesABridgeBehindTheMark(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	sb.Detach()
	for range sb.Events() {
	}
	_, err := sandbox.Adopt(context.Background(), spec, sandbox.Mark{Generation: sb.Generation(), Seq: 5})
	if !errors.Is(err, sandbox.ErrNotAdoptable) || !errors.Is(err, sandbox.ErrProtocol) {
		t.Fatalf("Adopt past the bridge's last event = %v, want ErrNotAdoptable and ErrProtocol", err)
	}
	sb2, err := sandbox.Adopt(context.Background(), spec, sandbox.Mark{Generation: sb.Generation()})
	if err != nil {
		t.Fatalf("Adopt at its mark: %v", err)
	}
	sb2.Close()
	awaitDone(t, sb)
}

// The agent cannot write its socket directory, which lies on the data disk
// (run/<id>), to fill the disk or to plant files where a restarted daemon
// looks: the sandbox does not see it, and what the agent writes at its
// path stays in the sandbox's own memory. On the host the directory holds
// the bridge's socket alone, which the daemon still adopts.
func TestAgentCannotWriteItsSocketDirectory(t *testing.T) {
	t.Parallel()
	needSeccomp(t)
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	dir := filepath.Join(spec.SocketDir, spec.ID)
	out := runApproved(t, sb, "echo entries=$(ls -A "+dir+" 2>/dev/null | wc -l); mkdir -p "+dir+
		" && head -c 1048576 /dev/zero > "+dir+"/filler && ln -s /etc "+dir+"/planted && echo written")
	if !strings.Contains(out, "entries=0") {
		t.Errorf("the sandbox sees its socket directory: %s", out)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != "tether-"+spec.ID+".sock" {
		t.Fatalf("socket directory on the host: %v, %v", entries, err)
	}
	sb2 := detachAndAdopt(t, sb, spec)
	sb2.Close()
	awaitDone(t, sb)
}

// An adopted sandbox keeps its egress: the bridge hands the proxy's
// listening socket to the daemon that adopts it, which serves the same
// allow-list (the detached daemon no longer does).
func TestAdoptedSandboxKeepsItsEgress(t *testing.T) {
	t.Parallel()
	needSeccomp(t)
	allowed, hits := loopbackService(t, "allowed")
	spec := newFakeHome(t).spec(t, t.TempDir())
	spec.Egress = []string{allowed}
	sb := spawn(t, spec)
	sb2 := detachAndAdopt(t, sb, spec)
	t.Cleanup(func() { sb2.Close() })
	if !sb2.Layers.Network || len(sb2.Layers.Egress) != 1 {
		t.Fatalf("adopted layers %+v, want its egress", sb2.Layers)
	}
	out := runApproved(t, sb2, "curl -s --max-time 5 http://"+allowed+"/; echo")
	if !strings.Contains(out, "allowed-answered") || hits.Load() != 1 {
		t.Fatalf("through the adopted proxy: %q, %d hits", out, hits.Load())
	}
	sb2.Close()
	awaitDone(t, sb)
}

// A bridge no daemon will adopt (its session ended meanwhile) is ended by
// the next daemon from its pid file: process tree, socket directory and
// cgroup.
func TestEndOrphanEndsALeftBridge(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	sb.Detach()
	if ids := sandbox.Adoptable(spec.SocketDir); len(ids) != 1 || ids[0] != spec.ID {
		t.Fatalf("adoptable %v, want %s", ids, spec.ID)
	}
	if err := sandbox.EndOrphan(spec.SocketDir, spec.ID, *spec.Capabilities); err != nil {
		t.Errorf("EndOrphan: %v", err)
	}
	awaitDone(t, sb)
	assertGone(t, sb, spec)
	if ids := sandbox.Adoptable(spec.SocketDir); len(ids) != 0 {
		t.Errorf("adoptable after EndOrphan: %v", ids)
	}
}

// A socket directory another user could change is not trusted: no pid file
// in it is read (EndOrphan kills nothing), none is adoptable, and no
// sandbox starts there. As in $TMPDIR/tether-UID made first by someone
// else, who planted a pid file naming one of the daemon user's processes.
func TestUntrustedSocketDirectory(t *testing.T) {
	t.Parallel()
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", victim.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))[19]
	for _, tt := range []struct {
		name  string
		spoil func(parent, dir string) error
		// ours: the directory stays the daemon user's, only opened up;
		// Spawn closes it again and starts.
		ours bool
	}{
		{"parent writable by others", func(parent, _ string) error { return os.Chmod(parent, 0o777) }, false},
		{"parent another user's", func(parent, _ string) error { return os.Chown(parent, 65534, 65534) }, false},
		{"directory another user's", func(_, dir string) error { return os.Chown(dir, 65534, 65534) }, false},
		{"directory open to others", func(_, dir string) error { return os.Chmod(dir, 0o755) }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Short, as a socket's path must be.
			base, err := os.MkdirTemp("", "tu")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			parent := filepath.Join(base, "p")
			dir := filepath.Join(parent, "h")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "t1.pid"), fmt.Appendf(nil, "%d %s\n", victim.Process.Pid, start), 0o600); err != nil {
				t.Fatal(err)
			}
			if ids := sandbox.Adoptable(dir); len(ids) != 1 {
				t.Fatalf("before: adoptable %v, want the planted one (the test's premise)", ids)
			}
			if err := tt.spoil(parent, dir); err != nil {
				t.Fatal(err)
			}
			if ids := sandbox.Adoptable(dir); len(ids) != 0 {
				t.Errorf("adoptable %v in an untrusted directory", ids)
			}
			if err := sandbox.EndOrphan(dir, "t1", probeOnce()); err == nil {
				t.Error("EndOrphan in an untrusted directory: no error")
			}
			if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
				t.Fatalf("the planted pid's process was killed: %v", err)
			}
			spec := newSpec(t, "demo")
			spec.SocketDir = dir
			sb, err := sandbox.Spawn(context.Background(), spec)
			switch {
			case tt.ours && err != nil:
				t.Errorf("Spawn in its own directory opened up: %v", err)
			case tt.ours:
				sb.Close()
				if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("Spawn left its socket directory %v (%v), want 0700", fi.Mode().Perm(), err)
				}
			case err == nil:
				sb.Close()
				t.Error("a sandbox started in an untrusted socket directory")
			case !strings.Contains(err.Error(), "socket directory"):
				t.Errorf("Spawn in an untrusted socket directory: %v, want the directory refused", err)
			}
		})
	}
}
