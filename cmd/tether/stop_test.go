package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/store"
	"golang.org/x/sys/unix"
)

// TestAFailingServerStopsTheDaemonCleanly breaks the running daemon's
// listening socket from outside (a duplicate of it taken with
// pidfd_getfd, then shut down), so that its HTTP server fails: the
// daemon's other goroutines stop, it shuts down as on a signal, and it
// exits 1 saying why, its database whole.
func TestAFailingServerStopsTheDaemonCleanly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data := filepath.Join(t.TempDir(), "data")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "--listen", "127.0.0.1:0", "--tls", "off")
	cmd.Env = append(os.Environ(), isolated([]string{"TETHER_DATA=" + data, "HOME=" + root, "TETHER_ROOT=" + root})...)
	cmd.Env = append(cmd.Env, "TETHER_TEST_AS_TETHER=1")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // gone already when the test passes
		<-exited
	})
	var info runtimeInfo
	waitFor(t, 15*time.Second, "the daemon to start", func() bool {
		info, err = readRuntimeInfo(data)
		return err == nil && info.PID == cmd.Process.Pid
	})
	_, port, _ := strings.Cut(info.Listen, ":")

	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Skipf("skipped: pidfd_open: %v", err)
	}
	defer unix.Close(pidfd)
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	broken := false
	for _, e := range fds {
		target, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fd, err := unix.PidfdGetfd(pidfd, target, 0)
		if err != nil {
			continue // gone meanwhile, or not ours to take
		}
		listening, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		sa, _ := unix.Getsockname(fd)
		if in, ok := sa.(*unix.SockaddrInet4); ok && listening == 1 && strconv.Itoa(in.Port) == port {
			if err := unix.Shutdown(fd, unix.SHUT_RDWR); err != nil {
				t.Fatal(err)
			}
			broken = true
		}
		unix.Close(fd)
	}
	if !broken {
		t.Fatalf("no listening socket on port %s among the daemon's files", port)
	}

	select {
	case err := <-exited:
		exited <- err
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "tether serve: serving:") || !strings.Contains(stderr.String(), "shutting down") {
			t.Fatalf("the daemon exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon still runs 30 s after its server failed:\n%s", stderr.String())
	}
	st, err := store.Open(context.Background(), filepath.Join(data, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.QuickCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
}
