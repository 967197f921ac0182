package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/sandbox/claude"
	"github.com/tetherdev/tether/sandbox/codex"
	"github.com/tetherdev/tether/sandbox/demo"
	"github.com/tetherdev/tether/sandbox/runmcp"
)

// Environment variables that configure "tether sandbox-bridge"; [Spawn] sets
// them and [BridgeConfigFromEnv] reads them.
const (
	// EnvSocket is the Unix socket path to listen on (required). With
	// EnvListenFD it only names the socket: a sandbox does not see it.
	EnvSocket = "TETHER_SANDBOX_SOCKET"
	// EnvSandboxID is the sandbox's id (required).
	EnvSandboxID = "TETHER_SANDBOX_ID"
	// EnvAgent is the agent's name: "demo", "claude-code" or "codex"
	// (required).
	EnvAgent = "TETHER_AGENT"
	// EnvAgentSession is an agent session id to resume (optional).
	EnvAgentSession = "TETHER_AGENT_SESSION"
	// EnvAgentSettings holds the agent's settings to start with, as the
	// JSON of an agent.Settings (optional).
	EnvAgentSettings = "TETHER_AGENT_SETTINGS"
	// EnvWorkDir is the session's working directory (required).
	EnvWorkDir = "TETHER_WORKDIR"
	// EnvStateDir is the per-session state directory that outlives the
	// sandbox (optional).
	EnvStateDir = "TETHER_STATE_DIR"
	// EnvRlimits holds the rlimits the bridge sets on itself, in the form
	// [FormatRlimits] writes (optional).
	EnvRlimits = "TETHER_SANDBOX_RLIMITS"
	// EnvNotifyFD is a file descriptor the bridge writes one byte to, then
	// closes, once its socket listens (optional).
	EnvNotifyFD = "TETHER_SANDBOX_NOTIFY_FD"
	// EnvRunMember is the name under which the session takes part in an
	// agent-to-agent run; its agent then gets the run's tools (optional).
	EnvRunMember = "TETHER_RUN_MEMBER"
	// EnvListenFD is an inherited file descriptor of a Unix socket already
	// listening at EnvSocket, which the bridge accepts on instead of
	// creating the socket (optional; [Spawn] always passes one, as seccomp
	// forbids creating Unix sockets in the sandbox).
	EnvListenFD = "TETHER_SANDBOX_LISTEN_FD"
	// EnvOrphanTimeout is how long the bridge waits for a daemon to
	// connect again once its daemon is gone, as a Go duration; empty or 0
	// means it ends when its daemon hangs up (optional).
	EnvOrphanTimeout = "TETHER_SANDBOX_ORPHAN_TIMEOUT"
)

const (
	bridgeWriteWait = 10 * time.Second // longest a write to the daemon may block
	turnStopWait    = 5 * time.Second  // longest shutdown waits for an interrupted turn
	socketFileMode  = os.FileMode(0o600)
	notifyByte      = "L"
	errTooManyTurns = "a turn is already running"
	errUnknownReq   = "no pending permission request"
)

// Errors RunBridge returns for a configuration it cannot run.
var (
	// ErrUnknownAgent is an agent name without a factory.
	ErrUnknownAgent = errors.New("sandbox: unknown agent")
	// ErrBridgeConfig is a configuration that lacks a required field.
	ErrBridgeConfig = errors.New("sandbox: bad bridge configuration")
)

// AgentOptions is what an [AgentFactory] gets to build an agent.
type AgentOptions struct {
	// WorkDir is the session's working directory, where the agent works.
	WorkDir string
	// StateDir is a directory for the agent's own state (transcripts …)
	// that outlives the sandbox; empty when there is none.
	StateDir string
	// SessionID, when set, is the agent conversation to resume.
	SessionID string
	// Settings are the agent's settings to start with.
	Settings agent.Settings
	// Run, when set, is the run the session takes part in, with its tools.
	Run *agent.Run
	// Logger is the bridge's logger.
	Logger *slog.Logger
}

// AgentFactory builds an agent adapter.
type AgentFactory func(AgentOptions) (agent.Agent, error)

// DefaultAgents returns the agents the bridge knows: "demo" (package
// sandbox/demo), "claude-code" (package sandbox/claude, running the claude
// executable found on PATH with the bridge's environment) and "codex"
// (package sandbox/codex, the codex executable found on PATH). Callers
// may add or replace entries before passing the map in BridgeConfig.Agents.
func DefaultAgents() map[string]AgentFactory {
	return map[string]AgentFactory{
		"demo": func(o AgentOptions) (agent.Agent, error) {
			opts := demo.Options{WorkDir: o.WorkDir, StateDir: o.StateDir, SessionID: o.SessionID, Settings: o.Settings}
			if o.Run != nil {
				opts.Run = o.Run.Calls
			}
			return demo.New(opts)
		},
		"claude-code": func(o AgentOptions) (agent.Agent, error) {
			bin, err := exec.LookPath("claude")
			if err != nil {
				return nil, fmt.Errorf("sandbox: claude-code: %w", err)
			}
			opts, err := ClaudeOptions(bin, o)
			if err != nil {
				return nil, err
			}
			return claude.New(opts)
		},
		"codex": func(o AgentOptions) (agent.Agent, error) {
			bin, err := exec.LookPath("codex")
			if err != nil {
				return nil, fmt.Errorf("sandbox: codex: %w", err)
			}
			return codex.New(CodexOptions(bin, o))
		},
	}
}

// CodexOptions are the codex agent's options for o, running the CLI bin
// with the caller's environment; a run's tools are its MCP server, whose
// token reaches the server through the environment (codex.Options).
func CodexOptions(bin string, o AgentOptions) codex.Options {
	opts := codex.Options{Bin: bin, WorkDir: o.WorkDir, ResumeID: o.SessionID, Settings: o.Settings, Logger: o.Logger}
	if o.Run != nil {
		opts.MCPServers = map[string]agent.MCPServer{runmcp.ServerName: o.Run.Server}
	}
	return opts
}

// ClaudeOptions are the claude-code agent's options for o, running the CLI
// bin with the caller's environment; a run's tools are its MCP server.
func ClaudeOptions(bin string, o AgentOptions) (claude.Options, error) {
	opts := claude.Options{Bin: bin, WorkDir: o.WorkDir, ResumeID: o.SessionID, Settings: o.Settings, Logger: o.Logger}
	if o.Run != nil {
		cfg, err := claude.MCPConfig(map[string]agent.MCPServer{runmcp.ServerName: o.Run.Server})
		if err != nil {
			return claude.Options{}, err
		}
		// The configuration holds the relay's token: in a file of the
		// session's own (0600) rather than on a command line, which every
		// local user can read.
		if o.StateDir != "" {
			path := filepath.Join(o.StateDir, "run-mcp.json")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				return claude.Options{}, fmt.Errorf("sandbox: run tools' MCP configuration: %w", err)
			}
			cfg = path
		}
		opts.MCPConfig, opts.AllowedTools = cfg, runmcp.ToolNames
	}
	return opts, nil
}

// BridgeConfig configures [RunBridge].
type BridgeConfig struct {
	// SocketPath is the Unix socket to listen on, or where Listener
	// listens.
	SocketPath string
	// Listener, when set, is the listening socket to accept on; the bridge
	// then creates none.
	Listener net.Listener
	// Conn, when set, is the daemon's connection, already made (the bridge
	// dialed the daemon: `tether claude`); SocketPath and Listener are
	// then unused.
	Conn net.Conn
	// Egress, when set, is the socket pair on which the bridge sends the
	// daemon its egress proxy's listening socket (EnvEgressFD).
	Egress *os.File
	// SandboxID names the sandbox, for logs.
	SandboxID string
	// Agent is the name of the agent to run, a key of Agents.
	Agent string
	// AgentSessionID, when set, resumes that agent conversation.
	AgentSessionID string
	// Settings are the agent's settings to start with.
	Settings agent.Settings
	// WorkDir is the session's working directory.
	WorkDir string
	// StateDir is the agent's state directory; may be empty.
	StateDir string
	// RunMember, when set, is the session's name in its agent-to-agent
	// run: the bridge serves the run's tools to its agent.
	RunMember string
	// Agents maps agent names to factories; nil means [DefaultAgents].
	Agents map[string]AgentFactory
	// Rlimits are set on the bridge process before any agent starts, and so
	// hold for everything the agent runs.
	Rlimits []Rlimit
	// Notify, when set, gets one byte once the socket listens and is closed.
	Notify io.WriteCloser
	// MaxLine is the decoder's line limit; 0 means [DefaultMaxLine].
	MaxLine int
	// OrphanTimeout, when positive and the bridge listens (no Conn), keeps
	// the bridge running when its daemon is gone: it holds its events
	// until a daemon acknowledges them, accepts the next daemon that
	// connects, and ends once none has for this long.
	OrphanTimeout time.Duration
	// MaxHeld bounds the bytes of unacknowledged events held; 0 means
	// [DefaultMaxHeld].
	MaxHeld int
	// Logger receives the bridge's own diagnostics; nil discards them.
	Logger *slog.Logger
}

// BridgeConfigFromEnv builds a BridgeConfig from the TETHER_… variables
// (see the Env constants) as getenv returns them. Agents and Logger are left
// for the caller to fill.
func BridgeConfigFromEnv(getenv func(string) string) (BridgeConfig, error) {
	cfg := BridgeConfig{
		SocketPath:     getenv(EnvSocket),
		SandboxID:      getenv(EnvSandboxID),
		Agent:          getenv(EnvAgent),
		AgentSessionID: getenv(EnvAgentSession),
		WorkDir:        getenv(EnvWorkDir),
		StateDir:       getenv(EnvStateDir),
		RunMember:      getenv(EnvRunMember),
	}
	rl, err := ParseRlimits(getenv(EnvRlimits))
	if err != nil {
		return BridgeConfig{}, err
	}
	cfg.Rlimits = rl
	if s := getenv(EnvOrphanTimeout); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return BridgeConfig{}, fmt.Errorf("%w: %s=%q", ErrBridgeConfig, EnvOrphanTimeout, s)
		}
		cfg.OrphanTimeout = d
	}
	if s := getenv(EnvAgentSettings); s != "" {
		if err := json.Unmarshal([]byte(s), &cfg.Settings); err != nil {
			return BridgeConfig{}, fmt.Errorf("%w: %s: %w", ErrBridgeConfig, EnvAgentSettings, err)
		}
	}
	if s := getenv(EnvNotifyFD); s != "" {
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			return BridgeConfig{}, fmt.Errorf("%w: %s=%q", ErrBridgeConfig, EnvNotifyFD, s)
		}
		cfg.Notify = os.NewFile(uintptr(fd), "notify")
	}
	if s := getenv(EnvEgressFD); s != "" {
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			return BridgeConfig{}, fmt.Errorf("%w: %s=%q", ErrBridgeConfig, EnvEgressFD, s)
		}
		cfg.Egress = os.NewFile(uintptr(fd), "egress")
	}
	if s := getenv(EnvListenFD); s != "" {
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			return BridgeConfig{}, fmt.Errorf("%w: %s=%q", ErrBridgeConfig, EnvListenFD, s)
		}
		f := os.NewFile(uintptr(fd), "listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return BridgeConfig{}, fmt.Errorf("%w: %s: %w", ErrBridgeConfig, EnvListenFD, err)
		}
		cfg.Listener = ln
	}
	return cfg, cfg.validate()
}

func (c *BridgeConfig) validate() error {
	for name, v := range map[string]string{EnvSocket: c.SocketPath, EnvSandboxID: c.SandboxID, EnvAgent: c.Agent, EnvWorkDir: c.WorkDir} {
		if v == "" && (name != EnvSocket || c.Conn == nil) {
			return fmt.Errorf("%w: %s is empty", ErrBridgeConfig, name)
		}
	}
	return nil
}

// RunBridge is "tether sandbox-bridge": it sets its rlimits, builds the agent,
// listens on cfg.SocketPath, accepts one connection, sends "ready" and serves
// commands until "shutdown", the connection's end or ctx's. With
// cfg.OrphanTimeout, the connection's end is not the bridge's: it accepts
// the next daemon, which acknowledges first what it has, and is sent the
// events after it. It returns nil after a shutdown command, the daemon
// hanging up (without OrphanTimeout) or no daemon coming back in time.
func RunBridge(ctx context.Context, cfg BridgeConfig) (err error) {
	if cfg.Conn != nil {
		defer func() {
			if err != nil {
				cfg.Conn.Close() // the daemon hears of it at once
			}
		}()
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Notify != nil {
		// acceptFirst closed it after its byte: this close is for the
		// ways out before that, where the daemon sees the pipe end.
		defer func() { _ = cfg.Notify.Close() }()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("sandbox", cfg.SandboxID)
	if err := applyRlimits(cfg.Rlimits); err != nil {
		return err
	}
	keep := cfg.Conn == nil && cfg.OrphanTimeout > 0
	var egressLn *os.File
	if cfg.Egress != nil {
		if egressLn, err = sendEgressListener(cfg.Egress, keep); err != nil {
			return err
		}
		if egressLn != nil {
			defer egressLn.Close()
		}
	}
	agents := cfg.Agents
	if agents == nil {
		agents = DefaultAgents()
	}
	factory, ok := agents[cfg.Agent]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownAgent, cfg.Agent)
	}
	opts := AgentOptions{WorkDir: cfg.WorkDir, StateDir: cfg.StateDir, SessionID: cfg.AgentSessionID, Settings: cfg.Settings, Logger: log}
	calls := &runCalls{waiting: map[string]chan BridgeCommand{}}
	if cfg.RunMember != "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		run, err := serveRunTools(ctx, cfg.RunMember, calls, log)
		if err != nil {
			return err
		}
		opts.Run = run
	}
	ag, err := factory(opts)
	if err != nil {
		return fmt.Errorf("sandbox: start agent %q: %w", cfg.Agent, err)
	}
	if keep {
		// Its standard error is a pipe to the daemon, which may die: a
		// write to it then fails instead of killing the bridge.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	}
	conn, ln := cfg.Conn, net.Listener(nil)
	if conn == nil {
		if conn, ln, err = acceptFirst(ctx, cfg.SocketPath, cfg.Listener, cfg.Notify, keep); err != nil {
			if cerr := ag.Close(); cerr != nil {
				log.Warn("close agent", "err", cerr)
			}
			return err
		}
	}
	if ln != nil {
		defer os.Remove(cfg.SocketPath)
		defer ln.Close()
	}
	b := &bridge{
		out:     newOutbox(keep, cfg.MaxHeld),
		egress:  egressLn,
		agent:   ag,
		factory: factory,
		opts:    opts,
		log:     log,
		pending: map[string]chan agent.PermissionDecision{},
		calls:   calls,
	}
	calls.setBridge(b)
	return b.run(ctx, conn, ln, cfg.OrphanTimeout, cfg.MaxLine)
}

// acceptFirst listens on path (or takes ln, listening there), tells notify,
// and returns the first connection. With keep it returns the listener too,
// for the daemons to come (the socket stays); else the socket file is gone
// when it returns. The spawning daemon connects at once, or kills the
// bridge (a later daemon does, from its pid file, if that one died).
func acceptFirst(ctx context.Context, path string, ln net.Listener, notify io.WriteCloser, keep bool) (net.Conn, net.Listener, error) {
	if ln == nil {
		var err error
		if ln, err = listen(path); err != nil {
			return nil, nil, err
		}
	}
	if notify != nil {
		if _, err := io.WriteString(notify, notifyByte); err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("sandbox: notify: %w", err)
		}
		// The byte is written: the daemon reads it or sees the pipe end,
		// and a close has nothing to add.
		_ = notify.Close()
	}
	conn, err := acceptWithin(ctx, ln, 0)
	if err != nil || !keep {
		ln.Close()
		os.Remove(path)
		return conn, nil, err
	}
	return conn, ln, nil
}

// errOrphaned is a bridge whose daemon did not come back in time.
var errOrphaned = errors.New("sandbox: no daemon connected in time")

// acceptWithin accepts one connection on ln, within wait when it is
// positive.
func acceptWithin(ctx context.Context, ln net.Listener, wait time.Duration) (net.Conn, error) {
	dl, _ := ln.(interface{ SetDeadline(time.Time) error })
	// A Unix listener's deadline fails only once it is closed, and then
	// Accept fails too.
	if wait > 0 && dl != nil {
		_ = dl.SetDeadline(time.Now().Add(wait))
		defer func() { _ = dl.SetDeadline(time.Time{}) }()
	}
	stop := context.AfterFunc(ctx, func() {
		if dl != nil {
			_ = dl.SetDeadline(time.Now())
		} else {
			ln.Close()
		}
	})
	defer stop()
	conn, err := ln.Accept()
	switch {
	case err == nil:
		return conn, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("sandbox: accept: %w", ctx.Err())
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fmt.Errorf("%w: waited %s", errOrphaned, wait)
	}
	return nil, fmt.Errorf("sandbox: accept: %w", err)
}

func listen(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox: remove stale socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("sandbox: listen: %w", err)
	}
	if err := os.Chmod(path, socketFileMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("sandbox: socket mode: %w", err)
	}
	return ln, nil
}

// bridge serves its daemon's connections: one at a time, the next once the
// previous one is gone when the outbox holds events.
type bridge struct {
	log     *slog.Logger
	factory AgentFactory
	opts    AgentOptions
	out     *outbox
	// egress is the proxy's listening socket, sent to each daemon that
	// adopts the bridge with its "ready"; nil without egress.
	egress *os.File

	mu         sync.Mutex
	agent      agent.Agent
	turnCancel context.CancelFunc // non-nil while a turn runs
	turnDone   chan struct{}
	partial    bool // the running turn passes stream_event messages on
	pending    map[string]chan agent.PermissionDecision
	calls      *runCalls
}

// run serves conn, then, while the outbox holds events, each daemon that
// connects next, until a shutdown, ctx's end or no daemon within orphan.
func (b *bridge) run(ctx context.Context, conn net.Conn, ln net.Listener, orphan time.Duration, maxLine int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer b.finish()
	for first := true; ; first = false {
		shutdown, err := b.serve(ctx, conn, NewDecoder(conn, maxLine), first)
		if shutdown || err != nil || ctx.Err() != nil || ln == nil {
			return err
		}
		b.log.Info("the daemon is gone; waiting for one to come back", "within", orphan)
		if conn, err = acceptWithin(ctx, ln, orphan); err != nil {
			if errors.Is(err, errOrphaned) {
				b.log.Warn("no daemon came back: ending", "waited", orphan)
				return nil
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		b.log.Info("a daemon connected")
	}
}

// serve serves one daemon connection. A daemon connecting after the first
// acknowledges what it has committed before anything else, and is sent the
// held events after that. It reports whether the daemon asked for a
// shutdown.
func (b *bridge) serve(ctx context.Context, conn net.Conn, dec *Decoder, first bool) (shutdown bool, err error) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer func() {
		// After a shutdown the connection stays for the turn's end:
		// finish closes it.
		if !shutdown {
			b.out.detach(conn)
			conn.Close()
		}
	}()
	var rights []byte
	if !first && b.egress != nil {
		rights = syscall.UnixRights(int(b.egress.Fd()))
	}
	if err := b.out.reply(conn, Event{Ev: EvReady, Seq: b.out.last()}, rights); err != nil {
		return false, nil
	}
	var after int64
	if !first {
		conn.SetReadDeadline(time.Now().Add(bridgeWriteWait))
		cmd, err := dec.DecodeCommand()
		if err != nil || cmd.Cmd != CmdAck {
			b.log.Warn("a daemon connected without acknowledging first: hung up", "err", err, "cmd", cmd.Cmd)
			return false, nil
		}
		conn.SetReadDeadline(time.Time{})
		after = cmd.Seq
	}
	if err := b.out.attach(conn, after); err != nil {
		return false, nil
	}
	for {
		cmd, err := dec.DecodeCommand()
		switch {
		case err == nil:
		case errors.Is(err, ErrLineTooLong), errors.Is(err, ErrMalformed),
			errors.Is(err, ErrUnknownCommand), errors.Is(err, ErrInvalid):
			if err := b.sendAnswer(Event{Ev: EvError, Code: CodeBadCommand, Error: err.Error()}); err != nil {
				return false, err
			}
			continue
		case ctx.Err() != nil:
			return false, nil
		case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded):
			b.log.Info("daemon hung up")
			return false, nil
		case b.out.hold:
			// The connection broke: the next daemon gets what it lost.
			b.log.Warn("reading the daemon's commands", "err", err)
			return false, nil
		default:
			return false, fmt.Errorf("sandbox: read command: %w", err)
		}
		if cmd.Cmd == CmdShutdown {
			b.log.Info("shutdown")
			return true, nil
		}
		if err := b.handle(ctx, conn, cmd); err != nil {
			if b.out.hold {
				return false, nil
			}
			return false, err
		}
	}
}

func (b *bridge) handle(ctx context.Context, conn net.Conn, cmd BridgeCommand) error {
	switch cmd.Cmd {
	case CmdQuery:
		return b.startTurn(ctx, cmd)
	case CmdResume:
		return b.resume(cmd)
	case CmdInterrupt:
		b.mu.Lock()
		if b.turnCancel != nil {
			b.turnCancel()
		}
		b.mu.Unlock()
	case CmdPermissionResponse:
		b.mu.Lock()
		ch, ok := b.pending[cmd.RequestID]
		delete(b.pending, cmd.RequestID)
		b.mu.Unlock()
		if !ok {
			return b.sendAnswer(Event{Ev: EvError, Code: CodeUnknownRequest, RequestID: cmd.RequestID, Error: errUnknownReq})
		}
		ch <- *cmd.Decision
	case CmdPing:
		return b.out.reply(conn, Event{Ev: EvPong, ID: cmd.ID}, nil)
	case CmdAck:
		b.out.ack(cmd.Seq)
	case CmdRunReply:
		if !b.calls.answer(cmd) {
			return b.sendAnswer(Event{Ev: EvError, Code: CodeUnknownRequest, ID: cmd.ID, Error: "no run call waits for this reply"})
		}
	case CmdConfigure:
		b.mu.Lock()
		ag := b.agent
		b.mu.Unlock()
		ca, ok := ag.(agent.Configurable)
		if !ok {
			return b.sendAnswer(Event{Ev: EvError, Code: CodeAgent, ID: cmd.ID, Error: "this agent has no settings to change"})
		}
		// The agent may wait for its turn's output to answer: the
		// commands that follow (an interrupt) must not wait for it.
		go func() {
			s, err := ca.Configure(ctx, *cmd.Settings)
			if err != nil {
				b.sendLogged(Event{Ev: EvError, Code: CodeAgent, ID: cmd.ID, Error: err.Error()})
				return
			}
			b.sendLogged(Event{Ev: EvConfigured, ID: cmd.ID, Settings: &s})
		}()
	}
	return nil
}

// query runs one turn of ag, with the command's images when it has any.
func query(ctx context.Context, ag agent.Agent, cmd BridgeCommand, host agent.Host) error {
	if len(cmd.Images) == 0 {
		return ag.Query(ctx, cmd.Prompt, host)
	}
	ia, ok := ag.(agent.ImageAgent)
	if !ok {
		return errNoImages
	}
	return ia.QueryImages(ctx, cmd.Prompt, cmd.Images, host)
}

// errNoImages answers a query with images to an agent that takes none.
var errNoImages = errors.New("this agent does not take images")

func (b *bridge) startTurn(ctx context.Context, cmd BridgeCommand) error {
	b.mu.Lock()
	if b.turnCancel != nil {
		b.mu.Unlock()
		return b.sendAnswer(Event{Ev: EvError, Code: CodeBusy, SessionID: cmd.SessionID, Error: errTooManyTurns})
	}
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	b.turnCancel, b.turnDone, b.partial = cancel, done, cmd.IncludePartialMessages
	ag := b.agent
	b.mu.Unlock()
	go func() {
		defer close(done)
		err := query(tctx, ag, cmd, b)
		interrupted := errors.Is(err, context.Canceled) && tctx.Err() != nil
		cancel()
		b.mu.Lock()
		b.turnCancel = nil
		b.mu.Unlock()
		if err != nil && !interrupted {
			b.log.Warn("agent turn failed", "err", err)
			if b.send(Event{Ev: EvError, Code: CodeAgent, SessionID: cmd.SessionID, Error: err.Error()}) != nil {
				return
			}
		}
		b.sendLogged(Event{Ev: EvDone, SessionID: cmd.SessionID, AgentSessionID: ag.SessionID()})
	}()
	return nil
}

func (b *bridge) resume(cmd BridgeCommand) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.turnCancel != nil {
		return b.sendAnswer(Event{Ev: EvError, Code: CodeBusy, SessionID: cmd.SessionID, Error: errTooManyTurns})
	}
	opts := b.opts
	opts.SessionID = cmd.SessionID
	ag, err := b.factory(opts)
	if err != nil {
		return b.sendAnswer(Event{Ev: EvError, Code: CodeAgent, SessionID: cmd.SessionID, Error: fmt.Sprintf("resume: %v", err)})
	}
	if err := b.agent.Close(); err != nil {
		b.log.Warn("close agent", "err", err)
	}
	b.agent = ag
	return b.sendAnswer(Event{Ev: EvDone, SessionID: cmd.SessionID, AgentSessionID: ag.SessionID()})
}

// finish interrupts a running turn, waits a while for it and closes the agent
// and the connection.
func (b *bridge) finish() {
	b.mu.Lock()
	cancel, done := b.turnCancel, b.turnDone
	b.mu.Unlock()
	if cancel != nil {
		cancel()
		select {
		case <-done:
		case <-time.After(turnStopWait):
			b.log.Warn("agent did not end its turn after interrupt")
		}
	}
	b.mu.Lock()
	ag := b.agent
	b.mu.Unlock()
	if err := ag.Close(); err != nil {
		b.log.Warn("close agent", "err", err)
	}
	b.out.close()
}

// send writes one event through the outbox; a failed write closes the
// connection, which ends its serve.
func (b *bridge) send(ev Event) error { return b.out.send(ev) }

// sendAnswer answers a daemon's command from the command loop (outbox.sendNow).
func (b *bridge) sendAnswer(ev Event) error { return b.out.sendNow(ev) }

// sendLogged sends ev where there is nobody to return a failure to: the
// failure is logged, and the connection it broke ends as it does for any
// failed write. After the bridge's end there is nobody to send to.
func (b *bridge) sendLogged(ev Event) {
	if err := b.send(ev); err != nil && !errors.Is(err, errBridgeEnded) {
		b.log.Warn("sending an event to the daemon", "event", ev.Ev, "err", err)
	}
}

var streamEventType = []byte(`"stream_event"`)

// Emit implements agent.Host.
func (b *bridge) Emit(msg json.RawMessage) {
	b.mu.Lock()
	partial := b.partial
	b.mu.Unlock()
	if !partial && bytes.Contains(msg, streamEventType) {
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(msg, &head) == nil && head.Type == "stream_event" {
			return
		}
	}
	if !json.Valid(msg) || bytes.TrimSpace(msg)[0] != '{' {
		b.sendLogged(Event{Ev: EvError, Code: CodeAgent, Error: "agent emitted a message that is not a JSON object"})
		return
	}
	small, ok := Shrink(msg, MaxMessage)
	if !ok {
		b.sendLogged(Event{Ev: EvError, Code: CodeAgent, Error: fmt.Sprintf("the agent emitted a message of %d bytes that cannot be cut below 1 MiB: dropped", len(msg))})
		return
	}
	b.sendLogged(Event{Ev: EvMessage, Data: small})
}

// RequestPermission implements agent.Host.
func (b *bridge) RequestPermission(ctx context.Context, req agent.PermissionRequest) (agent.PermissionDecision, error) {
	if req.RequestID == "" {
		req.RequestID = rand.Text()
	}
	// A phone shows the whole input it approves: one too large to send is
	// denied rather than cut.
	if len(req.Input) > MaxMessage {
		return agent.PermissionDecision{Behavior: "deny", Message: fmt.Sprintf("tether denied this tool call: its input of %d bytes is larger than the 1 MiB a phone can be shown", len(req.Input))}, nil
	}
	ch := make(chan agent.PermissionDecision, 1)
	b.mu.Lock()
	b.pending[req.RequestID] = ch
	b.mu.Unlock()
	if err := b.send(Event{Ev: EvPermissionRequest, Request: &req}); err != nil {
		b.forget(req.RequestID)
		return agent.PermissionDecision{}, err
	}
	select {
	case d := <-ch:
		return d, nil
	case <-ctx.Done():
		if b.forget(req.RequestID) {
			b.sendLogged(Event{Ev: EvPermissionCancel, RequestID: req.RequestID})
		}
		return agent.PermissionDecision{}, ctx.Err()
	}
}

// forget drops a pending request and reports whether it was still pending.
func (b *bridge) forget(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.pending[id]
	delete(b.pending, id)
	return ok
}
