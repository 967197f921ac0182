package session

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"

	"github.com/tetherdev/tether/sandbox"
)

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
func askStop(sb *sandbox.Sandbox, logger *slog.Logger) {
	if err := sb.Shutdown(); err != nil {
		logger.Debug("asking a sandbox to stop", "err", err)
	}
}

// closeSandbox kills what is left of a sandbox and waits for its end.
// Close has nothing to report (its Exit tells how the sandbox ended).
func closeSandbox(sb *sandbox.Sandbox) {
	_ = sb.Close()
}
