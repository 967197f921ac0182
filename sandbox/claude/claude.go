// Package claude is the claude-code agent adapter: it runs the Claude Code CLI
// as one long-lived process speaking stream-json on its standard input and
// output, passes the CLI's messages on untranslated and answers its
// permission control requests through the host.
//
// The process is started lazily by the first Query as
//
//	claude -p --input-format stream-json --output-format stream-json --verbose
//	  --permission-prompt-tool stdio --include-partial-messages
//	  [--model MODEL] [--resume SESSION_ID]
//
// and restarted with --resume when it has died. Every output line goes to
// Host.Emit except the control traffic, which the adapter handles itself:
// can_use_tool requests become Host.RequestPermission calls, a
// control_cancel_request withdraws the matching one, and any other request
// from the CLI is refused with an error response so that it never waits.
package claude

import (
	"context"
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
)

var (
	// ErrClosed is returned by Query after Close.
	ErrClosed = errors.New("claude: adapter closed")
	// ErrExited is returned by Query when the CLI process ended during the
	// turn; the next Query starts a new one that resumes the conversation.
	ErrExited = errors.New("claude: process exited")
	// ErrNoBin is returned by New when Options.Bin is empty.
	ErrNoBin = errors.New("claude: no CLI binary given")
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
	// Env is the CLI's whole environment (ANTHROPIC_API_KEY, HOME, PATH, …);
	// nil means the caller's environment.
	Env []string
	// Model, when set, is passed as --model.
	Model string
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
}

// adapter is the agent.Agent that New returns.
type adapter struct {
	opts Options
	log  *slog.Logger
	// turn holds one token; a Query owns it while it runs.
	turn chan struct{}
	// interrupts numbers the adapter's own control requests.
	interrupts atomic.Uint64

	mu        sync.Mutex
	proc      *process
	sessionID string
	closed    bool
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
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &adapter{
		opts:      opts,
		log:       log,
		turn:      make(chan struct{}, 1),
		sessionID: opts.ResumeID,
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
	p, err := startProcess(a.opts, a.sessionID, a.log)
	if err != nil {
		return nil, err
	}
	a.proc = p
	return p, nil
}
