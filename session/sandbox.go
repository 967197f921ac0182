package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"

	"github.com/tetherdev/tether/sandbox"
)

// Sandbox is a session's running bridge as the Manager drives it: the few
// methods of a *sandbox.Sandbox it uses. The daemon's are sandbox.Spawn's
// and sandbox.Attach's (Sandboxes); the session tests' are fakes.
type Sandbox interface {
	// Send writes one command to the bridge.
	Send(sandbox.BridgeCommand) error
	// Events are the bridge's events, in order, closed when it hangs up.
	Events() <-chan sandbox.Event
	// Done is closed once the bridge has exited; then Exit tells how.
	Done() <-chan struct{}
	Exit() sandbox.Exit
	// Close kills what is left of the sandbox and waits for its end.
	Close() error
	// Isolation is the isolation the sandbox got.
	Isolation() sandbox.Layers
	// MemoryLimit is its cgroup's memory limit in bytes (0: none), and
	// OOMKills counts the out-of-memory kills in it so far.
	MemoryLimit() int64
	OOMKills() uint64
}

// Spawner starts the sandboxes of sessions.
type Spawner interface {
	// Spawn starts a sandbox for spec and returns once its bridge is
	// ready; ctx bounds only the start.
	Spawn(ctx context.Context, spec sandbox.Spec) (Sandbox, error)
	// Attach serves the bridge that `tether claude` runs in a terminal,
	// connected on conn, from its "ready" on; ctx bounds the wait for it.
	Attach(ctx context.Context, conn net.Conn, id string, logger *slog.Logger) (Sandbox, error)
}

// Sandboxes is the daemon's Spawner: sandbox.Spawn and sandbox.Attach.
var Sandboxes Spawner = sandboxes{}

type sandboxes struct{}

func (sandboxes) Spawn(ctx context.Context, spec sandbox.Spec) (Sandbox, error) {
	sb, err := sandbox.Spawn(ctx, spec)
	if err != nil {
		return nil, err
	}
	return spawned{sb}, nil
}

func (sandboxes) Attach(ctx context.Context, conn net.Conn, id string, logger *slog.Logger) (Sandbox, error) {
	sb, err := sandbox.Attach(ctx, conn, id, logger)
	if err != nil {
		return nil, err
	}
	return spawned{sb}, nil
}

// spawned is a *sandbox.Sandbox as a Sandbox.
type spawned struct{ *sandbox.Sandbox }

func (s spawned) Isolation() sandbox.Layers { return s.Layers }

// sandboxID is a short name for a session's sandbox: the socket path,
// which holds it twice, must stay within the 107 bytes of a Unix socket.
// The data directory is in it: two daemons of one user (their sockets
// share a directory) with sessions of the same id must not take each
// other's sandbox socket away.
func (m *Manager) sandboxID(sessionID string) string {
	h := sha256.Sum256([]byte(m.cfg.DataDir + "\x00" + sessionID))
	return "s" + hex.EncodeToString(h[:6])
}

// exitMessage tells a user how a sandbox ended on its own.
func exitMessage(e sandbox.Exit) string {
	switch e.Reason {
	case sandbox.ExitOOM:
		return fmt.Sprintf("the agent ran out of memory: its sandbox was killed by the out-of-memory killer (%d kill(s))", e.OOMKills)
	case sandbox.ExitHung:
		return "the agent's sandbox stopped answering and was killed"
	case sandbox.ExitProtocol:
		return "the agent's sandbox sent its events out of order and was ended"
	case sandbox.ExitCrash:
		if e.Signal != 0 {
			return fmt.Sprintf("the agent's sandbox crashed (signal %d)", e.Signal)
		}
		return fmt.Sprintf("the agent's sandbox exited with status %d", e.Code)
	default:
		return "the agent's sandbox ended unexpectedly"
	}
}

// askStop asks a sandbox's bridge to exit. A bridge that cannot be asked
// is ending already, which its Done reports to whoever waits on it.
func askStop(sb Sandbox, logger *slog.Logger) {
	if err := sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdShutdown}); err != nil {
		logger.Debug("asking a sandbox to stop", "err", err)
	}
}

// closeSandbox kills what is left of a sandbox and waits for its end.
// Close has nothing to report (its Exit tells how the sandbox ended).
func closeSandbox(sb Sandbox) {
	_ = sb.Close()
}
