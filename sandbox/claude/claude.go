// Package claude is the claude-code agent adapter: it runs the Claude Code CLI
// as one long-lived process speaking stream-json on its standard input and
// output, passes the CLI's messages on untranslated and answers its
// permission control requests through the host.
//
// The process is started lazily by the first Query as
//
//	claude -p --input-format stream-json --output-format stream-json --verbose
//	  --permission-prompt-tool stdio --include-partial-messages
//	  [--model MODEL] [--permission-mode MODE] [--resume SESSION_ID]
//
// and restarted with --resume when it has died. Each new process is first
// sent an "initialize" control request (and "set_max_thinking_tokens" when
// a thinking budget is set). Every output line goes to Host.Emit except the
// control traffic, which the adapter handles itself: can_use_tool requests
// become Host.RequestPermission calls, a control_cancel_request withdraws
// the matching one, and any other request from the CLI is refused with an
// error response so that it never waits. Of the control responses, only
// the initialize's is passed on (whole: it lists the models and slash
// commands the CLI offers); the others answer the adapter's own requests.
//
// Configure changes the settings of a running CLI with the control
// requests "set_model", "set_permission_mode" and "set_max_thinking_tokens";
// a CLI started later gets them as arguments.
package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

// Default timeouts of Options.
const (
	DefaultInterruptTimeout = 2 * time.Second
	DefaultStopTimeout      = 3 * time.Second
	DefaultControlTimeout   = 10 * time.Second
)

var (
	// ErrClosed is returned by Query after Close.
	ErrClosed = errors.New("claude: adapter closed")
	// ErrExited is returned by Query when the CLI process ended during the
	// turn; the next Query starts a new one that resumes the conversation.
	ErrExited = errors.New("claude: process exited")
	// ErrNoBin is returned by New when Options.Bin is empty.
	ErrNoBin = errors.New("claude: no CLI binary given")
	// ErrRefused is returned by Configure when the CLI answered a control
	// request with an error.
	ErrRefused = errors.New("claude: the CLI refused the request")
)

// Options configure the adapter.
type Options struct {
	// Bin is the path of the claude executable. Required.
	Bin string
	// WorkDir is the CLI's working directory; empty means the caller's.
	WorkDir string
	// ResumeID is the Claude Code session id to resume; empty starts a new
	// conversation.
	ResumeID string
	// NewSessionID, when ResumeID is empty, is the id the new conversation
	// takes (--session-id): a session a terminal named before anyone
	// prompted it. Processes started later resume it.
	NewSessionID string
	// Env is the CLI's whole environment (ANTHROPIC_API_KEY, HOME, PATH, …);
	// nil means the caller's environment.
	Env []string
	// Settings are the CLI's settings to start with: Model is passed as
	// --model, PermissionMode as --permission-mode, MaxThinkingTokens with
	// a control request.
	Settings agent.Settings
	// MCPConfig is the MCP servers the CLI starts besides the user's own
	// (--mcp-config): a run's tools, as JSON ([MCPConfig] makes it) or the
	// path of a file that holds it.
	MCPConfig string
	// AllowedTools are tools the CLI uses without asking (--allowedTools):
	// tether's own run tools, which reach nothing but the run.
	AllowedTools []string
	// Logger receives the CLI's standard error and the adapter's own
	// diagnostics; nil discards them.
	Logger *slog.Logger
	// InterruptTimeout bounds the wait for the CLI's result after an
	// interrupt; past it the process is killed (the next Query resumes the
	// conversation in a new one). Zero means DefaultInterruptTimeout.
	InterruptTimeout time.Duration
	// StopTimeout is how long Close waits for the CLI to exit after its input
	// is closed, and again after SIGTERM, before killing it. Zero means
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// ControlTimeout bounds the wait for the CLI's answer to each of
	// Configure's control requests, so that a CLI that does not answer
	// never keeps the next turn waiting. Zero means DefaultControlTimeout.
	ControlTimeout time.Duration
}

// MCPConfig returns the --mcp-config JSON that names servers by name.
func MCPConfig(servers map[string]agent.MCPServer) (string, error) {
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		return "", fmt.Errorf("claude: mcp config: %w", err)
	}
	return string(b), nil
}

// adapter is the agent.Agent that New returns.
type adapter struct {
	opts Options
	log  *slog.Logger
	// turn holds one token; a Query owns it while it runs.
	turn chan struct{}
	// controls numbers the adapter's own control requests.
	controls atomic.Uint64
	// configuring serialises Configure calls.
	configuring sync.Mutex

	mu        sync.Mutex
	proc      *process
	sessionID string
	settings  agent.Settings
	closed    bool
	// waiters are the adapter's control requests waiting for their
	// response, by request id.
	waiters map[string]chan error
}

// New returns a claude-code adapter. It starts nothing: the CLI process is
// started by the first Query.
func New(opts Options) (agent.Agent, error) {
	if opts.Bin == "" {
		return nil, ErrNoBin
	}
	if opts.InterruptTimeout <= 0 {
		opts.InterruptTimeout = DefaultInterruptTimeout
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	if opts.ControlTimeout <= 0 {
		opts.ControlTimeout = DefaultControlTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &adapter{
		opts:      opts,
		log:       log,
		turn:      make(chan struct{}, 1),
		sessionID: opts.ResumeID,
		settings:  opts.Settings,
		waiters:   map[string]chan error{},
	}, nil
}

// Query sends prompt as a user message and passes the CLI's output to host
// until the turn's result line. Cancelling ctx interrupts the turn: the CLI is
// asked to stop, its result is passed on, and Query returns ctx's error. Turns
// run one at a time; a second Query waits for the first.
func (a *adapter) Query(ctx context.Context, prompt string, host agent.Host) error {
	return a.QueryImages(ctx, prompt, nil, host)
}

// QueryImages is Query with images, sent as image content blocks before
// the prompt's text in the same user message.
func (a *adapter) QueryImages(ctx context.Context, prompt string, images []agent.Image, host agent.Host) error {
	select {
	case a.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-a.turn }()
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := a.process()
	if err != nil {
		return err
	}
	if err := p.send(newUserMessage(prompt, images)); err != nil {
		return fmt.Errorf("claude: send prompt: %w", err)
	}
	t := &turn{a: a, p: p, host: host, ctx: ctx, pending: make(map[string]*pendingPermission)}
	defer t.finish()
	return t.run()
}

// SessionID returns the CLI's session id as last reported by a system/init
// or result line, or Options.ResumeID before that.
func (a *adapter) SessionID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessionID
}

func (a *adapter) setSessionID(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sessionID = id
}

// Close ends the CLI process, if one runs: it closes its input, then sends
// SIGTERM and at last SIGKILL to its process group, and reaps it. Close is
// idempotent; Query fails with ErrClosed afterwards.
func (a *adapter) Close() error {
	a.mu.Lock()
	p := a.proc
	a.proc = nil
	a.closed = true
	a.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.stop(a.opts.StopTimeout)
}

// process returns the running CLI process, starting one (resuming the
// conversation, if there is one) when none runs.
func (a *adapter) process() (*process, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	if a.proc != nil && !a.proc.exited() {
		return a.proc, nil
	}
	if a.proc != nil {
		a.log.Info("claude: restarting exited CLI", "resume", a.sessionID, "err", a.proc.waitErr())
	}
	p, err := startProcess(a.opts, a.settings, a.sessionID, a.log)
	if err != nil {
		return nil, err
	}
	a.proc = p
	if a.sessionID == "" {
		a.sessionID = a.opts.NewSessionID
	}
	start := []controlBody{{Subtype: "initialize"}}
	if n := a.settings.MaxThinkingTokens; n > 0 {
		start = append(start, controlBody{Subtype: "set_max_thinking_tokens", MaxThinkingTokens: &n})
	}
	for _, body := range start {
		if err := p.send(a.newControl(body)); err != nil {
			a.log.Warn("claude: sending a control request", "subtype", body.Subtype, "err", err)
		}
	}
	return p, nil
}

// newControl is a control request of the adapter's own, with a fresh id;
// an initialize's id says so, for the turn to pass its response on.
func (a *adapter) newControl(body controlBody) controlRequestLine {
	prefix := controlPrefix
	if body.Subtype == "initialize" {
		prefix = initializePrefix
	}
	return controlRequestLine{Type: "control_request", RequestID: fmt.Sprintf("%s%d", prefix, a.controls.Add(1)), Request: body}
}

// Configure implements agent.Configurable. A running CLI is sent a
// control request for each setting that changes, and Configure returns
// once it has answered them all (during a turn, the turn reads the
// answers; between turns, Configure does); the settings that were
// applied are kept even when a later one fails. Without a running CLI, or
// when it exits before answering, the settings are kept for the next
// one's command line.
func (a *adapter) Configure(ctx context.Context, s agent.Settings) (agent.Settings, error) {
	a.configuring.Lock()
	defer a.configuring.Unlock()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return agent.Settings{}, ErrClosed
	}
	p, cur := a.proc, a.settings
	if p == nil || p.exited() {
		a.settings = s
		a.mu.Unlock()
		return s, nil
	}
	a.mu.Unlock()
	got, err := a.configure(ctx, p, cur, s)
	if errors.Is(err, ErrExited) {
		// The CLI is gone: the next one starts with the settings.
		a.keep(func(st *agent.Settings) { *st = s })
		return s, nil
	}
	return got, err
}

// configure sends p a control request for each setting of s that differs
// from cur, and returns the settings p then has.
func (a *adapter) configure(ctx context.Context, p *process, cur, s agent.Settings) (agent.Settings, error) {
	if s.Model != cur.Model {
		model := s.Model
		if model == "" {
			model = "default"
		}
		if err := a.control(ctx, p, controlBody{Subtype: "set_model", Model: model}); err != nil {
			return cur, err
		}
		cur.Model = s.Model
		a.keep(func(st *agent.Settings) { st.Model = s.Model })
	}
	if s.PermissionMode != cur.PermissionMode {
		mode := s.PermissionMode
		if mode == "" {
			mode = "default"
		}
		if err := a.control(ctx, p, controlBody{Subtype: "set_permission_mode", Mode: mode}); err != nil {
			return cur, err
		}
		cur.PermissionMode = s.PermissionMode
		a.keep(func(st *agent.Settings) { st.PermissionMode = s.PermissionMode })
	}
	if s.MaxThinkingTokens != cur.MaxThinkingTokens {
		var n *int
		if s.MaxThinkingTokens > 0 {
			n = &s.MaxThinkingTokens
		}
		if err := a.control(ctx, p, controlBody{Subtype: "set_max_thinking_tokens", MaxThinkingTokens: n, nullTokens: n == nil}); err != nil {
			return cur, err
		}
		cur.MaxThinkingTokens = s.MaxThinkingTokens
		a.keep(func(st *agent.Settings) { st.MaxThinkingTokens = s.MaxThinkingTokens })
	}
	return cur, nil
}

// keep changes the settings a restarted CLI gets.
func (a *adapter) keep(change func(*agent.Settings)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	change(&a.settings)
}

// control sends one control request to p and waits for its response: a
// running turn delivers it; when none runs, control takes the turn's place
// and reads p's output itself until the response comes.
func (a *adapter) control(ctx context.Context, p *process, body controlBody) error {
	ctx, cancel := context.WithTimeout(ctx, a.opts.ControlTimeout)
	defer cancel()
	req := a.newControl(body)
	ch := make(chan error, 1)
	a.mu.Lock()
	a.waiters[req.RequestID] = ch
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.waiters, req.RequestID)
		a.mu.Unlock()
	}()
	if err := p.send(req); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case a.turn <- struct{}{}:
		defer func() { <-a.turn }()
		for {
			select {
			case err := <-ch:
				return err
			case b, ok := <-p.lines:
				if !ok {
					return fmt.Errorf("%w before answering %s", ErrExited, body.Subtype)
				}
				a.betweenTurns(b)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// betweenTurns acts on an output line read while no turn runs: control
// responses are delivered, the settings the CLI reports kept, the rest
// (the CLI's note that the model changed) has no turn to go to.
func (a *adapter) betweenTurns(b []byte) {
	l, err := parseLine(b)
	if err != nil {
		a.log.Warn("claude: dropping output line", "err", err, "line", truncate(b, 200))
		return
	}
	if l.Type == "control_response" {
		a.deliver(l)
		return
	}
	a.observe(l)
	a.log.Debug("claude: output between turns", "line", truncate(b, 200))
}

// deliver hands a control response to the request waiting for it.
func (a *adapter) deliver(l line) {
	var r struct {
		Subtype   string `json:"subtype"`
		RequestID string `json:"request_id"`
		Error     string `json:"error"`
	}
	if json.Unmarshal(l.Response, &r) != nil {
		return
	}
	a.mu.Lock()
	ch := a.waiters[r.RequestID]
	a.mu.Unlock()
	if ch == nil {
		a.log.Debug("claude: control response", "request_id", r.RequestID, "subtype", r.Subtype, "error", r.Error)
		return
	}
	var err error
	if r.Subtype != "success" {
		err = fmt.Errorf("%w: %s", ErrRefused, r.Error)
	}
	select {
	case ch <- err:
	default:
	}
}

// observe keeps the permission mode the CLI reports (it leaves plan mode
// by itself when a plan is approved), so that a restarted CLI starts in it.
func (a *adapter) observe(l line) {
	if l.Type == "system" && (l.Subtype == "status" || l.Subtype == "init") && l.PermissionMode != "" {
		a.keep(func(st *agent.Settings) {
			if st.PermissionMode != "" || l.PermissionMode != "default" {
				st.PermissionMode = l.PermissionMode
			}
		})
	}
}
