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
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/eventually"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
)

// needSeccomp skips a test on a machine without bubblewrap's seccomp.
func needSeccomp(t testing.TB) sandbox.Capabilities {
	t.Helper()
	caps := probeOnce()
	if !caps.Bwrap.Available || !caps.Seccomp.Available {
		t.Skipf("no bubblewrap with seccomp: %s; %s", caps.Bwrap.Detail, caps.Seccomp.Detail)
	}
	return caps
}

// hostSocket listens on a Unix socket at path, as a host service would,
// and counts the connections it accepts.
func hostSocket(t testing.TB, path string) *atomic.Int32 {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhost-service-answered"))
			c.Close()
		}
	}()
	return &n
}

// runApproved runs script through the demo agent's run: and returns the
// tool's output.
func runApproved(t testing.TB, sb *sandbox.Sandbox, script string) string {
	t.Helper()
	if err := sb.Query("run: "+script, "s", false); err != nil {
		t.Fatal(err)
	}
	req := permission(t, sb)
	if err := sb.AnswerPermission(req.RequestID, agent.PermissionDecision{Behavior: "allow"}); err != nil {
		t.Fatal(err)
	}
	out, _ := toolResult(t, until(t, sb, isEv(sandbox.EvDone)))
	return out
}

// fakeHome makes a home directory holding secrets and a tether data
// directory, for a sandbox whose environment names it as HOME.
type fakeHome struct {
	home, data, runtime string
}

func newFakeHome(t testing.TB) fakeHome {
	t.Helper()
	root := t.TempDir()
	h := fakeHome{home: filepath.Join(root, "home"), runtime: filepath.Join(root, "run-user")}
	h.data = filepath.Join(h.home, ".local", "share", "tether")
	files := map[string]string{
		".ssh/id_ed25519":               "ssh-private-key",
		".aws/credentials":              "aws-secret",
		".local/share/tether/token":     "data-dir-token",
		".local/share/tether/tether.db": "data-dir-db",
		"proj/README":                   "project file",
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
	if err := os.Mkdir(h.runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h fakeHome) spec(t testing.TB, workDir string) sandbox.Spec {
	spec := newSpec(t, "demo")
	spec.WorkDir = workDir
	spec.Hide = []string{h.data}
	// Subtests' temporary directories are too long for a socket path.
	sock, err := os.MkdirTemp("", "tsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sock) })
	spec.SocketDir = sock
	spec.Env = append(os.Environ(), "HOME="+h.home, "XDG_RUNTIME_DIR="+h.runtime)
	return spec
}

// TestSandboxCannotReachHostUnixSockets listens, as host services do, on a
// socket the sandbox sees (in its working directory) and on one in the
// runtime directory (where the session bus and agents live); neither is
// reached, by curl nor by a Go program, and the sandbox cannot make a Unix
// socket of its own either.
func TestSandboxCannotReachHostUnixSockets(t *testing.T) {
	t.Parallel()
	needSeccomp(t)
	h := newFakeHome(t)
	spec := h.spec(t, filepath.Join(h.home, "proj"))
	visible := filepath.Join(spec.WorkDir, "service.sock")
	bus := filepath.Join(h.runtime, "bus")
	visibleHits, busHits := hostSocket(t, visible), hostSocket(t, bus)
	sb := spawn(t, spec)
	exe := spec.Executable
	out := runApproved(t, sb, strings.Join([]string{
		"curl -sS --max-time 2 --unix-socket " + visible + " http://x/ || echo curl-visible=refused",
		"curl -sS --max-time 2 --unix-socket " + bus + " http://x/ || echo curl-bus=refused",
		exe + " dial-unix " + visible,
		exe + " dial-unix " + bus,
		exe + " listen-unix " + filepath.Join(spec.WorkDir, "own.sock"),
		"ls -A " + h.runtime + " | wc -l | sed 's/^/runtime-entries=/'",
		"ls -A /run | wc -l | sed 's/^/run-entries=/'",
	}, "; "))
	t.Logf("output:\n%s", out)
	for _, want := range []string{
		"curl-visible=refused", "curl-bus=refused", "runtime-entries=0", "run-entries=0",
		"dial unix " + visible + ": socket: permission denied",
		"dial unix " + bus + ": socket: permission denied",
		"listen unix " + filepath.Join(spec.WorkDir, "own.sock") + ": socket: permission denied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "host-service-answered") || strings.Contains(out, "connected") {
		t.Errorf("a host socket answered:\n%s", out)
	}
	if n := visibleHits.Load() + busHits.Load(); n != 0 {
		t.Errorf("host sockets accepted %d connections from the sandbox", n)
	}
}

// TestSandboxHidesSecretsAndTheDataDirectory reads, from a session in a
// project under a fake home, the home's ssh key and cloud credentials, the
// data directory and the host's /tmp; then from sessions whose working
// directory is the home itself, a link to the project, and the data
// directory's parent: the data directory stays empty.
func TestSandboxHidesSecretsAndTheDataDirectory(t *testing.T) {
	t.Parallel()
	if caps := probeOnce(); !caps.Bwrap.Available {
		t.Skipf("bubblewrap unavailable: %s", caps.Bwrap.Detail)
	}
	h := newFakeHome(t)
	hostTmp, err := os.CreateTemp("", "tether-host-tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	hostTmp.WriteString("host-tmp-content")
	hostTmp.Close()
	t.Cleanup(func() { os.Remove(hostTmp.Name()) })

	// A working directory reached through a link in the hidden home.
	if err := os.Symlink(filepath.Join(h.home, "proj"), filepath.Join(h.home, "link")); err != nil {
		t.Fatal(err)
	}
	read := func(paths ...string) string {
		var cmds []string
		for _, p := range paths {
			cmds = append(cmds, "cat "+p+" 2>&1")
		}
		return strings.Join(cmds, "; ")
	}
	tests := []struct {
		name    string
		workDir string
		script  string
		// secrets must not appear in the output; want must.
		secrets, want []string
	}{
		{
			name:    "project",
			workDir: filepath.Join(h.home, "proj"),
			script: read(filepath.Join(h.home, ".ssh/id_ed25519"), filepath.Join(h.home, ".aws/credentials"),
				filepath.Join(h.data, "token"), hostTmp.Name(), "README") + "; ls -A " + h.home + " | tr '\\n' ' '",
			secrets: []string{"ssh-private-key", "aws-secret", "data-dir-token", "host-tmp-content"},
			want:    []string{"project file", "No such file"},
		},
		{
			name:    "home",
			workDir: h.home,
			script:  read(filepath.Join(h.data, "token"), filepath.Join(h.data, "tether.db")) + "; ls -A " + h.data + " | wc -l | sed 's/^/data-entries=/'",
			secrets: []string{"data-dir-token", "data-dir-db"},
			want:    []string{"data-entries=0"},
		},
		{
			name:    "link",
			workDir: filepath.Join(h.home, "link"),
			script:  read("README", filepath.Join(h.home, ".ssh/id_ed25519")),
			secrets: []string{"ssh-private-key"},
			want:    []string{"project file"},
		},
		{
			name:    "parent of the data directory",
			workDir: filepath.Dir(h.data),
			script:  read(filepath.Join(h.data, "token")) + "; touch " + filepath.Join(h.data, "planted") + " && echo planted",
			secrets: []string{"data-dir-token"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := h.spec(t, tt.workDir)
			sb := spawn(t, spec)
			out := runApproved(t, sb, tt.script)
			t.Logf("output:\n%s", out)
			for _, s := range tt.secrets {
				if strings.Contains(out, s) {
					t.Errorf("the sandbox read %q", s)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if _, err := os.Stat(filepath.Join(h.data, "planted")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the sandbox wrote into the data directory: %v", err)
			}
		})
	}
}

// TestSandboxSeccompRefusals runs, inside a sandbox, the system calls the
// filter refuses, each by a Go program that reports the error.
func TestSandboxSeccompRefusals(t *testing.T) {
	t.Parallel()
	needSeccomp(t)
	spec := newSpec(t, "demo")
	sb := spawn(t, spec)
	out := runApproved(t, sb, spec.Executable+" syscalls")
	t.Logf("output:\n%s", out)
	for _, want := range []string{
		"socket(AF_UNIX): permission denied",
		"socket(AF_UNIX, SOCK_DGRAM): permission denied",
		"socket(AF_INET): ok",
		"socket(AF_NETLINK, NETLINK_ROUTE): ok",
		"socket(AF_NETLINK, NETLINK_SOCK_DIAG): permission denied",
		"socket(AF_VSOCK): permission denied",
		"socket(1<<32|AF_UNIX): permission denied",
		"socketpair(AF_UNIX): ok",
		"unshare(CLONE_NEWUSER): operation not permitted",
		"clone(CLONE_NEWUSER): operation not permitted",
		"keyctl: operation not permitted",
		"bpf: operation not permitted",
		"perf_event_open: operation not permitted",
		"userfaultfd: operation not permitted",
		"io_uring_setup: function not implemented",
		"clone3: function not implemented",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestCommandWritesOnlyWritable(t *testing.T) {
	t.Parallel()
	caps := probeOnce()
	rw, ro := t.TempDir(), t.TempDir()
	h := newFakeHome(t)
	spec := sandbox.CommandSpec{
		Dir: rw, Writable: []string{rw}, ReadOnly: []string{ro}, Hide: []string{h.data},
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + h.home}, Capabilities: &caps,
	}
	script := fmt.Sprintf("echo a > %s/ok; echo b > %s/no; echo c > %s/no; cat %s/.ssh/id_ed25519; echo done",
		rw, ro, h.home, h.home)
	cmd, isolated, err := sandbox.Command(context.Background(), spec, []string{"sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	if isolated != caps.Bwrap.Available {
		t.Errorf("isolated = %v with bwrap %v", isolated, caps.Bwrap.Available)
	}
	if !isolated {
		t.Skip("no bubblewrap: the command runs unconfined")
	}
	out, err := cmd.CombinedOutput()
	t.Logf("output: %s (%v)", out, err)
	if b, err := os.ReadFile(filepath.Join(rw, "ok")); err != nil || string(b) != "a\n" {
		t.Errorf("writable directory: %q, %v", b, err)
	}
	for _, p := range []string{filepath.Join(ro, "no"), filepath.Join(h.home, "no")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s written from the command (%v)", p, err)
		}
	}
	if !bytes.Contains(out, []byte("Read-only file system")) || bytes.Contains(out, []byte("ssh-private-key")) {
		t.Errorf("output %q: want a read-only refusal and no key", out)
	}
	if _, _, err := sandbox.Command(context.Background(), sandbox.CommandSpec{Dir: t.TempDir(), Writable: []string{rw}, Capabilities: &caps}, []string{"true"}); !errors.Is(err, sandbox.ErrBadSpec) {
		t.Errorf("a working directory outside the binds: %v, want ErrBadSpec", err)
	}
}

// TestCommandCancelKillsEverything starts a command that leaves sleeping
// children behind; cancelling its context ends them all within a second.
func TestCommandCancelKillsEverything(t *testing.T) {
	t.Parallel()
	for _, isolated := range []bool{true, false} {
		t.Run(fmt.Sprintf("isolated=%v", isolated), func(t *testing.T) {
			caps := probeOnce()
			if !isolated {
				caps = sandbox.Capabilities{Bwrap: sandbox.Layer{Detail: "pretend bwrap is missing"}}
			} else if !caps.Bwrap.Available {
				t.Skipf("bubblewrap unavailable: %s", caps.Bwrap.Detail)
			}
			dir := t.TempDir()
			marker := fmt.Sprintf("%d.%d", 3000+time.Now().UnixNano()%1000, time.Now().UnixNano()%97)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd, _, err := sandbox.Command(ctx, sandbox.CommandSpec{Dir: dir, Writable: []string{dir},
				Env: []string{"PATH=" + os.Getenv("PATH")}, Capabilities: &caps},
				[]string{"sh", "-c", "sleep " + marker + " & (sleep " + marker + " &) ; echo started; sleep " + marker})
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line := make([]byte, 8)
			if n, err := stdout.Read(line); err != nil || string(line[:n]) != "started\n" {
				t.Fatalf("read %q, %v", line[:n], err)
			}
			eventually.True(t, "3 sleepers start", func() bool { return sleepers(marker) >= 3 })
			start := time.Now()
			cancel()
			cmd.Wait()
			for sleepers(marker) > 0 {
				if time.Since(start) > time.Second {
					t.Fatalf("%d sleepers left a second after cancel", sleepers(marker))
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("all gone %v after cancel", time.Since(start))
		})
	}
}

// sleepers counts the processes running "sleep marker".
func sleepers(marker string) int {
	n := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, []byte("sleep\x00"+marker+"\x00")) {
			n++
		}
	}
	return n
}

func TestCommandSeesNoHostSocket(t *testing.T) {
	t.Parallel()
	caps := needSeccomp(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "service.sock")
	hits := hostSocket(t, sock)
	cmd, _, err := sandbox.Command(context.Background(), sandbox.CommandSpec{Dir: dir, ReadOnly: []string{dir},
		Env: []string{"PATH=" + os.Getenv("PATH")}, Capabilities: &caps},
		[]string{"curl", "-sS", "--max-time", "2", "--unix-socket", sock, "http://x/"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err == nil || hits.Load() != 0 || bytes.Contains(out, []byte("host-service-answered")) {
		t.Errorf("curl --unix-socket: %s, %v; %d connections", out, err, hits.Load())
	}
}

// BenchmarkCommand compares running `true` through Command with running it
// directly.
func BenchmarkCommand(b *testing.B) {
	caps := probeOnce()
	dir := b.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	b.Run("sandboxed", func(b *testing.B) {
		if !caps.Bwrap.Available {
			b.Skip("no bubblewrap")
		}
		for b.Loop() {
			cmd, _, err := sandbox.Command(context.Background(), sandbox.CommandSpec{Dir: dir, ReadOnly: []string{dir}, Env: env, Capabilities: &caps}, []string{"true"})
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("true")
			cmd.Dir, cmd.Env = dir, env
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
