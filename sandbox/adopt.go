package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/tetherdev/tether/internal/peercred"
	"golang.org/x/sys/unix"
)

// ErrNotAdoptable is a sandbox [Adopt] cannot take over: no bridge of that
// id runs, or what is there is not certainly the daemon's own.
var ErrNotAdoptable = errors.New("sandbox: not adoptable")

// SocketDirFor is the socket directory of the daemon whose data directory
// is dataDir: dataDir/run, stable across restarts so that a new daemon
// finds the bridges an earlier one left, or, where that path is too long
// for the sockets below it, a directory of the data directory's own under
// $TMPDIR/tether-UID.
func SocketDirFor(dataDir string) string {
	dir := filepath.Join(dataDir, "run")
	// <dir>/<id>/tether-<id>.sock with the 13 bytes of a session's id.
	if len(dir)+40 <= maxSocketPath {
		return dir
	}
	h := sha256.Sum256([]byte(dataDir))
	return filepath.Join(defaultSocketDir(), hex.EncodeToString(h[:6]))
}

// checkSocketDir checks that no other user can change what socketDir
// holds: it is a real directory of the daemon's user that others may not
// enter, in a directory of the daemon's user that others may not write or
// in a sticky directory of root's (/tmp). Another user may have made
// $TMPDIR/tether-UID first; pid files planted below it would otherwise
// have EndOrphan kill the daemon user's processes, and sockets there
// would be theirs to swap.
func checkSocketDir(socketDir string) error {
	dir := filepath.Clean(socketDir)
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("sandbox: socket directory: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("sandbox: socket directory %s is not a directory", dir)
	case int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0:
		return fmt.Errorf("sandbox: socket directory %s is not the daemon user's alone (uid %d, mode %o)", dir, st.Uid, st.Mode&0o777)
	}
	parent := filepath.Dir(dir)
	if err := unix.Stat(parent, &st); err != nil {
		return fmt.Errorf("sandbox: socket directory: %w", err)
	}
	own := int(st.Uid) == os.Geteuid() && st.Mode&0o022 == 0
	sticky := st.Uid == 0 && st.Mode&unix.S_ISVTX != 0
	if !own && !sticky {
		return fmt.Errorf("sandbox: socket directory %s lies in %s, which another user may change (uid %d, mode %o)", dir, parent, st.Uid, st.Mode&0o7777)
	}
	return nil
}

// ownedByUs reports whether fi is of a file of the daemon's user.
func ownedByUs(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

func pidFilePath(socketDir, id string) string {
	return filepath.Join(socketDir, id+".pid")
}

// procStat returns the fields of /proc/pid/stat after the command's name:
// state ppid pgrp session … (starttime is [19]).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// writePidFile records the bridge's outermost process, with its start time
// against the reuse of its pid, where the sandbox cannot reach it (beside
// its socket directory, in the masked socket directory's parent).
// It returns what it wrote, the bridge's Generation.
func writePidFile(path string, pid int) (string, error) {
	f, err := procStat(pid)
	if err != nil {
		return "", err
	}
	gen := strconv.Itoa(pid) + " " + f[19]
	return gen, os.WriteFile(path, []byte(gen+"\n"), 0o600)
}

// adoptedProc is the bridge's outermost process as an adopting daemon,
// not its parent, holds it: by a pidfd.
type adoptedProc struct {
	pid   int
	pidfd int
}

// openPidFile opens the process path records, if it still runs and is the
// one recorded, and returns the bridge's Generation.
func openPidFile(path string) (*adoptedProc, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	gen := strings.TrimSpace(string(b))
	pidText, start, _ := strings.Cut(gen, " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 1 {
		return nil, "", fmt.Errorf("%s: bad pid %q", path, pidText)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, "", fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	// The pidfd holds whatever process has the pid now: it is the
	// bridge's only if it started when the bridge did.
	f, err := procStat(pid)
	if err != nil || f[19] != start {
		_ = unix.Close(fd) // only read from: closing it has nothing to report
		return nil, "", fmt.Errorf("process %d is not the recorded one", pid)
	}
	return &adoptedProc{pid: pid, pidfd: fd}, gen, nil
}

// kill kills the process and, under bwrap, its sandbox (the PID
// namespace's first process takes the rest with it); without bwrap its
// session.
func (p *adoptedProc) kill(bwrap bool) {
	if bwrap {
		killTree(p.pid)
	} else {
		killSession(p.pid, 0)
	}
	if err := unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		// The pidfd could not say; a process already gone fails this
		// too, and then has nothing left to kill.
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// wait returns once the process has exited.
func (p *adoptedProc) wait() {
	fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// close closes the pidfd, only read from: closing it has nothing to report.
func (p *adoptedProc) close() { _ = unix.Close(p.pidfd) }

// killTree sends SIGKILL to the descendants of pid.
func killTree(pid int) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	children := map[int][]int{}
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if f, err := procStat(p); err == nil {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], p)
			}
		}
	}
	todo := children[pid]
	for len(todo) > 0 {
		p := todo[0]
		todo = append(todo[1:], children[p]...)
		if p != os.Getpid() {
			// A process that exited since the listing fails this, and
			// has nothing left to kill.
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// openOwnDir opens name (under the directory at, or AT_FDCWD) as a
// descriptor of the directory itself, refusing a link, and refuses one that
// is not the daemon user's or not private (no access for group or others).
func openOwnDir(at int, name string) (int, error) {
	fd, err := unix.Openat(at, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: not a directory of its own: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd) // only looked at: closing it has nothing to report
		return -1, fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case int(st.Uid) != os.Geteuid():
		err = fmt.Errorf("%s is not the daemon user's", name)
	case st.Mode&0o077 != 0:
		err = fmt.Errorf("%s has mode %o, not 0700", name, st.Mode&0o777)
	}
	if err != nil {
		_ = unix.Close(fd) // only looked at: closing it has nothing to report
		return -1, err
	}
	return fd, nil
}

// openSocket opens the socket file of sandbox id under socketDir as a
// descriptor of the file itself (O_PATH), one component at a time, each
// refused when it is a link or not the daemon user's, the directories when
// they are open to others: no sandbox sees its socket directory, but the
// agent of one an earlier tether spawned could write in it, and a link
// there, or a swap after a check by path, would lead the daemon to any
// socket. The socket is then reached through the
// descriptor (dialSocket), so the file checked is the file connected to.
func openSocket(socketDir, id string) (*os.File, error) {
	top, err := openOwnDir(unix.AT_FDCWD, socketDir)
	if err != nil {
		return nil, err
	}
	// The descriptors are only looked at: closing them has nothing to
	// report.
	defer func() { _ = unix.Close(top) }()
	dir, err := openOwnDir(top, id)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(dir) }()
	name := "tether-" + id + ".sock"
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK || int(st.Uid) != os.Geteuid() {
		_ = unix.Close(fd) // only looked at: closing it has nothing to report
		return nil, fmt.Errorf("%s is not a socket of the daemon user's", name)
	}
	return os.NewFile(uintptr(fd), filepath.Join(socketDir, id, name)), nil
}

// dialSocket connects to the socket f (openSocket) through its descriptor:
// /proc/self/fd/N leads to the file f holds, whatever its path names now.
func dialSocket(ctx context.Context, f *os.File) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(int(f.Fd())))
	runtime.KeepAlive(f)
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}

// Adoptable lists the ids of the sandboxes whose bridges an earlier daemon
// left running in socketDir (those with a pid file); none when another
// user could have changed socketDir (checkSocketDir).
func Adoptable(socketDir string) []string {
	if checkSocketDir(socketDir) != nil {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(socketDir, "*.pid"))
	ids := make([]string, 0, len(files))
	for _, f := range files {
		if id := strings.TrimSuffix(filepath.Base(f), ".pid"); idPattern.MatchString(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// EndOrphan kills the bridge of sandbox id that an earlier daemon left in
// socketDir, if it still runs, and removes its socket directory, its pid
// file and its cgroup (caps: this machine's layers, for the cgroup). It
// returns the error of removing the cgroup, which outlives the bridge when
// it stays (the rest is best effort), or checkSocketDir's, and then reads
// no pid file.
func EndOrphan(socketDir, id string, caps Capabilities) error {
	if !idPattern.MatchString(id) {
		return nil
	}
	if err := checkSocketDir(socketDir); err != nil {
		return err
	}
	pidFile := pidFilePath(socketDir, id)
	if p, _, err := openPidFile(pidFile); err == nil {
		p.kill(caps.Bwrap.Available)
		p.wait()
		p.close()
	}
	var err error
	if cg := loadCgroup(caps, id); cg != nil {
		err = cg.destroy()
	}
	os.RemoveAll(filepath.Join(socketDir, id))
	os.Remove(pidFile)
	return err
}

// loadCgroup opens the cgroup an earlier daemon made for sandbox id, nil
// when there is none or it cannot be opened (cgroup v1: not done; the
// limits hold all the same).
func loadCgroup(caps Capabilities, id string) cgroup {
	if !caps.Cgroup.Available || caps.CgroupVersion != 2 {
		return nil
	}
	g, err := v2Group("tether-" + id)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, g)); err != nil {
		return nil
	}
	m, err := cgroup2.Load(g)
	if err != nil {
		return nil
	}
	return &cgroupV2{m: m}
}

// Mark is how far the caller has committed a bridge's events: up to Seq,
// of the bridge named Generation ([Sandbox.Generation]).
type Mark struct {
	Generation string
	Seq        int64
}

// Adopt takes over the running bridge of sandbox spec.ID that an earlier
// daemon spawned (with the same SocketDir) and left when it died: it
// connects to the bridge's socket, acknowledges the last of its events the
// caller has committed (mark's Seq, if mark is of this bridge; else none)
// and returns the Sandbox, whose Events go on with those after it. The sandbox must be the daemon's own: the
// socket directory and the sandbox's directory in it are the daemon
// user's and private, the socket is a socket (not a link the agent could
// have planted in its directory), checked and connected to through one
// descriptor (openSocket), its listening end the daemon user's, and
// the recorded process (pid file, outside the sandbox's view) still runs.
// Otherwise it returns ErrNotAdoptable. spec is the Spawn's; ctx bounds
// the connection.
func Adopt(ctx context.Context, spec Spec, mark Mark) (*Sandbox, error) {
	if err := spec.fill(); err != nil {
		return nil, err
	}
	s := newSandbox(spec.ID, spec.Logger)
	s.sockDir, s.pidFile = filepath.Join(spec.SocketDir, spec.ID), pidFilePath(spec.SocketDir, spec.ID)
	sock, err := openSocket(spec.SocketDir, spec.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAdoptable, err)
	}
	defer sock.Close()
	proc, gen, err := openPidFile(s.pidFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAdoptable, err)
	}
	s.proc, s.gen = proc, gen
	var after int64
	if mark.Generation == gen {
		after = max(mark.Seq, 0)
	}
	egressLn, err := s.reconnect(ctx, sock, after, spec.ReadyTimeout)
	if err != nil {
		proc.close()
		return nil, fmt.Errorf("%w: %w", ErrNotAdoptable, err)
	}
	caps := *spec.Capabilities
	s.Layers.Bwrap = caps.Bwrap.Available
	s.Layers.Seccomp = s.Layers.Bwrap && caps.Seccomp.Available
	s.Layers.Network = !s.Layers.Bwrap
	switch {
	case egressLn != nil && len(spec.Egress) > 0:
		s.Layers.Network, s.Layers.Egress = true, slices.Clone(spec.Egress)
		go s.proxyEgress(egressLn, spec.Egress)
	case egressLn != nil:
		egressLn.Close()
	case len(spec.Egress) > 0 && s.Layers.Bwrap:
		s.warn("adopted after a daemon restart without its egress proxy's socket: the sandbox reaches no network")
	}
	if s.cg = loadCgroup(caps, spec.ID); s.cg != nil {
		s.Layers.Cgroup, s.memLimit = 2, spec.Limits.MemoryBytes
	}
	go s.read()
	go s.watch(spec.PingInterval, spec.PingTimeout)
	go s.acks()
	go s.awaitAdopted()
	s.log.Info("adopted a bridge left by an earlier daemon", "pid", proc.pid, "after", after)
	return s, nil
}

// reconnect dials the bridge, checks who listens, reads its "ready" (with
// its egress proxy's listening socket, when it has one; its seq, the last
// number the bridge gave, must not be below after) and acknowledges after:
// the next event must be after+1.
func (s *Sandbox) reconnect(ctx context.Context, sock *os.File, after int64, timeout time.Duration) (net.Listener, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dialSocket(ctx, sock)
	if err != nil {
		return nil, err
	}
	// The listening end must have been made by the daemon's user.
	if err := peercred.SameUser(conn); err != nil {
		conn.Close()
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	// "ready" comes alone (the bridge waits for the ack), in one message
	// that may carry a descriptor.
	buf, oob := make([]byte, 4096), make([]byte, syscall.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		conn.Close()
		return nil, err
	}
	var egressLn net.Listener
	if oobn > 0 {
		if egressLn, err = listenerFromRights(oob[:oobn]); err != nil {
			s.log.Warn("the bridge's egress socket", "err", err)
		}
	}
	dec := NewDecoder(io.MultiReader(bytes.NewReader(buf[:n]), conn), 0)
	ev, err := dec.DecodeEvent()
	switch {
	case err != nil:
	case ev.Ev != EvReady:
		err = fmt.Errorf("first event %q", ev.Ev)
	case ev.Seq < after:
		// Its events from after+1 on could not be told from those the
		// daemon committed: they would be handled twice or not at all.
		err = fmt.Errorf("%w: the bridge has numbered %d events, the daemon committed %d", ErrProtocol, ev.Seq, after)
	}
	if err == nil {
		err = NewEncoder(conn).Encode(BridgeCommand{Cmd: CmdAck, Seq: after})
	}
	if err != nil {
		conn.Close()
		if egressLn != nil {
			egressLn.Close()
		}
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	s.conn, s.enc, s.dec = conn, NewEncoder(conn), dec
	s.order = order{last: after}
	return egressLn, nil
}

// awaitAdopted waits for an adopted bridge's end. Not its parent, the
// daemon learns no exit status: an end after Shutdown is clean, an OOM kill
// of its cgroup is one, any other a crash.
func (s *Sandbox) awaitAdopted() {
	s.proc.wait()
	x := Exit{Code: -1}
	if s.cg != nil {
		x.OOMKills = s.cg.oomKills()
	}
	switch {
	case s.killReason.Load() != 0:
		x.Reason = ExitReason(s.killReason.Load())
	case s.asked.Load():
		x.Reason, x.Code = ExitClean, 0
	case x.OOMKills > 0:
		x.Reason = ExitOOM
	default:
		x.Reason = ExitCrash
	}
	s.exit = x
	s.cleanup()
	s.log.Info("adopted bridge ended", "reason", x.Reason)
	close(s.done)
}

// Detach leaves the bridge running and hangs up, as a daemon that dies
// does: the bridge holds its events for the next daemon (Adopt) or ends
// itself after its OrphanTimeout. Done closes when the bridge has ended.
func (s *Sandbox) Detach() {
	s.detached.Store(true)
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.conn.Close()
	if s.egressLn != nil {
		s.egressLn.Close() // the next daemon serves the proxy
	}
}
