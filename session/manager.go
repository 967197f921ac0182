package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// Config configures a Manager.
type Config struct {
	Store  *store.Store
	Events *EventLog
	Logger *slog.Logger
	// Roots are the directories sessions may work in (and below).
	Roots []string
	// DataDir is the daemon's data directory: no session works in it,
	// around it or below it.
	DataDir string
	// Home is the user's home directory: a session working there is
	// warned that every dotfile is within the agent's reach.
	Home string
	// ClaudeDirs are Claude Code's configuration directories (~/.claude,
	// and $CLAUDE_CONFIG_DIR when the user sets it): only transcripts
	// under their projects/ are followed. Empty means Home/.claude.
	ClaudeDirs []string
	// Agents are the agents sessions can run; the first is the default.
	Agents []string
	// Spawner starts the sessions' sandboxes; nil means Sandboxes, the
	// real ones.
	Spawner Spawner
	// Sandbox is the template for each session's sandbox; ID, Agent,
	// AgentSessionID, WorkDir, StateDir and Egress are set per session.
	Sandbox sandbox.Spec
	// StateDir holds one directory a session for its agent's state.
	StateDir string
	// MaxSessions caps the sandboxes running at once; 0 means no cap.
	MaxSessions int
	// IdleTimeout stops a session's sandbox after so long without a turn
	// or a pending question; the session starts it again on its next
	// message. 0 means never.
	IdleTimeout time.Duration
	// Egress are, per agent, the destinations ("host:port") its sandbox may
	// reach through its egress proxy; an agent not listed reaches none.
	Egress map[string][]string
	// ApprovalTimeout is how long a permission question waits for a phone
	// before it is denied.
	ApprovalTimeout time.Duration
	// AllowBypass lets phones choose the bypassPermissions mode.
	AllowBypass bool
	// KeepRunningTurns makes Shutdown leave the sandboxes with a running
	// turn or a pending question running, for the next daemon to adopt
	// (needs Sandbox.SocketDir), instead of stopping them.
	KeepRunningTurns bool
	// Phones counts the connected phones that can answer a hook's
	// question; with none, the question goes back to the terminal at once.
	Phones func() int
	// Branch names the git branch checked out in dir ("" when none).
	Branch func(dir string) string
	// Runs, when set, are the agent-to-agent runs: a session that takes
	// part in one gets their tools, and its calls are answered there.
	Runs RunTools
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// RunTools are the agent-to-agent runs as sessions see them.
type RunTools interface {
	// Member returns the name under which a session takes part in a run,
	// or "" when it is in none.
	Member(ctx context.Context, sessionID string) (string, error)
	// Call answers a session's use of a run tool.
	Call(ctx context.Context, sessionID string, call agent.RunCall) (json.RawMessage, error)
}

// Manager runs sessions. Its methods are safe for concurrent use.
type Manager struct {
	cfg Config

	transcripts transcripts // the transcripts of sessions seen through hooks

	mu        sync.Mutex
	live      map[string]*sess
	approvals map[approvalKey]*approval // pending, by session and tool_call_id
	rules     map[string][]Rule         // remembered approvals, by session
	// terminals are the terminals running `tether claude`, by session;
	// idleWaiters wake those waiting for an observed session to leave busy.
	terminals   map[string]Terminal
	idleWaiters map[string]chan struct{}
	closing     bool
	wg          sync.WaitGroup

	// batches collect, by session, the events appended while a bridge
	// event is handled (handleNumbered).
	bmu     sync.Mutex
	batches map[string][]Entry

	// hookHolds are the event log's holds that hook tool questions took in
	// Observe, released by their Ask (hookHold).
	hmu       sync.Mutex
	hookHolds map[hookKey]func()
}

// Errors the phone sees, with the protocol's codes.
var (
	errNotFound = func(id string) error {
		return wire.Errorf(wire.CodeSessionNotFound, "no session %q", id)
	}
)

// NewManager returns a Manager. A live session whose sandbox an earlier
// daemon left running (in Sandbox.SocketDir) is adopted, its turn and its
// pending questions going on; other sessions left live by a previous daemon
// lost their sandbox with it: they become idle, and resume on their next
// message.
func NewManager(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Spawner == nil {
		cfg.Spawner = Sandboxes
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = DefaultApprovalTTL
	}
	m := &Manager{cfg: cfg, live: map[string]*sess{}, approvals: map[approvalKey]*approval{}, rules: map[string][]Rule{}}
	sessions, err := cfg.Store.LiveSessions(ctx)
	if err != nil {
		return nil, err
	}
	adopting := m.leftRunning(sessions)
	pending, err := m.withdrawStale(ctx, adopting)
	if err != nil {
		return nil, err
	}
	for _, se := range sessions {
		if _, ok := adopting[se.ID]; ok {
			continue
		}
		if se.Source != store.SourceSandbox || se.Status == store.StatusIdle {
			continue
		}
		se.Status, se.UpdatedAt = store.StatusIdle, cfg.Now()
		if err := cfg.Store.UpdateSession(ctx, se); err != nil {
			return nil, err
		}
		cfg.Logger.Info("session left by a previous daemon is idle; it resumes on its next message", "session", se.ID)
	}
	for id, rec := range adopting {
		m.readopt(rec, pending[id])
	}
	return m, nil
}

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func newID(prefix string) string {
	var b [9]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Agents are the agents sessions can run.
func (m *Manager) Agents() []string { return slices.Clone(m.cfg.Agents) }

// Summaries lists the live sessions for connection_ack.
func (m *Manager) Summaries(ctx context.Context) ([]wire.SessionSummary, error) {
	recs, err := m.cfg.Store.LiveSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]wire.SessionSummary, 0, len(recs))
	for _, r := range recs {
		sum := wire.SessionSummary{SessionID: r.ID, Agent: r.Agent, Title: r.Title, Status: string(r.Status),
			WorkingDirectory: r.WorkingDirectory, Source: string(r.Source),
			Model: r.Settings.Model, PermissionMode: r.Settings.PermissionMode, MaxThinkingTokens: r.Settings.MaxThinkingTokens}
		m.mu.Lock()
		_, attached := m.terminals[r.ID]
		m.mu.Unlock()
		switch {
		case m.remote(r.ID):
			sum.Mode = ModeRemote
		case attached:
			sum.Mode = ModeLocal
		}
		// A terminal session whose terminal is gone (the daemon
		// restarted) is only observed, with no mode: the phone cannot
		// take it over.
		if r.Usage.Turns > 0 {
			sum.Usage = usageTotals(r.Usage)
		}
		out = append(out, sum)
	}
	return out, nil
}
