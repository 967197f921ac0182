package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

// Messages the CLI gets as the tool_result when a permission question ends
// without an answer of the host's own.
const (
	msgInterrupted     = "The user interrupted this turn."
	msgNoDecision      = "No permission decision could be obtained."
	msgDenied          = "The user denied this tool use."
	msgInvalidDecision = "The permission decision was invalid."
)

// turn is one Query in progress: it reads the CLI's output until the result
// line and runs the permission questions asked meanwhile.
type turn struct {
	a    *adapter
	p    *process
	host agent.Host
	ctx  context.Context

	wg      sync.WaitGroup
	mu      sync.Mutex
	pending map[string]*pendingPermission
}

// pendingPermission is a can_use_tool request that the host has not answered
// yet.
type pendingPermission struct {
	cancel context.CancelFunc
	// withdrawn is set when the CLI cancelled the request (or the turn
	// ended): no answer is sent then.
	withdrawn bool
}

// run reads output lines until the turn's result, the process's end or, after
// an interrupt, the interrupt timeout.
func (t *turn) run() error {
	cancelled := t.ctx.Done()
	var deadline <-chan time.Time
	for {
		select {
		case b, ok := <-t.p.lines:
			if !ok {
				return t.exitError()
			}
			if t.handle(b) {
				if deadline != nil {
					return t.ctx.Err()
				}
				return nil
			}
		case <-cancelled:
			cancelled = nil
			if err := t.p.send(t.a.newControl(controlBody{Subtype: "interrupt"})); err != nil {
				t.a.log.Warn("claude: sending interrupt", "err", err)
			}
			timer := time.NewTimer(t.a.opts.InterruptTimeout)
			defer timer.Stop()
			deadline = timer.C
		case <-deadline:
			t.a.log.Warn("claude: no result after interrupt; killing the CLI", "timeout", t.a.opts.InterruptTimeout)
			if err := t.p.kill(); err != nil {
				t.a.log.Error("claude: killing CLI", "err", err)
			}
			return fmt.Errorf("claude: no result %v after interrupt: %w", t.a.opts.InterruptTimeout, t.ctx.Err())
		}
	}
}

func (t *turn) exitError() error {
	if err := t.p.waitErr(); err != nil {
		return fmt.Errorf("%w: %w", ErrExited, err)
	}
	return fmt.Errorf("%w before the turn's result", ErrExited)
}

// handle acts on one output line and tells whether it was the turn's result.
func (t *turn) handle(b []byte) bool {
	l, err := parseLine(b)
	if err != nil {
		t.a.log.Warn("claude: dropping output line", "err", err, "line", truncate(b, 200))
		return false
	}
	switch l.Type {
	case "control_request":
		t.controlRequest(l)
		return false
	case "control_cancel_request":
		t.withdraw(l.RequestID)
		return false
	case "control_response":
		var r struct {
			RequestID string `json:"request_id"`
		}
		// One that cannot be read has no request id of ours: it is
		// delivered, and its waiter (if any) sees the bad response.
		_ = json.Unmarshal(l.Response, &r)
		if strings.HasPrefix(r.RequestID, initializePrefix) {
			t.host.Emit(json.RawMessage(b))
		} else {
			t.a.deliver(l)
		}
		return false
	}
	t.a.observe(l)
	if l.SessionID != "" && (l.Type == "result" || (l.Type == "system" && l.Subtype == "init")) {
		t.a.setSessionID(l.SessionID)
	}
	t.host.Emit(json.RawMessage(b))
	return l.Type == "result"
}

// controlRequest answers a control_request of the CLI: can_use_tool goes to
// the host, anything else is refused at once.
func (t *turn) controlRequest(l line) {
	req, err := parseControlRequest(l.Request)
	if err != nil || req.Subtype != "can_use_tool" {
		t.a.log.Info("claude: refusing control request", "subtype", req.Subtype, "request_id", l.RequestID, "err", err)
		t.reply(errorResponse(l.RequestID, fmt.Sprintf("tether does not handle control_request subtype %q", req.Subtype)))
		return
	}
	input := req.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	pr := agent.PermissionRequest{RequestID: l.RequestID, ToolName: req.ToolName, Input: input, ToolUseID: req.ToolUseID}
	ctx, cancel := context.WithCancel(t.ctx)
	pp := &pendingPermission{cancel: cancel}
	t.mu.Lock()
	if _, dup := t.pending[l.RequestID]; dup {
		t.mu.Unlock()
		cancel()
		t.a.log.Debug("claude: duplicate can_use_tool", "request_id", l.RequestID)
		return
	}
	t.pending[l.RequestID] = pp
	t.mu.Unlock()
	t.wg.Add(1)
	go t.askPermission(ctx, pp, pr)
}

// askPermission asks the host and writes its answer back, unless the CLI
// withdrew the question meanwhile.
func (t *turn) askPermission(ctx context.Context, pp *pendingPermission, pr agent.PermissionRequest) {
	defer t.wg.Done()
	dec, err := t.host.RequestPermission(ctx, pr)
	t.mu.Lock()
	withdrawn := pp.withdrawn
	delete(t.pending, pr.RequestID)
	t.mu.Unlock()
	pp.cancel()
	if withdrawn {
		t.a.log.Debug("claude: permission request withdrawn", "request_id", pr.RequestID)
		return
	}
	if err != nil {
		t.a.log.Info("claude: permission request ended without decision", "request_id", pr.RequestID, "err", err)
	}
	t.reply(successResponse(pr.RequestID, decide(pr.Input, dec, err)))
}

// decide turns the host's answer into the CLI's permission result. Allowing
// without updatedInput sends the original input, which the CLI requires.
func decide(input json.RawMessage, d agent.PermissionDecision, err error) permissionResult {
	switch {
	case errors.Is(err, context.Canceled):
		return permissionResult{Behavior: "deny", Message: msgInterrupted}
	case err != nil:
		return permissionResult{Behavior: "deny", Message: msgNoDecision}
	case d.Behavior == "allow":
		in := d.UpdatedInput
		if len(bytes.TrimSpace(in)) == 0 || string(in) == "null" {
			in = input
		}
		if !isObject(in) {
			return permissionResult{Behavior: "deny", Message: msgInvalidDecision}
		}
		return permissionResult{Behavior: "allow", UpdatedInput: in}
	case d.Behavior == "deny":
		msg := d.Message
		if msg == "" {
			msg = msgDenied
		}
		return permissionResult{Behavior: "deny", Message: msg}
	default:
		return permissionResult{Behavior: "deny", Message: msgInvalidDecision}
	}
}

// isObject tells whether b is a JSON object.
func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// withdraw cancels the pending request id after a control_cancel_request.
func (t *turn) withdraw(id string) {
	t.mu.Lock()
	pp := t.pending[id]
	if pp != nil {
		pp.withdrawn = true
	}
	t.mu.Unlock()
	if pp == nil {
		t.a.log.Debug("claude: cancel for no pending request", "request_id", id)
		return
	}
	pp.cancel()
}

// finish withdraws the questions still pending when the turn ends and waits
// for their goroutines, so that the host is not called after Query returns.
func (t *turn) finish() {
	t.mu.Lock()
	for _, pp := range t.pending {
		pp.withdrawn = true
		pp.cancel()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

func (t *turn) reply(v controlResponse) {
	if err := t.p.send(v); err != nil {
		t.a.log.Warn("claude: answering control request", "request_id", v.Response.RequestID, "err", err)
	}
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
