package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of a [Spec]'s timing fields.
const (
	DefaultReadyTimeout = 10 * time.Second
	DefaultPingInterval = 5 * time.Second
	DefaultPingTimeout  = 5 * time.Second
	// DefaultOrphanTimeout is how long a bridge whose daemon is gone waits
	// for one to adopt it before it ends its agent and itself.
	DefaultOrphanTimeout = 10 * time.Minute
	// exitGrace is how long a bridge that hung up may take to exit.
	exitGrace = 2 * time.Second
	// maxSocketPath is the longest Unix socket path Linux takes.
	maxSocketPath = 107
	eventBuffer   = 1024
	stderrKeep    = 4 << 10
)

// Errors of Spawn and of a sandbox's end. A [*ExitError] unwraps to one of
// ErrCrashed, ErrOOM, ErrHung, ErrProtocol.
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
	// ErrProtocol is a bridge ended for breaking the protocol: an event
	// out of its numbered order.
	ErrProtocol = errors.New("sandbox: bridge broke the protocol")
)

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
	// ExitProtocol is a bridge killed for an event out of its numbered
	// order (a repeated, skipped or backward seq, or a second ready).
	ExitProtocol
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
	case ExitProtocol:
		return "protocol"
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

// Unwrap returns ErrCrashed, ErrOOM, ErrHung or ErrProtocol.
func (e *ExitError) Unwrap() error {
	switch e.Exit.Reason {
	case ExitProtocol:
		return ErrProtocol
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
	connMu     sync.Mutex // guards conn where the bridge's end may race its start, and egressLn
	conn       net.Conn
	egressLn   net.Listener // the egress proxy's, once it serves
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
	// pidFile records the bridge's outermost process for a daemon that
	// adopts it; proc is that process in an adopted sandbox.
	pidFile string
	gen     string // the bridge's Generation
	proc    *adoptedProc
	// committed is the last event the daemon committed (Committed), acked
	// is the last the bridge was told of; commit wakes acks.
	committed atomic.Int64
	acked     int64
	commit    chan struct{}
	detached  atomic.Bool // Detach left the bridge running
	asked     atomic.Bool // a shutdown was asked for
	// order is where the bridge's numbering stands; read alone uses it.
	order order
}

// newSandbox is a Sandbox of id with its channels made, before it has a
// process or a connection (Spawn, Adopt, Attach).
func newSandbox(id string, log *slog.Logger) *Sandbox {
	return &Sandbox{
		ID:      id,
		log:     log.With("sandbox", id),
		stderr:  &tailBuffer{max: stderrKeep},
		events:  make(chan Event, eventBuffer),
		done:    make(chan struct{}),
		closing: make(chan struct{}),
		hungUp:  make(chan struct{}),
		pong:    make(chan string, 1),
		commit:  make(chan struct{}, 1),
	}
}
