package sandbox

import (
	"bytes"
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
		killSession(pid)
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
// processes together, process groups of agent commands included.
func killSession(sid int) {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session …; comm may hold anything.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 4 || f[3] != strconv.Itoa(sid) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			// One that exited since the listing fails this, with
			// nothing left to kill.
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
