package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

// Defaults of a [Spec]'s timing fields.
const (
	DefaultReadyTimeout = 10 * time.Second
	DefaultPingInterval = 5 * time.Second
	DefaultPingTimeout  = 5 * time.Second
	// exitGrace is how long a bridge that hung up may take to exit.
	exitGrace = 2 * time.Second
	// maxSocketPath is the longest Unix socket path Linux takes.
	maxSocketPath = 107
	eventBuffer   = 1024
	stderrKeep    = 4 << 10
)

// Errors of Spawn and of a sandbox's end. A [*ExitError] unwraps to one of
// ErrCrashed, ErrOOM, ErrHung.
var (
	// ErrBadSpec is a Spec Spawn cannot run.
	ErrBadSpec = errors.New("sandbox: bad spec")
	// ErrNotReady is a bridge that did not send "ready" in time.
	ErrNotReady = errors.New("sandbox: bridge not ready")
	// ErrCrashed is a bridge that exited with an error or a signal.
	ErrCrashed = errors.New("sandbox: bridge crashed")
	// ErrOOM is a bridge killed for exceeding its memory limit.
	ErrOOM = errors.New("sandbox: bridge out of memory")
	// ErrHung is a bridge that stopped answering and was killed.
	ErrHung = errors.New("sandbox: bridge hung")
	// ErrClosed is a command sent to a sandbox that has ended.
	ErrClosed = errors.New("sandbox: closed")
)

// Limits are a sandbox's resource limits. Zero fields take the defaults of
// [DefaultLimits].
type Limits struct {
	// MemoryBytes caps memory (cgroup); default 2 GiB.
	MemoryBytes int64
	// Pids caps processes and threads (cgroup pids, else RLIMIT_NPROC);
	// default 512.
	Pids int64
	// CPUs caps CPU time in cores (cgroup cpu quota); default 1.
	CPUs float64
	// OpenFiles is RLIMIT_NOFILE; default 4096.
	OpenFiles uint64
	// FileSize is RLIMIT_FSIZE in bytes; default 4 GiB.
	FileSize uint64
	// AddressSpace is RLIMIT_AS in bytes; default 0, no limit (Go and Node
	// reserve large address ranges).
	AddressSpace uint64
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{MemoryBytes: 2 << 30, Pids: 512, CPUs: 1, OpenFiles: 4096, FileSize: 4 << 30}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Pids <= 0 {
		l.Pids = d.Pids
	}
	if l.CPUs <= 0 {
		l.CPUs = d.CPUs
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.FileSize == 0 {
		l.FileSize = d.FileSize
	}
	return l
}

// rlimits returns the rlimits for l; nproc only when no cgroup limits pids.
func (l Limits) rlimits(withCgroup bool) []Rlimit {
	r := []Rlimit{{"nofile", l.OpenFiles}, {"fsize", l.FileSize}, {"core", 0}}
	if !withCgroup {
		r = append(r, Rlimit{"nproc", uint64(l.Pids)})
	}
	if l.AddressSpace > 0 {
		r = append(r, Rlimit{"as", l.AddressSpace})
	}
	return r
}

// Spec describes one sandbox to spawn.
type Spec struct {
	// ID names the sandbox: letters, digits, '-' and '_'. Keep it short:
	// the socket path, which holds it twice, is limited to 107 bytes.
	ID string
	// Executable is the tether binary; empty means os.Executable().
	Executable string
	// Args follow Executable; nil means {"sandbox-bridge"}.
	Args []string
	// Agent is the agent's name, e.g. "demo" or "claude-code".
	Agent string
	// AgentSessionID, when set, resumes that agent conversation.
	AgentSessionID string
	// Settings are the agent's settings to start with.
	Settings agent.Settings
	// RunMember, when set, is the session's name in an agent-to-agent run:
	// its agent gets the run's tools.
	RunMember string
	// WorkDir is the session's working directory, the only place outside
	// StateDir the sandbox can write (required).
	WorkDir string
	// StateDir is the agent's state directory, writable, kept after the
	// sandbox; may be empty.
	StateDir string
	// SocketDir holds one directory a sandbox for its socket; empty means
	// $TMPDIR/tether-UID.
	SocketDir string
	// Hide are directories the sandbox must not see (the daemon's data
	// directory, other sessions' state): each is covered by an empty tmpfs
	// after every bind that could contain it, the working directory
	// included. StateDir, the sandbox's own socket directory, ReadOnly and
	// Binds may lie below them and stay visible.
	Hide []string
	// ReadOnly are paths the agent needs that the sandbox would otherwise
	// hide (an agent's CLI installed under /tmp or a hidden directory),
	// bound read-only at the same place.
	ReadOnly []string
	// Binds are further binds, after ReadOnly (an agent's configuration
	// under the home directory).
	Binds []Bind
	// Egress are the destinations ("host:port") the sandbox may reach. Every
	// sandbox has a network namespace of its own with only loopback; with
	// Egress, its agent's HTTPS_PROXY names a proxy there that forwards to
	// exactly these (claude-code: its API endpoint). Nothing else, the
	// host's loopback included, is reachable.
	Egress []string
	// Limits are the resource limits.
	Limits Limits
	// Env is the daemon's environment to filter with the allow-list; nil
	// means os.Environ().
	Env []string
	// Capabilities are this machine's layers; nil means Probe() now (slow:
	// probe once at start and pass the result).
	Capabilities *Capabilities
	// ReadyTimeout bounds the wait for "ready"; 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// PingInterval and PingTimeout drive the liveness check: a ping every
	// interval, and a bridge that has not answered within the timeout is
	// killed as hung. 0 means the defaults.
	PingInterval, PingTimeout time.Duration
	// Logger receives warnings about missing layers; nil discards them.
	Logger *slog.Logger
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Layers says which isolation a sandbox actually got.
type Layers struct {
	// Bwrap is true when the bridge runs inside bubblewrap.
	Bwrap bool
	// Network is true when the sandbox may reach a network: the host's
	// whole network without bubblewrap, else through its egress proxy.
	Network bool
	// Egress are the destinations its proxy forwards to.
	Egress []string
	// Seccomp is true when the sandbox runs under the seccomp filter (no
	// Unix sockets, no new user namespaces …).
	Seccomp bool
	// Cgroup is 1 or 2 for the cgroup version limiting it, 0 for none.
	Cgroup int
	// Rlimits are the limits the bridge set on itself.
	Rlimits []Rlimit
	// Warnings explain each missing layer.
	Warnings []string
}

// ExitReason classifies how a sandbox ended.
type ExitReason int

// Exit reasons.
const (
	// ExitClean is an exit with status 0 (after shutdown, or the daemon
	// hanging up).
	ExitClean ExitReason = iota
	// ExitCrash is a non-zero exit status or a deadly signal.
	ExitCrash
	// ExitOOM is a kill by the out-of-memory killer of the sandbox's cgroup.
	ExitOOM
	// ExitHung is a bridge killed for not answering pings.
	ExitHung
	// ExitKilled is a bridge killed by Close.
	ExitKilled
)

// String returns the reason's name: clean, crash, oom, hung or killed.
func (r ExitReason) String() string {
	switch r {
	case ExitClean:
		return "clean"
	case ExitCrash:
		return "crash"
	case ExitOOM:
		return "oom"
	case ExitHung:
		return "hung"
	case ExitKilled:
		return "killed"
	}
	return "ExitReason(" + strconv.Itoa(int(r)) + ")"
}

// Exit tells how a sandbox ended.
type Exit struct {
	// Reason classifies the end.
	Reason ExitReason
	// Code is the exit status, -1 when a signal ended it.
	Code int
	// Signal is the deadly signal, 0 when none.
	Signal syscall.Signal
	// OOMKills counts the cgroup's out-of-memory kills, the bridge's or any
	// of its children's.
	OOMKills uint64
	// Stderr is the end of the bridge's standard error.
	Stderr string
}

// ExitError is the error of a sandbox that did not end cleanly.
type ExitError struct{ Exit Exit }

// Error says how the bridge ended and quotes the last line of its stderr.
func (e *ExitError) Error() string {
	msg := fmt.Sprintf("sandbox bridge %s (code %d, signal %d, oom kills %d)", e.Exit.Reason, e.Exit.Code, e.Exit.Signal, e.Exit.OOMKills)
	if s := strings.TrimSpace(e.Exit.Stderr); s != "" {
		msg += ": " + lastLine(s)
	}
	return msg
}

// Unwrap returns ErrCrashed, ErrOOM or ErrHung.
func (e *ExitError) Unwrap() error {
	switch e.Exit.Reason {
	case ExitOOM:
		return ErrOOM
	case ExitHung:
		return ErrHung
	case ExitCrash:
		return ErrCrashed
	}
	return nil
}

// Sandbox is one running bridge as the daemon sees it.
type Sandbox struct {
	// ID is the sandbox's id.
	ID string
	// Layers is the isolation it got.
	Layers Layers

	log        *slog.Logger
	cmd        *exec.Cmd
	cg         cgroup
	sockDir    string
	stderr     *tailBuffer
	conn       net.Conn
	wmu        sync.Mutex
	enc        *Encoder
	dec        *Decoder
	events     chan Event
	done       chan struct{}
	closing    chan struct{}
	hungUp     chan struct{} // closed when the connection has ended
	closeOnce  sync.Once
	killReason atomic.Int32 // an ExitReason, set before a kill; 0: none
	delivering atomic.Bool
	pong       chan string
	exit       Exit
	memLimit   int64 // the cgroup's memory limit; 0 without a cgroup
}

// Spawn starts a sandboxed bridge for spec and waits until it is ready; ctx
// bounds only the start. The sandbox lives until it exits or Close.
func Spawn(ctx context.Context, spec Spec) (*Sandbox, error) {
	if err := spec.fill(); err != nil {
		return nil, err
	}
	s := &Sandbox{
		ID:      spec.ID,
		log:     spec.Logger.With("sandbox", spec.ID),
		sockDir: filepath.Join(spec.SocketDir, spec.ID),
		stderr:  &tailBuffer{max: stderrKeep},
		events:  make(chan Event, eventBuffer),
		done:    make(chan struct{}),
		closing: make(chan struct{}),
		hungUp:  make(chan struct{}),
		pong:    make(chan string, 1),
	}
	if err := os.MkdirAll(spec.SocketDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: socket directory: %w", err)
	}
	// A directory left by a daemon that died with this sandbox is stale.
	if err := os.RemoveAll(s.sockDir); err != nil {
		return nil, fmt.Errorf("sandbox: socket directory: %w", err)
	}
	if err := os.Mkdir(s.sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: socket directory: %w", err)
	}
	sock := filepath.Join(s.sockDir, "tether-"+spec.ID+".sock")
	caps := *spec.Capabilities
	if add := agentBinds[spec.Agent]; add != nil && caps.Bwrap.Available {
		binds, err := add(envValue(spec.Env, "HOME"), spec.WorkDir, spec.StateDir)
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
	go s.finish(waited)
	if egressConn != nil {
		go s.serveEgress(egressConn, spec)
	}
	if err := s.handshake(ctx, notifyR, sock, spec.ReadyTimeout); err != nil {
		s.Close()
		if xe := s.Err(); xe != nil {
			return nil, fmt.Errorf("%w: %w", err, xe)
		}
		return nil, err
	}
	go s.read()
	go s.watch(spec.PingInterval, spec.PingTimeout)
	return s, nil
}

func (spec *Spec) fill() error {
	if !idPattern.MatchString(spec.ID) {
		return fmt.Errorf("%w: id %q", ErrBadSpec, spec.ID)
	}
	if spec.Agent == "" || spec.WorkDir == "" {
		return fmt.Errorf("%w: agent and work directory are required", ErrBadSpec)
	}
	for _, p := range []*string{&spec.WorkDir, &spec.StateDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadSpec, err)
		}
		// The sandbox binds real paths: a link to them may lie where it
		// hides.
		if real := realPath(abs); real != "" {
			abs = real
		}
		*p = abs
	}
	if spec.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("%w: executable: %w", ErrBadSpec, err)
		}
		spec.Executable = exe
	}
	if spec.Args == nil {
		spec.Args = []string{"sandbox-bridge"}
	}
	if spec.SocketDir == "" {
		spec.SocketDir = defaultSocketDir()
	}
	if n := len(filepath.Join(spec.SocketDir, spec.ID, "tether-"+spec.ID+".sock")); n > maxSocketPath {
		return fmt.Errorf("%w: socket path %d bytes long, at most %d", ErrBadSpec, n, maxSocketPath)
	}
	if spec.Env == nil {
		spec.Env = os.Environ()
	}
	spec.Limits = spec.Limits.withDefaults()
	if spec.Capabilities == nil {
		c := Probe()
		spec.Capabilities = &c
	}
	if spec.ReadyTimeout <= 0 {
		spec.ReadyTimeout = DefaultReadyTimeout
	}
	if spec.PingInterval <= 0 {
		spec.PingInterval = DefaultPingInterval
	}
	if spec.PingTimeout <= 0 {
		spec.PingTimeout = DefaultPingTimeout
	}
	if spec.Logger == nil {
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
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

// command builds the bridge's command line: bwrap around the executable
// where available. The bridge inherits the notify pipe as fd 3 and its
// listening socket as fd 4; with seccomp, bwrap reads the filter from
// seccompFD, the last inherited file.
func (s *Sandbox) command(caps Capabilities, spec Spec, sock string, egress bool, seccompFD int) *exec.Cmd {
	env := AgentEnv(spec.Agent, spec.Env)
	env = append(env,
		EnvSocket+"="+sock, EnvSandboxID+"="+spec.ID, EnvAgent+"="+spec.Agent,
		EnvWorkDir+"="+spec.WorkDir, EnvRlimits+"="+FormatRlimits(s.Layers.Rlimits),
		EnvNotifyFD+"=3", EnvListenFD+"=4")
	if egress {
		env = append(env, EnvEgressFD+"=5")
		env = append(env, proxyEnv()...)
	}
	if spec.AgentSessionID != "" {
		env = append(env, EnvAgentSession+"="+spec.AgentSessionID)
	}
	if spec.RunMember != "" {
		env = append(env, EnvRunMember+"="+spec.RunMember)
	}
	if spec.StateDir != "" {
		env = append(env, EnvStateDir+"="+spec.StateDir)
	}
	if spec.Settings != (agent.Settings{}) {
		b, _ := json.Marshal(spec.Settings)
		env = append(env, EnvAgentSettings+"="+string(b))
	}
	var cmd *exec.Cmd
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if caps.Bwrap.Available {
		args := bwrapArgs(spec, s.sockDir)
		if s.Layers.Seccomp {
			args = append([]string{"--seccomp", strconv.Itoa(seccompFD)}, args...)
		}
		cmd = exec.Command(caps.Bwrap.Detail, args...)
	} else {
		cmd = exec.Command(spec.Executable, spec.Args...)
		cmd.Dir = spec.WorkDir
		attr.Setsid = true
	}
	cmd.SysProcAttr = attr
	cmd.Env = env
	cmd.Stderr = s.stderr
	if s.cg != nil {
		s.cg.prepare(attr)
	}
	return cmd
}

// sessionView is what a session's sandbox sees: the system, the user's
// home as an empty directory, the working directory and state directory
// read-write, its own socket directory, the executable and ReadOnly
// read-only, what the agent's profile adds, and nothing of Hide.
func sessionView(spec Spec, sockDir string) view {
	binds := []Bind{{Src: spec.WorkDir, Writable: true}, {Src: spec.Executable}}
	for _, p := range spec.ReadOnly {
		binds = append(binds, Bind{Src: p})
	}
	binds = append(binds, spec.Binds...)
	if spec.StateDir != "" {
		binds = append(binds, Bind{Src: spec.StateDir, Writable: true})
	}
	binds = append(binds, Bind{Src: sockDir, Writable: true})
	return view{
		home:  envValue(spec.Env, "HOME"),
		path:  envValue(AgentEnv(spec.Agent, spec.Env), "PATH"),
		masks: []string{envValue(spec.Env, "XDG_RUNTIME_DIR"), spec.SocketDir},
		binds: binds,
		hide:  spec.Hide,
	}
}

func bwrapArgs(spec Spec, sockDir string) []string {
	a := sessionView(spec, sockDir).args()
	a = append(a, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net")
	a = append(a, "--die-with-parent", "--new-session", "--chdir", spec.WorkDir, "--", spec.Executable)
	return append(a, spec.Args...)
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
			s.cmd.Process.Kill()
			s.cmd.Wait()
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
	if s.conn != nil {
		s.conn.Close()
	}
	if s.cmd != nil && s.cmd.Process != nil && !s.Layers.Bwrap {
		killSession(s.cmd.Process.Pid)
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

func (s *Sandbox) handshake(ctx context.Context, notify *os.File, sock string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	notify.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { notify.SetReadDeadline(time.Now()) })
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
	s.conn, s.enc = conn, NewEncoder(conn)
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
