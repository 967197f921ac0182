package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// supervise starts the bridge and waits for it on one locked OS thread: the
// thread joins the cgroup first (v1 has no clone-into-cgroup, and a child
// starts in its forking thread's cgroups), and must outlive the child
// because the parent-death signal is tied to the thread that forked. The
// goroutine never unlocks, so the thread ends with it.
func (s *Sandbox) supervise(newCmd func() (*exec.Cmd, error), started, waited chan<- error) {
	runtime.LockOSThread()
	if s.cg != nil {
		if err := s.cg.enterThread(); err != nil {
			s.dropCgroup(err)
		}
	}
	start := func() error {
		cmd, err := newCmd()
		if err != nil {
			return err
		}
		s.cmd = cmd
		return cmd.Start()
	}
	err := start()
	if err != nil && s.cg != nil && s.cmd != nil {
		// Clone into the cgroup may be refused (v2 without delegation):
		// start without it.
		s.dropCgroup(err)
		err = start()
	}
	if err != nil {
		started <- err
		return
	}
	if s.cg != nil {
		// The daemon's thread must not stay where the cgroup's OOM killer
		// could pick the daemon.
		if err := s.cg.leaveThread(); err != nil {
			// Kill fails only for a bridge already gone, and Wait reports
			// the kill: the error that matters is the one returned.
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
			started <- fmt.Errorf("leave cgroup: %w", err)
			return
		}
	}
	started <- nil
	waited <- s.cmd.Wait()
}

// dropCgroup gives up the cgroup layer for this sandbox, with a warning.
func (s *Sandbox) dropCgroup(why error) {
	s.warn("no cgroup limits", "reason", why)
	if err := s.cg.leaveThread(); err != nil {
		s.log.Warn("leave cgroup", "err", err)
	}
	if err := s.cg.destroy(); err != nil {
		s.log.Warn("remove cgroup", "err", err)
	}
	s.cg, s.Layers.Cgroup = nil, 0
}

// finish waits for the bridge's end, classifies it and removes what is left.
func (s *Sandbox) finish(waited <-chan error) {
	err := <-waited
	st := s.cmd.ProcessState
	x := Exit{Code: st.ExitCode(), Stderr: s.stderr.String()}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		x.Signal = ws.Signal()
	} else if s.Layers.Bwrap && x.Code > 128 && x.Code < 128+65 {
		// bwrap exits 128+n when its command died of signal n.
		x.Signal, x.Code = syscall.Signal(x.Code-128), -1
	}
	if s.cg != nil {
		x.OOMKills = s.cg.oomKills()
	}
	switch {
	case s.killReason.Load() != 0:
		x.Reason = ExitReason(s.killReason.Load())
	case x.Signal == syscall.SIGKILL && x.OOMKills > 0:
		x.Reason = ExitOOM
	case err != nil || x.Code != 0:
		x.Reason = ExitCrash
	}
	s.exit = x
	s.cleanup()
	s.log.Info("bridge ended", "reason", x.Reason, "code", x.Code, "signal", x.Signal)
	close(s.done)
}

// cleanup kills whatever is left in the cgroup and removes it and the socket
// directory.
func (s *Sandbox) cleanup() {
	// The bridge may end on its own during the handshake.
	s.connMu.Lock()
	conn := s.conn
	s.connMu.Unlock()
	if conn != nil {
		conn.Close()
	}
	if pid := s.Pid(); pid != 0 && !s.Layers.Bwrap {
		killSession(pid, exitGrace)
	}
	if s.pidFile != "" {
		if err := os.Remove(s.pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("remove pid file", "err", err)
		}
	}
	if s.proc != nil {
		s.proc.close()
	}
	if s.cg != nil {
		if err := s.cg.destroy(); err != nil {
			s.log.Warn("remove cgroup", "err", err)
		}
	}
	if err := os.RemoveAll(s.sockDir); err != nil {
		s.log.Warn("remove socket directory", "err", err)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// Write keeps the end of p and what came before it.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns what is kept.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// killSession sends SIGKILL to every process of session sid: without bwrap
// or a cgroup, the bridge's session (it starts one) is what holds its
// processes together, process groups of agent commands included. Each is
// held by a pidfd, opened before its session is read again, so that a pid
// reused meanwhile is not killed. With wait, it returns once they are all
// gone or wait has passed: a killed process lives on until it is next
// scheduled, which on a busy machine can be after the caller has reported
// the sandbox ended.
func killSession(sid int, wait time.Duration) {
	var dying []unix.PollFd
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == os.Getpid() || !inSession(pid, sid) {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			// Gone since the listing, or no pidfds on this kernel: the
			// pid, then, as before them.
			if !errors.Is(err, unix.ESRCH) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			continue
		}
		// One that exited since fails these, with nothing left to kill.
		if !inSession(pid, sid) || unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) != nil || wait <= 0 {
			_ = unix.Close(fd) // only signalled through: closing it has nothing to report
			continue
		}
		dying = append(dying, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	awaitExits(dying, wait)
}

// inSession reports whether process pid belongs to session sid.
func inSession(pid, sid int) bool {
	f, err := procStat(pid)
	// state ppid pgrp session …
	return err == nil && f[3] == strconv.Itoa(sid)
}

// awaitExits waits until every pidfd of fds reports its process's exit, or
// wait has passed, and closes them.
func awaitExits(fds []unix.PollFd, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for len(fds) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		alive := fds[:0]
		for _, p := range fds {
			if p.Revents != 0 {
				_ = unix.Close(int(p.Fd)) // only waited on: closing it has nothing to report
				continue
			}
			alive = append(alive, p)
		}
		fds = alive
	}
	for _, p := range fds {
		_ = unix.Close(int(p.Fd)) // only waited on: closing it has nothing to report
	}
}
