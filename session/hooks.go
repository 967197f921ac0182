package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"

	"github.com/tetherdev/tether/hooks"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// The Manager is the hook endpoint's broker: Claude Code sessions started in
// a terminal become observed sessions (source "hooks") and their tool
// questions go through the same approvals as sandboxed agents'.
var _ hooks.Broker = (*Manager)(nil)

// Observe records a hook event: the observed session is created on its
// first event (named by Claude Code's session id, working in its cwd) and
// closed on SessionEnd; every event reaches the phones as claude_event, and
// the ones with a meaning of their own also as tool_call, tool_result,
// notification, turn_complete or session_end; what the session's transcript
// gained since its last event comes before them (transcript.go).
func (m *Manager) Observe(ctx context.Context, ev hooks.Event) error {
	if m.remote(ev.SessionID) {
		return nil // the bridge relays what its claude does
	}
	rec, err := m.observed(ctx, ev)
	if err != nil {
		return err
	}
	id := rec.ID
	// What the transcript gained since the last event comes first: the
	// assistant's text before the tool call it leads to. A live session's
	// transcript is also watched between events.
	switch {
	case ev.Name == hooks.EventPreToolUse && !bySubagent(ev):
		call := callKey(ev.ToolUseID)
		m.followUntil(ctx, id, ev.TranscriptPath, func(f *followed) bool { return call == "" || f.relayed[call] })
	case ev.Name == hooks.EventStop:
		last := stopAnswer(ev)
		m.followUntil(ctx, id, ev.TranscriptPath, func(f *followed) bool { return last == "" || f.lastText == last })
	default:
		m.followTranscript(ctx, id, ev.TranscriptPath)
	}
	if ev.Name == hooks.EventSessionEnd {
		m.forgetTranscript(id)
	} else {
		m.watchTranscript(id, ev.TranscriptPath)
	}
	if ev.Name == hooks.EventPreToolUse || ev.Name == hooks.EventPermissionRequest {
		// Its Ask follows: this event, the tool call and the question
		// share one commit of the log.
		m.holdForAsk(ev)
	}
	if ev.PermissionMode != "" && ev.PermissionMode != rec.Settings.PermissionMode {
		m.terminalMode(ctx, id, ev.PermissionMode)
	}
	m.append(Entry{SessionID: id, Type: wire.TypeClaudeEvent, Payload: claudeEvent(ev, m.cfg.Now)})
	switch ev.Name {
	case hooks.EventUserPromptSubmit:
		return m.setObservedStatus(ctx, rec, store.StatusBusy)
	case hooks.EventPreToolUse:
		// Relayed once: the transcript's tool_use line may have come first.
		params := nonEmpty(ev.ToolInput)
		m.relayOnce(ctx, id, callKey(ev.ToolUseID), Entry{SessionID: id, Type: wire.TypeToolCall, ID: "call-" + ev.ToolUseID, Payload: wire.ToolCall{
			SessionID: id, ToolCallID: ev.ToolUseID, Tool: ev.ToolName, Params: params, Description: describe(ev.ToolName, params)}})
	case hooks.EventPostToolUse:
		m.relayOnce(ctx, id, resultKey(ev.ToolUseID), Entry{SessionID: id, Type: wire.TypeToolResult, ID: "result-" + ev.ToolUseID, Payload: wire.ToolResult{
			SessionID: id, ToolCallID: ev.ToolUseID, Tool: ev.ToolName, Result: hookToolResult(ev)}})
	case hooks.EventNotification:
		var n struct {
			Message          string `json:"message"`
			NotificationType string `json:"notification_type"`
		}
		_ = json.Unmarshal(ev.Raw, &n) // optional fields of a hook event: absent, they are empty
		kind := n.NotificationType
		if kind == "" {
			kind = "info"
		}
		m.notify(id, kind, "Claude Code: "+rec.Title, n.Message, "normal", map[string]any{"source": string(SourceHooks)})
		if kind == "idle_prompt" {
			// Waiting for input: also after a turn the user interrupted,
			// which ends without a Stop.
			return m.setObservedStatus(ctx, rec, store.StatusIdle)
		}
	case hooks.EventStop:
		m.append(Entry{SessionID: id, Type: wire.TypeTurnComplete, Payload: m.terminalTurn(ctx, id, stopAnswer(ev))})
		return m.setObservedStatus(ctx, rec, store.StatusIdle)
	case hooks.EventSessionEnd:
		var e struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Raw, &e) // optional fields of a hook event: absent, they are empty
		m.cancelApprovals(id, "the Claude Code session ended")
		if err := m.setObservedStatus(ctx, rec, store.StatusClosed); err != nil {
			return err
		}
		m.append(Entry{SessionID: id, Type: wire.TypeSessionEnd, Payload: wire.SessionEnd{SessionID: id, Reason: e.Reason}})
	}
	return nil
}

// terminalMode records the permission mode a terminal session's hooks
// report (the user switches it there, with shift+tab), and tells the
// phones when it changed.
func (m *Manager) terminalMode(ctx context.Context, id, mode string) {
	// One hook event at a time, so that a change is told once.
	t := &m.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	rec, err := m.cfg.Store.Session(ctx, id)
	if err != nil || rec.Settings.PermissionMode == mode {
		return
	}
	st := rec.Settings
	st.PermissionMode = mode
	if err := m.cfg.Store.SetSessionSettings(ctx, id, st); err != nil {
		m.cfg.Logger.Warn("recording a terminal session's permission mode", "session", id, "err", err)
		return
	}
	ev := sessionSettings(id, st)
	ev.ChangedBy = "terminal"
	m.append(Entry{SessionID: id, Type: wire.TypeSessionSettings, Payload: ev})
}

// bySubagent reports whether a hook event comes from a subagent (it names
// its agent_id): the subagent's lines are in a transcript of its own, not
// in the one transcript_path names, so nothing there is worth waiting for.
func bySubagent(ev hooks.Event) bool {
	var a struct {
		AgentID string `json:"agent_id"`
	}
	_ = json.Unmarshal(ev.Raw, &a) // an optional field of a hook event: absent, it is empty
	return a.AgentID != ""
}

// stopAnswer is a Stop event's last_assistant_message: the turn's answer.
func stopAnswer(ev hooks.Event) string {
	var s struct {
		LastMessage string `json:"last_assistant_message"`
	}
	_ = json.Unmarshal(ev.Raw, &s) // an optional field of a hook event: absent, it is empty
	return s.LastMessage
}

// observed returns the observed session of a hook event, creating it (or
// reopening an ended one: Claude Code resumes sessions by id).
func (m *Manager) observed(ctx context.Context, ev hooks.Event) (store.Session, error) {
	rec, err := m.cfg.Store.Session(ctx, ev.SessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		now := m.cfg.Now()
		rec = store.Session{ID: ev.SessionID, Agent: "claude-code", Source: store.SourceHooks, WorkingDirectory: ev.Cwd,
			Title: filepath.Base(ev.Cwd), Status: store.StatusIdle, CreatedAt: now, UpdatedAt: now}
		if err := m.cfg.Store.CreateSession(ctx, rec); err != nil && !errors.Is(err, store.ErrExists) {
			return rec, err
		}
		m.append(Entry{SessionID: rec.ID, Type: wire.TypeSessionStatus, Payload: wire.SessionStatus{SessionID: rec.ID, Status: string(rec.Status)}})
		return rec, nil
	case err != nil:
		return rec, err
	case !rec.Live() && ev.Name != hooks.EventSessionEnd:
		return rec, m.setObservedStatus(ctx, rec, store.StatusIdle)
	}
	return rec, nil
}

func (m *Manager) setObservedStatus(ctx context.Context, rec store.Session, status store.SessionStatus) error {
	if rec.Status == status {
		return nil
	}
	rec.Status, rec.UpdatedAt = status, m.cfg.Now()
	if err := m.cfg.Store.UpdateSession(ctx, rec); err != nil {
		return err
	}
	m.observedChanged(rec.ID)
	m.append(Entry{SessionID: rec.ID, Type: wire.TypeSessionStatus, Payload: wire.SessionStatus{SessionID: rec.ID, Status: string(status)}})
	return nil
}

// Ask holds a hook's tool question for a phone. PermissionRequest (sent
// only when Claude Code would prompt) always asks; PreToolUse asks for
// medium and high risk and has no opinion on low risk, so reads never nag.
// With no phone connected, or when ctx ends first, the answer is "ask":
// Claude Code falls back to its own prompt in the terminal.
func (m *Manager) Ask(ctx context.Context, ev hooks.Event) (hooks.Answer, error) {
	release := m.heldForAsk(ev)
	defer release()
	params := nonEmpty(ev.ToolInput)
	risk := Risk(ev.ToolName, params, ev.Cwd)
	switch {
	case m.remote(ev.SessionID):
		// The bridge's claude asks through its permission prompt tool.
		return hooks.Answer{Decision: hooks.DecisionNone}, nil
	case m.remembered(ev.SessionID, ev.ToolName, params, ev.Cwd, risk):
		return hooks.Answer{Decision: hooks.DecisionAllow}, nil
	case ev.Name == hooks.EventPreToolUse && risk == RiskLow:
		return hooks.Answer{Decision: hooks.DecisionNone}, nil
	case m.cfg.Phones == nil || m.cfg.Phones() == 0:
		return hooks.Answer{Decision: hooks.DecisionAsk, Reason: "No phone is connected to tether."}, nil
	}
	toolCall := ev.ToolUseID
	if toolCall == "" {
		toolCall = newID("perm_")
	}
	answers := make(chan agent.PermissionDecision, 1)
	a := &approval{sessionID: ev.SessionID, toolCall: toolCall, source: SourceHooks, tool: ev.ToolName,
		params: params, risk: risk, workDir: ev.Cwd, respond: func(d agent.PermissionDecision) { answers <- d }}
	m.open(a, deadline(ctx))
	release() // the question is appended: the log may commit it
	// When the last phone goes, nobody can answer: the question goes back
	// to the terminal rather than hold Claude Code until its deadline.
	gone := time.NewTicker(phoneCheckEvery)
	defer gone.Stop()
	for {
		select {
		case d := <-answers:
			if d.Behavior != "allow" {
				return hooks.Answer{Decision: hooks.DecisionDeny, Reason: d.Message}, nil
			}
			ans := hooks.Answer{Decision: hooks.DecisionAllow}
			if !bytes.Equal(d.UpdatedInput, params) {
				ans.UpdatedInput = d.UpdatedInput
			}
			return ans, nil
		case <-gone.C:
			if m.cfg.Phones() > 0 {
				continue
			}
			if a := m.takeIf(a); a != nil {
				m.cancel(a, "the question went back to the terminal")
			}
			return hooks.Answer{Decision: hooks.DecisionAsk, Reason: "No phone is connected to tether any more."}, nil
		case <-ctx.Done():
			if a := m.takeIf(a); a != nil {
				m.cancel(a, "the question went back to the terminal")
			}
			return hooks.Answer{Decision: hooks.DecisionAsk, Reason: "No answer from a phone in time."}, nil
		}
	}
}

// phoneCheckEvery is how often a waiting hook question checks that a phone
// is still connected.
const phoneCheckEvery = 250 * time.Millisecond

// deadline is when ctx ends, zero when it has no deadline: the expiry a
// hook question shows the phones.
func deadline(ctx context.Context) (t time.Time) {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return t
}

func nonEmpty(p json.RawMessage) json.RawMessage {
	if len(p) == 0 {
		return json.RawMessage("{}")
	}
	return p
}

// claudeEvent builds a claude_event payload that reads right both for
// clients that know Claude Code's field names (every field of the hook
// body is kept) and for the ReCursor app, which reads its own names
// (working_directory, tool, params, result) and takes "Stop" for the end of
// the session: a turn's end is sent as event_type "TurnComplete", with
// hook_event_name "Stop" inside.
func claudeEvent(ev hooks.Event, now func() time.Time) wire.ClaudeEvent {
	inner := map[string]any{}
	_ = json.Unmarshal(ev.Raw, &inner) // a hook event not an object relays only the fields below
	inner["working_directory"] = ev.Cwd
	if ev.ToolName != "" {
		inner["tool"] = ev.ToolName
		inner["params"] = nonEmpty(ev.ToolInput)
	}
	if ev.Name == hooks.EventPostToolUse {
		inner["result"] = hookToolResult(ev)
	}
	if ev.Name == hooks.EventNotification {
		inner["title"] = "Claude Code"
		inner["body"] = inner["message"]
	}
	eventType := ev.Name
	if ev.Name == hooks.EventStop {
		eventType = "TurnComplete"
	}
	return wire.ClaudeEvent{EventType: eventType, SessionID: ev.SessionID, Timestamp: wire.Timestamp(now()), Payload: inner}
}

// hookToolResult reads PostToolUse's tool_response: Bash's
// {stdout, stderr, interrupted}, a string, or any other object.
func hookToolResult(ev hooks.Event) wire.ToolResultBody {
	var d struct {
		DurationMS int64 `json:"duration_ms"`
	}
	_ = json.Unmarshal(ev.Raw, &d) // an optional field of a hook event: absent, it is empty
	body := wire.ToolResultBody{Success: true, DurationMS: d.DurationMS}
	var s string
	if json.Unmarshal(ev.ToolResponse, &s) == nil {
		body.Content = s
		return body
	}
	var r struct {
		Stdout      *string `json:"stdout"`
		Stderr      string  `json:"stderr"`
		Interrupted bool    `json:"interrupted"`
		IsError     bool    `json:"is_error"`
		Error       string  `json:"error"`
	}
	if json.Unmarshal(ev.ToolResponse, &r) == nil && r.Stdout != nil {
		body.Content = *r.Stdout
		if r.Stderr != "" {
			body.Content += r.Stderr
		}
		body.Success = !r.Interrupted && !r.IsError
	} else {
		body.Content = string(ev.ToolResponse)
		body.Success = !r.IsError && r.Error == ""
	}
	if !body.Success {
		body.Error = body.Content
		if r.Error != "" {
			body.Error = r.Error
		}
	}
	return body
}

// hookKey names a hook event between its Observe and its Ask.
type hookKey struct{ session, toolUse, name string }

// holdForAsk holds the event log for the Ask that follows ev's Observe
// (hooks.Server calls one after the other), so that the events of a tool
// question reach the phone after one commit, not two in a row.
func (m *Manager) holdForAsk(ev hooks.Event) {
	release := m.cfg.Events.Hold()
	k := hookKey{ev.SessionID, ev.ToolUseID, ev.Name}
	m.hmu.Lock()
	if m.hookHolds == nil {
		m.hookHolds = map[hookKey]func(){}
	}
	old := m.hookHolds[k]
	m.hookHolds[k] = release
	m.hmu.Unlock()
	if old != nil {
		old()
	}
}

// heldForAsk takes the hold ev's Observe left, a no-op when there is none.
func (m *Manager) heldForAsk(ev hooks.Event) (release func()) {
	k := hookKey{ev.SessionID, ev.ToolUseID, ev.Name}
	m.hmu.Lock()
	defer m.hmu.Unlock()
	release, ok := m.hookHolds[k]
	if !ok {
		return func() {}
	}
	delete(m.hookHolds, k)
	return release
}
