package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// Spawn starts a sandboxed bridge for spec and waits until it is ready; ctx
// bounds only the start. The sandbox lives until it exits or Close.
func Spawn(ctx context.Context, spec Spec) (*Sandbox, error) {
	if err := spec.fill(); err != nil {
		return nil, err
	}
	s := newSandbox(spec.ID, spec.Logger)
	s.sockDir = filepath.Join(spec.SocketDir, spec.ID)
	if err := os.MkdirAll(spec.SocketDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: socket directory: %w", err)
	}
	// One of the daemon user's made more open (by hand, or before it was
	// made 0700) is closed again; another user's is refused below.
	if fi, err := os.Lstat(spec.SocketDir); err == nil && fi.IsDir() && fi.Mode().Perm()&0o077 != 0 && ownedByUs(fi) {
		if err := os.Chmod(spec.SocketDir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: socket directory: %w", err)
		}
	}
	if err := checkSocketDir(spec.SocketDir); err != nil {
		return nil, err
	}
	// A bridge an earlier daemon left with this id, and not adopted, ends;
	// a directory left by a daemon that died with its sandbox is stale.
	if err := EndOrphan(spec.SocketDir, spec.ID, *spec.Capabilities); err != nil {
		s.log.Warn("removing the cgroup of the bridge an earlier daemon left", "err", err)
	}
	if err := os.RemoveAll(s.sockDir); err != nil {
		return nil, fmt.Errorf("sandbox: socket directory: %w", err)
	}
	if err := os.Mkdir(s.sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: socket directory: %w", err)
	}
	sock := filepath.Join(s.sockDir, "tether-"+spec.ID+".sock")
	caps := *spec.Capabilities
	if add := agentBinds[spec.Agent]; add != nil && caps.Bwrap.Available {
		binds, err := add(envValue(spec.Env, "HOME"), spec.WorkDir, spec.StateDir, spec.AgentSessionID)
		if err != nil {
			s.cleanup()
			return nil, err
		}
		spec.Binds = append(slices.Clone(spec.Binds), binds...)
	}
	s.cg = s.makeCgroup(caps, spec)
	if s.cg != nil {
		s.memLimit = spec.Limits.MemoryBytes
	}
	s.Layers.Network = true
	if caps.Bwrap.Available {
		s.Layers.Bwrap, s.Layers.Network, s.Layers.Egress = true, len(spec.Egress) > 0, slices.Clone(spec.Egress)
	} else {
		s.warn("no filesystem, PID or network isolation: the agent reaches the host's whole network", "reason", caps.Bwrap.Detail)
	}
	notifyR, notifyW, err := os.Pipe()
	if err != nil {
		s.cleanup()
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	defer notifyR.Close()
	listener, err := listenFile(sock)
	if err != nil {
		notifyW.Close()
		s.cleanup()
		return nil, err
	}
	s.Layers.Seccomp = s.Layers.Bwrap && caps.Seccomp.Available
	if s.Layers.Bwrap && !s.Layers.Seccomp {
		s.warn("no seccomp filter: host Unix sockets are reachable where visible", "reason", caps.Seccomp.Detail)
	}
	inherited := []*os.File{notifyW, listener}
	var egressConn *net.UnixConn
	if s.Layers.Bwrap && len(spec.Egress) > 0 {
		var child *os.File
		if egressConn, child, err = egressPair(); err != nil {
			notifyW.Close()
			listener.Close()
			s.cleanup()
			return nil, err
		}
		inherited = append(inherited, child)
	}
	newCmd := func() (*exec.Cmd, error) {
		s.Layers.Rlimits = spec.Limits.rlimits(s.cg != nil)
		files := slices.Clone(inherited)
		if s.Layers.Seccomp {
			f, err := seccompFile()
			if err != nil {
				return nil, err
			}
			inherited = append(inherited, f)
			files = append(files, f)
		}
		cmd := s.command(caps, spec, sock, egressConn != nil, len(files)+2)
		cmd.ExtraFiles = files
		return cmd, nil
	}
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go s.supervise(newCmd, started, waited)
	err = <-started
	for _, f := range inherited {
		f.Close()
	}
	if err != nil {
		s.cleanup()
		return nil, fmt.Errorf("sandbox: start bridge: %w", err)
	}
	s.pidFile = pidFilePath(spec.SocketDir, spec.ID)
	if s.gen, err = writePidFile(s.pidFile, s.cmd.Process.Pid); err != nil {
		s.log.Warn("recording the bridge's pid: a later daemon cannot adopt it", "err", err)
	}
	go s.finish(waited)
	if egressConn != nil {
		go s.serveEgress(egressConn, spec)
	}
	if err := s.handshake(ctx, notifyR, sock, spec.ReadyTimeout); err != nil {
		_ = s.Close() // it always returns nil; s.Err says how the bridge ended
		if xe := s.Err(); xe != nil {
			return nil, fmt.Errorf("%w: %w", err, xe)
		}
		return nil, err
	}
	go s.read()
	go s.watch(spec.PingInterval, spec.PingTimeout)
	go s.acks()
	return s, nil
}

func (s *Sandbox) warn(msg string, args ...any) {
	s.log.Warn(msg, args...)
	s.Layers.Warnings = append(s.Layers.Warnings, fmt.Sprint(append([]any{msg, " "}, args...)...))
}

func (s *Sandbox) makeCgroup(caps Capabilities, spec Spec) cgroup {
	if !caps.Cgroup.Available {
		s.warn("no cgroup limits", "reason", caps.Cgroup.Detail)
		return nil
	}
	cg, err := newCgroup(caps.CgroupVersion, "tether-"+spec.ID, spec.Limits)
	if err != nil {
		s.warn("no cgroup limits", "reason", err)
		return nil
	}
	s.Layers.Cgroup = caps.CgroupVersion
	return cg
}

// listenFile creates the bridge's listening socket at path and returns it
// as a file for the bridge to inherit: inside the sandbox, seccomp forbids
// creating Unix sockets, the bridge's own included.
func listenFile(path string) (*os.File, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("sandbox: listen: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	if err := os.Chmod(path, socketFileMode); err != nil {
		return nil, fmt.Errorf("sandbox: socket mode: %w", err)
	}
	f, err := ln.File()
	if err != nil {
		return nil, fmt.Errorf("sandbox: listen: %w", err)
	}
	return f, nil
}

func (s *Sandbox) handshake(ctx context.Context, notify *os.File, sock string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	if err := notify.SetReadDeadline(deadline); err != nil {
		// Without it the wait for the bridge would have no end.
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	// The pipe takes deadlines (above): this one fails only once it is
	// closed, and then the read below fails too.
	stop := context.AfterFunc(ctx, func() { _ = notify.SetReadDeadline(time.Now()) })
	defer stop()
	var b [1]byte
	if _, err := notify.Read(b[:]); err != nil {
		if errors.Is(err, io.EOF) {
			<-s.done
			return fmt.Errorf("%w: bridge exited before listening", ErrNotReady)
		}
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("%w: dial: %w", ErrNotReady, err)
	}
	s.connMu.Lock()
	s.conn, s.enc = conn, NewEncoder(conn)
	s.connMu.Unlock()
	conn.SetReadDeadline(deadline)
	dec := NewDecoder(conn, 0)
	ev, err := dec.DecodeEvent()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	if ev.Ev != EvReady {
		return fmt.Errorf("%w: first event %q", ErrNotReady, ev.Ev)
	}
	conn.SetReadDeadline(time.Time{})
	s.dec = dec
	return nil
}
