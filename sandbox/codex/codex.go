// Package codex is the codex agent adapter: it runs OpenAI's Codex CLI as
// `codex app-server`, which speaks JSON-RPC over its standard input and
// output (docs/codex-observed.md), and turns what it reports into the
// Claude Code stream-json messages every tether agent speaks to its host:
// streamed text, tool_use and tool_result blocks for its commands and file
// changes, and a result with the turn's usage. Its approval requests become
// Host.RequestPermission calls, a shell command as a Bash call (the command
// unwrapped from Codex's `/bin/bash -lc`), a file change as a Write, an
// Edit or, for several files, an apply_patch call.
//
// The app-server is started by the first Query as
//
//	codex app-server [-c KEY=VALUE]...
//
// with a thread started (or, with a ResumeID, resumed) with approval
// policy "untrusted" and Codex's own sandbox off ("danger-full-access"):
// tether's sandbox is the one the agent runs in, and every command is
// asked. An interrupt is turn/interrupt; the commands the turn left
// running are killed, since Codex does not stop them.
//
// MCP servers of tether's own (an agent-to-agent run's tools) are added as
// configuration overrides whose tools run without an approval request;
// their calls are shown as Claude Code shows an MCP tool's,
// mcp__SERVER__TOOL.
package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

// Default timeouts of Options.
const (
	DefaultInterruptTimeout = 2 * time.Second
	DefaultStopTimeout      = 3 * time.Second
	// DefaultStartTimeout bounds the app-server's handshake and the
	// thread's start.
	DefaultStartTimeout = 30 * time.Second
)

var (
	// ErrClosed is returned by Query after Close.
	ErrClosed = errors.New("codex: adapter closed")
	// ErrExited is returned by Query when the app-server ended during the
	// turn; the next Query starts a new one that resumes the thread.
	ErrExited = errors.New("codex: app-server exited")
	// ErrNoBin is returned by New when Options.Bin is empty.
	ErrNoBin = errors.New("codex: no CLI binary given")
)

// Options configure the adapter.
type Options struct {
	// Bin is the path of the codex executable (the native binary, or the
	// npm package's launcher). Required.
	Bin string
	// WorkDir is the thread's working directory; empty means the caller's.
	WorkDir string
	// ResumeID is the thread id to resume; empty starts a new thread.
	ResumeID string
	// Env is the CLI's whole environment (OPENAI_API_KEY, CODEX_HOME, HOME,
	// PATH, …); nil means the caller's.
	Env []string
	// Config are configuration overrides, each "key=value" with a TOML
	// value, passed as -c (a model provider).
	Config []string
	// MCPServers are MCP servers of tether's own the CLI starts, by name
	// (a bare TOML key): an agent-to-agent run's tools. Their tools run
	// without an approval request, as tether's own tools; the rest of
	// Codex's configuration is left alone. The command and arguments are
	// -c overrides; the environment's values, which may be secret (the
	// run relay's token), never reach a command line: they are added to
	// Env and named in the server's env_vars, which Codex passes on to it.
	MCPServers map[string]agent.MCPServer
	// Settings are the settings to start with. Codex takes the model
	// (sent with each turn); it has no permission modes nor a thinking
	// budget of Claude Code's kind, and those are dropped with a warning.
	Settings agent.Settings
	// Logger receives the CLI's standard error and the adapter's own
	// diagnostics; nil discards them.
	Logger *slog.Logger
	// InterruptTimeout bounds the wait for the turn's end after an
	// interrupt; past it the app-server is stopped (the next Query resumes
	// the thread in a new one). Zero means DefaultInterruptTimeout.
	InterruptTimeout time.Duration
	// keep are the command lines of the MCP servers of MCPServers, which
	// the app-server runs as its children for the thread's life.
	keep [][]string
	// StopTimeout is how long Close waits for the app-server to exit after
	// its input is closed, and again after SIGTERM. Zero means
	// DefaultStopTimeout.
	StopTimeout time.Duration
}

// adapter is the agent.Agent that New returns.
type adapter struct {
	opts Options
	log  *slog.Logger
	// turn holds one token; a Query owns it while it runs.
	turn chan struct{}

	mu       sync.Mutex
	proc     *process
	threadID string
	started  bool // threadID belongs to proc (started or resumed there)
	closed   bool
	// model is the model each turn asks for; "" leaves Codex's own,
	// threadModel, which the thread reported at its start.
	model, threadModel string
	// version is the CLI's, from its user agent.
	version string
}

// New returns a codex adapter, an agent.Configurable. It starts nothing: the app-server is started
// by the first Query.
func New(opts Options) (agent.Configurable, error) {
	if opts.Bin == "" {
		return nil, ErrNoBin
	}
	if opts.InterruptTimeout <= 0 {
		opts.InterruptTimeout = DefaultInterruptTimeout
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if s := opts.Settings; s.PermissionMode != "" || s.MaxThinkingTokens != 0 {
		log.Warn("codex: ignoring settings Codex does not have", "permission_mode", s.PermissionMode, "max_thinking_tokens", s.MaxThinkingTokens)
	}
	if err := withMCPServers(&opts); err != nil {
		return nil, err
	}
	return &adapter{opts: opts, log: log, turn: make(chan struct{}, 1), threadID: opts.ResumeID, model: opts.Settings.Model}, nil
}

// withMCPServers adds opts.MCPServers to opts.Config and their
// environment to opts.Env (the caller's when nil), and records their
// command lines, which the killing of an interrupted turn's commands
// spares.
func withMCPServers(opts *Options) error {
	if len(opts.MCPServers) == 0 {
		return nil
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	opts.Env = slices.Clone(opts.Env)
	opts.Config = slices.Clone(opts.Config)
	for _, name := range slices.Sorted(maps.Keys(opts.MCPServers)) {
		srv := opts.MCPServers[name]
		if !bareKey.MatchString(name) || srv.Command == "" {
			return fmt.Errorf("codex: MCP server %q: a name of letters, digits, - and _ and a command are needed", name)
		}
		vars := slices.Sorted(maps.Keys(srv.Env))
		for _, k := range vars {
			opts.Env = append(opts.Env, k+"="+srv.Env[k])
		}
		key := "mcp_servers." + name + "."
		opts.Config = append(opts.Config,
			key+"command="+tomlValue(srv.Command),
			key+"args="+tomlValue(append([]string{}, srv.Args...)),
			key+"env_vars="+tomlValue(append([]string{}, vars...)),
			key+`default_tools_approval_mode="approve"`)
		opts.keep = append(opts.keep, append([]string{srv.Command}, srv.Args...))
	}
	return nil
}

// bareKey is a TOML bare key.
var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// tomlValue is v, a string or a list of strings, as a TOML value: JSON's
// strings and arrays of them are TOML's too.
func tomlValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// errUnsupported refuses a setting Codex does not have.
var errUnsupported = errors.New("codex: Codex has no permission modes nor a thinking budget; only the model can be set")

// Configure sets the model the next turns ask for. A permission mode other
// than "default" or a thinking budget is refused: Codex has neither (its
// approvals are tether's own policy's to decide).
func (a *adapter) Configure(_ context.Context, s agent.Settings) (agent.Settings, error) {
	if (s.PermissionMode != "" && s.PermissionMode != "default") || s.MaxThinkingTokens != 0 {
		return agent.Settings{}, errUnsupported
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.model = s.Model
	return agent.Settings{Model: a.model}, nil
}

// Query runs one turn with prompt on the thread. Cancelling ctx interrupts
// it: the turn ends, its commands are killed, and Query returns ctx's
// error. Turns run one at a time; a second Query waits for the first.
func (a *adapter) Query(ctx context.Context, prompt string, host agent.Host) error {
	select {
	case a.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-a.turn }()
	if err := ctx.Err(); err != nil {
		return err
	}
	p, thread, err := a.thread(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	model, shown, version := a.model, a.model, a.version
	if shown == "" {
		shown = a.threadModel
	}
	a.mu.Unlock()
	t := &turn{a: a, p: p, host: host, ctx: ctx, thread: thread, tools: map[string]toolCall{}, streamed: map[string]bool{}}
	return t.run(prompt, model, map[string]any{"model": shown, "claude_code_version": version})
}

// SessionID returns the thread's id, or Options.ResumeID before the first
// turn.
func (a *adapter) SessionID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.threadID
}

// Close ends the app-server, if one runs, and the commands it left.
// Close is idempotent; Query fails with ErrClosed afterwards.
func (a *adapter) Close() error {
	a.mu.Lock()
	p := a.proc
	a.proc = nil
	a.closed = true
	a.mu.Unlock()
	if p != nil {
		p.stop(a.opts.StopTimeout)
	}
	return nil
}

// thread returns the running app-server and the thread's id, starting the
// app-server and starting or resuming the thread when none runs.
func (a *adapter) thread(ctx context.Context) (*process, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, "", ErrClosed
	}
	if a.proc != nil && !a.proc.exited() && a.started {
		return a.proc, a.threadID, nil
	}
	if a.proc != nil {
		a.log.Info("codex: restarting exited app-server", "resume", a.threadID, "err", a.proc.err)
		a.proc.stop(a.opts.StopTimeout)
		a.proc = nil
	}
	p, err := startProcess(a.opts, a.log)
	if err != nil {
		return nil, "", err
	}
	sctx, cancel := context.WithTimeout(ctx, DefaultStartTimeout)
	defer cancel()
	id, err := a.open(sctx, p)
	if err != nil {
		p.stop(a.opts.StopTimeout)
		return nil, "", err
	}
	a.proc, a.threadID, a.started = p, id, true
	return p, id, nil
}

// open runs the app-server's handshake and starts the thread, or resumes
// a.threadID, and returns its id.
func (a *adapter) open(ctx context.Context, p *process) (string, error) {
	init, err := p.call(ctx, "initialize", map[string]any{"clientInfo": map[string]string{"name": "tether", "title": "tether", "version": "1"}})
	if err != nil {
		return "", fmt.Errorf("codex: initialize: %w", err)
	}
	var ir struct {
		UserAgent string `json:"userAgent"`
	}
	// The version is for display only: an answer without a readable
	// user agent leaves it empty.
	_ = json.Unmarshal(init, &ir)
	// "tether/0.169.0 (Debian 12.0.0; x86_64) …": the CLI's version
	// after the client's name.
	if _, rest, ok := strings.Cut(ir.UserAgent, "/"); ok {
		a.version, _, _ = strings.Cut(rest, " ")
	}
	if err := p.send(request{Method: "initialized"}); err != nil {
		return "", err
	}
	params := map[string]any{"cwd": a.opts.WorkDir, "approvalPolicy": "untrusted", "sandbox": "danger-full-access"}
	method := "thread/start"
	if a.threadID != "" {
		method, params["threadId"] = "thread/resume", a.threadID
	}
	res, err := p.call(ctx, method, params)
	if err != nil {
		return "", fmt.Errorf("codex: %s: %w", method, err)
	}
	var r struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		Model string `json:"model"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Thread.ID == "" {
		return "", fmt.Errorf("codex: %s answered no thread id: %s", method, truncate(res, 200))
	}
	a.threadModel = r.Model
	return r.Thread.ID, nil
}
