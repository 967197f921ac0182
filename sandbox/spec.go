package sandbox

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

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
	// OrphanTimeout is how long the bridge outlives its daemon, waiting
	// for a daemon to adopt it ([Adopt]); 0 means [DefaultOrphanTimeout],
	// negative that the sandbox dies with the daemon (as it did before
	// re-adoption).
	OrphanTimeout time.Duration
	// Logger receives warnings about missing layers; nil discards them.
	Logger *slog.Logger
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

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
	if spec.OrphanTimeout == 0 {
		spec.OrphanTimeout = DefaultOrphanTimeout
	}
	if spec.Logger == nil {
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
