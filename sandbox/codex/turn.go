package codex

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

// callTimeout bounds the adapter's own requests during a turn (turn/start,
// turn/steer, turn/interrupt).
const callTimeout = 10 * time.Second

// turn is one Query in progress: it starts a Codex turn, translates what
// the app-server reports until the turn completes, and runs the approval
// requests asked meanwhile.
type turn struct {
	a      *adapter
	p      *process
	host   agent.Host
	ctx    context.Context
	thread string
	id     string

	// tools are the tool calls announced to the host, by item id, with the
	// input shown: an approval request names only the item.
	tools    map[string]toolCall
	streamed map[string]bool // agentMessage items whose text came in deltas
	last     string          // the turn's last agentMessage text
	usage    tokenUsage      // the turn's model calls' tokens so far

	wg      sync.WaitGroup
	mu      sync.Mutex
	pending map[string]*pendingApproval // by the server's request id
}

// toolCall is a tool call as announced to the host.
type toolCall struct {
	name  string
	input json.RawMessage
}

// pendingApproval is an approval request the host has not answered yet.
type pendingApproval struct {
	cancel context.CancelFunc
	// withdrawn is set when the server resolved the request itself (or
	// the turn ended): no answer is sent then.
	withdrawn bool
}

// run starts the turn (with model, unless "") and reads the app-server
// until the turn completes, the app-server ends or, after an interrupt,
// the interrupt timeout. The turn's system/init message carries info (the
// model and the CLI's version, under stream-json's names).
func (t *turn) run(prompt, model string, info map[string]any) error {
	defer t.finish()
	params := map[string]any{"threadId": t.thread, "input": []map[string]string{{"type": "text", "text": prompt}}}
	if model != "" {
		params["model"] = model
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), callTimeout)
	res, err := t.p.call(ctx, "turn/start", params)
	cancel()
	if err != nil {
		return fmt.Errorf("codex: turn/start: %w", err)
	}
	var r struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	if json.Unmarshal(res, &r) != nil || r.Turn.ID == "" {
		return fmt.Errorf("codex: turn/start answered no turn id: %s", truncate(res, 200))
	}
	t.id = r.Turn.ID
	initMsg := map[string]any{"type": "system", "subtype": "init", "session_id": t.thread}
	for k, v := range info {
		initMsg[k] = v
	}
	t.emit(initMsg)

	cancelled := t.ctx.Done()
	var deadline <-chan time.Time
	for {
		select {
		case <-t.p.ready:
			if t.drain() {
				return t.ended()
			}
		case <-t.p.gone:
			if t.drain() {
				return t.ended()
			}
			return fmt.Errorf("%w before the turn completed (%v)", ErrExited, t.p.err)
		case <-cancelled:
			cancelled = nil
			go t.interrupt()
			timer := time.NewTimer(t.a.opts.InterruptTimeout)
			defer timer.Stop()
			deadline = timer.C
		case <-deadline:
			t.a.log.Warn("codex: the turn did not end after interrupt; stopping the app-server", "timeout", t.a.opts.InterruptTimeout)
			t.p.stop(0)
			return fmt.Errorf("codex: no turn end %v after interrupt: %w", t.a.opts.InterruptTimeout, t.ctx.Err())
		}
	}
}

// ended is what run returns once the turn completed: ctx's error after an
// interrupt, whose commands are then killed.
func (t *turn) ended() error {
	if err := t.ctx.Err(); err != nil {
		if n := t.p.killChildren(); n > 0 {
			t.a.log.Info("codex: killed the interrupted turn's commands", "processes", n)
		}
		return err
	}
	return nil
}

func (t *turn) interrupt() {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := t.p.call(ctx, "turn/interrupt", map[string]string{"threadId": t.thread, "turnId": t.id}); err != nil {
		t.a.log.Warn("codex: turn/interrupt", "err", err)
	}
}

// drain handles the queued messages and tells whether the turn completed.
func (t *turn) drain() bool {
	done := false
	for _, m := range t.p.take() {
		if t.handle(m) {
			done = true
		}
	}
	return done
}

// handle acts on one request or notification of the server and tells
// whether it completed the turn.
func (t *turn) handle(m message) bool {
	if m.isRequest() {
		t.request(m)
		return false
	}
	switch m.Method {
	case "item/agentMessage/delta":
		var d deltaParams
		if json.Unmarshal(m.Params, &d) != nil || d.TurnID != t.id || d.Delta == "" {
			return false
		}
		if !t.streamed[d.ItemID] {
			t.streamed[d.ItemID] = true
			t.emit(streamEvent(map[string]any{"type": "message_start", "message": map[string]string{"id": d.ItemID}}))
		}
		t.emit(streamEvent(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": d.Delta}}))
	case "item/started":
		var ip itemParams
		if json.Unmarshal(m.Params, &ip) != nil || ip.TurnID != t.id {
			return false
		}
		if name, input, ok := toolOf(ip.Item); ok {
			t.tools[ip.Item.ID] = toolCall{name: name, input: input}
			t.emit(map[string]any{"type": "assistant", "message": map[string]any{"id": ip.Item.ID, "role": "assistant",
				"content": []any{map[string]any{"type": "tool_use", "id": ip.Item.ID, "name": name, "input": input}}}})
		}
	case "item/completed":
		var ip itemParams
		if json.Unmarshal(m.Params, &ip) != nil || ip.TurnID != t.id {
			return false
		}
		t.completed(ip.Item)
	case "thread/tokenUsage/updated":
		var u usageParams
		if json.Unmarshal(m.Params, &u) == nil && u.TurnID == t.id {
			l := u.TokenUsage.Last
			t.usage.InputTokens += l.InputTokens
			t.usage.CachedInputTokens += l.CachedInputTokens
			t.usage.OutputTokens += l.OutputTokens
		}
	case "serverRequest/resolved":
		var r struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &r) == nil {
			t.withdraw(string(r.RequestID))
		}
	case "error":
		var e errorParams
		if err := json.Unmarshal(m.Params, &e); err != nil {
			t.a.log.Warn("codex: error notification unreadable", "err", err)
			break
		}
		t.a.log.Warn("codex: error", "message", firstNonEmpty(e.Error.Message, e.Message))
	case "turn/completed":
		var tp turnParams
		if json.Unmarshal(m.Params, &tp) != nil || tp.Turn.ID != t.id {
			return false
		}
		t.result(tp)
		return true
	}
	return false
}

// completed reports a finished item: an answer's whole text, a tool's
// result.
func (t *turn) completed(it item) {
	switch it.Type {
	case "agentMessage":
		if t.streamed[it.ID] {
			t.emit(streamEvent(map[string]any{"type": "message_stop"}))
		}
		if it.Text != "" {
			t.last = it.Text
		}
		t.emit(map[string]any{"type": "assistant", "message": map[string]any{"id": it.ID, "role": "assistant",
			"content": []any{map[string]string{"type": "text", "text": it.Text}}}})
	case "commandExecution", "fileChange", "mcpToolCall":
		if _, ok := t.tools[it.ID]; !ok {
			return
		}
		delete(t.tools, it.ID)
		content, isErr := resultOf(it)
		t.emit(map[string]any{"type": "user", "message": map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "tool_result", "tool_use_id": it.ID, "content": content, "is_error": isErr}}}})
	}
}

// result emits the turn's result: its status, its last answer and the
// tokens it used.
func (t *turn) result(tp turnParams) {
	subtype, isErr, text := "success", false, t.last
	switch tp.Turn.Status {
	case "interrupted":
		subtype = "error_during_execution"
	case "failed":
		subtype, isErr = "error", true
		if tp.Turn.Error != nil {
			text = tp.Turn.Error.Message
		}
	}
	t.emit(map[string]any{"type": "result", "subtype": subtype, "is_error": isErr, "result": text,
		"session_id": t.thread, "num_turns": 1, "duration_ms": tp.Turn.DurationMS, "total_cost_usd": 0,
		// Codex counts the cached tokens inside the input; tether's usage,
		// as Anthropic's, keeps them apart.
		"usage": map[string]int64{
			"input_tokens":            max(t.usage.InputTokens-t.usage.CachedInputTokens, 0),
			"output_tokens":           t.usage.OutputTokens,
			"cache_read_input_tokens": t.usage.CachedInputTokens,
		}})
}

// request answers a request of the server: approvals go to the host,
// anything else is refused so that it never waits.
func (t *turn) request(m message) {
	var kind string
	switch m.Method {
	case "item/commandExecution/requestApproval":
		kind = "command"
	case "item/fileChange/requestApproval":
		kind = "file change"
	default:
		t.a.log.Info("codex: refusing server request", "method", m.Method)
		t.send(errorResponse{ID: m.ID, Error: rpcError{Code: -32601, Message: "tether does not handle " + m.Method}})
		return
	}
	var ap approvalParams
	// What cannot be read stays empty: a request that names no known
	// item and no command is declined below.
	_ = json.Unmarshal(m.Params, &ap)
	call, ok := t.tools[ap.ItemID]
	if !ok {
		// Not announced (or of another turn): asked as what it claims.
		if kind != "command" || ap.Command == "" {
			t.send(response{ID: m.ID, Result: map[string]string{"decision": "decline"}})
			return
		}
		call = toolCall{name: "Bash", input: mustJSON(map[string]string{"command": innerCommand(ap.Command)})}
	}
	reqID := string(m.ID)
	ctx, cancel := context.WithCancel(t.ctx)
	pa := &pendingApproval{cancel: cancel}
	t.mu.Lock()
	if t.pending == nil {
		t.pending = map[string]*pendingApproval{}
	}
	t.pending[reqID] = pa
	t.mu.Unlock()
	t.wg.Add(1)
	go t.ask(ctx, pa, m.ID, agent.PermissionRequest{RequestID: "codex-" + t.id + "-" + reqID, ToolName: call.name, Input: call.input, ToolUseID: ap.ItemID})
}

// ask asks the host and answers the server, unless it resolved the request
// meanwhile. A rejection's reason, which Codex's decisions cannot carry,
// reaches the model as input steered into the running turn before the
// decline.
func (t *turn) ask(ctx context.Context, pa *pendingApproval, id json.RawMessage, pr agent.PermissionRequest) {
	defer t.wg.Done()
	d, err := t.host.RequestPermission(ctx, pr)
	t.mu.Lock()
	withdrawn := pa.withdrawn
	delete(t.pending, string(id))
	t.mu.Unlock()
	pa.cancel()
	if withdrawn {
		return
	}
	decision, steer := decide(pr.Input, d, err)
	if steer != "" {
		sctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		_, serr := t.p.call(sctx, "turn/steer", map[string]any{"threadId": t.thread, "expectedTurnId": t.id,
			"input": []map[string]string{{"type": "text", "text": steer}}})
		cancel()
		if serr != nil {
			t.a.log.Warn("codex: turn/steer with a rejection's reason", "err", serr)
		}
	}
	t.send(response{ID: id, Result: map[string]string{"decision": decision}})
}

// decide turns the host's answer into Codex's decision, and the text to
// steer into the turn with it ("" for none): "accept"; "decline" with the
// reason; "cancel", which ends the turn, when the turn was interrupted.
// Codex cannot run a changed call: an edit on the phone declines the call
// and tells the model what the user wants run instead.
func decide(input json.RawMessage, d agent.PermissionDecision, err error) (string, string) {
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		return "cancel", ""
	case err != nil:
		return "decline", "tether could not get a decision for this call; it was declined."
	case d.Behavior == "allow":
		if len(bytes.TrimSpace(d.UpdatedInput)) == 0 || string(d.UpdatedInput) == "null" || sameJSON(d.UpdatedInput, input) {
			return "accept", ""
		}
		return "decline", "The user did not approve this call as it was, but changed it to: " + string(d.UpdatedInput) + ". Run that instead if it still serves the task."
	case d.Message != "":
		return "decline", d.Message
	default:
		return "decline", ""
	}
}

// withdraw gives up the pending request id, which the server resolved
// itself.
func (t *turn) withdraw(id string) {
	t.mu.Lock()
	pa := t.pending[id]
	if pa != nil {
		pa.withdrawn = true
	}
	t.mu.Unlock()
	if pa != nil {
		pa.cancel()
	}
}

// finish withdraws the questions still pending when the turn ends and waits
// for their goroutines, so that the host is not called after Query returns.
func (t *turn) finish() {
	t.mu.Lock()
	for _, pa := range t.pending {
		pa.withdrawn = true
		pa.cancel()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

func (t *turn) send(v any) {
	if err := t.p.send(v); err != nil {
		t.a.log.Warn("codex: answering the app-server", "err", err)
	}
}

// emit passes one stream-json message to the host.
func (t *turn) emit(v map[string]any) {
	t.host.Emit(mustJSON(v))
}

func streamEvent(ev map[string]any) map[string]any {
	return map[string]any{"type": "stream_event", "event": ev}
}

// toolOf is the tool call an item stands for, as the host is shown it: a
// command as Bash, a file change as Write (one new file), Edit (one file
// changed) or apply_patch (several, or a deletion), with each file's diff;
// an MCP server's tool under Claude Code's name for it,
// mcp__SERVER__TOOL, with its arguments.
func toolOf(it item) (string, json.RawMessage, bool) {
	switch it.Type {
	case "mcpToolCall":
		input := it.Arguments
		if len(bytes.TrimSpace(input)) == 0 || string(input) == "null" {
			input = json.RawMessage("{}")
		}
		return "mcp__" + it.Server + "__" + it.Tool, input, true
	case "commandExecution":
		return "Bash", mustJSON(map[string]string{"command": innerCommand(it.Command)}), true
	case "fileChange":
		if len(it.Changes) == 1 {
			c := it.Changes[0]
			switch c.Kind.Type {
			case "add":
				return "Write", mustJSON(map[string]string{"file_path": c.Path, "content": c.Diff}), true
			case "update":
				return "Edit", mustJSON(map[string]string{"file_path": c.Path, "diff": c.Diff}), true
			}
		}
		changes := make([]map[string]string, 0, len(it.Changes))
		for _, c := range it.Changes {
			changes = append(changes, map[string]string{"path": c.Path, "kind": c.Kind.Type, "diff": c.Diff})
		}
		return "apply_patch", mustJSON(map[string]any{"changes": changes}), true
	}
	return "", nil, false
}

// resultOf is a finished tool item's result text and whether it failed.
func resultOf(it item) (string, bool) {
	if it.Type == "mcpToolCall" {
		return mcpResultOf(it)
	}
	switch it.Status {
	case "declined":
		return "Declined: it did not run.", true
	case "completed":
	default:
		out := "Failed (" + it.Status + ")."
		if it.AggregatedOutput != nil {
			out = *it.AggregatedOutput
		}
		return out, true
	}
	if it.Type == "fileChange" {
		return "Applied.", false
	}
	out := ""
	if it.AggregatedOutput != nil {
		out = *it.AggregatedOutput
	}
	if it.ExitCode != nil && *it.ExitCode != 0 {
		return out + fmt.Sprintf("\n(exit code %d)", *it.ExitCode), true
	}
	return out, false
}

// mcpResultOf is an MCP tool call's result: the text of its content (Codex
// reports a call the server refused, its arguments' validation, as failed
// with the server's text), or its error.
func mcpResultOf(it item) (string, bool) {
	var b strings.Builder
	if it.Result != nil {
		for _, c := range it.Result.Content {
			if c.Type == "text" {
				b.WriteString(c.Text)
			}
		}
	}
	if it.Error != nil && it.Error.Message != "" {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(it.Error.Message)
	}
	return b.String(), it.Status != "completed" || it.Error != nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return bytes.Equal(mustJSON(x), mustJSON(y))
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
