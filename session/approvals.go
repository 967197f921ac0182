package session

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// Permission policies, set per session at session_start.
const (
	PolicyAsk          = "ask"          // ask the phone for everything
	PolicyAutoLow      = "auto_low"     // approve low risk, ask for the rest (default)
	PolicyAutoApprove  = "auto_approve" // approve everything
	PolicyAutoDeny     = "auto_deny"    // deny everything
	DefaultPolicy      = PolicyAutoLow
	DefaultApprovalTTL = 10 * time.Minute
)

var policies = []string{PolicyAsk, PolicyAutoLow, PolicyAutoApprove, PolicyAutoDeny}

// ApprovalSource says who asked a permission question, as approval_required
// tells the phones.
type ApprovalSource string

// Sources of permission questions.
const (
	SourceAgent ApprovalSource = "agent_sdk" // a sandboxed agent
	SourceHooks ApprovalSource = "hooks"     // Claude Code in a terminal, through its hooks
)

// approvalKey names a pending question: its session and its tool_call_id.
// The id is the agent's (or a hook's) choice, so it names a question only
// within its session.
type approvalKey struct{ sessionID, toolCall string }

// approval is a permission question waiting for a phone, from a sandboxed
// agent or a hook. The approvals broker pairs it with exactly one answer.
type approval struct {
	sessionID string
	toolCall  string
	requestID string
	source    ApprovalSource
	tool      string
	params    json.RawMessage
	risk      string
	workDir   string
	timer     *time.Timer // sandboxed agents: deny when nobody answers
	answered  bool
	// respond delivers the decision to whoever asked.
	respond func(agent.PermissionDecision)
	// notification is the id of the notification that announced it.
	notification string
}

func (a *approval) key() approvalKey { return approvalKey{a.sessionID, a.toolCall} }

// open registers a question and tells the phones: approval_required, a
// stored pending approval and a notification. A second question with the
// id of one still pending in the same session is denied at once: an answer
// must reach the question the phone showed, never another.
func (m *Manager) open(a *approval, expires time.Time) {
	// Its notification's id is known before anyone can answer it.
	a.notification = newID("ntf_")
	m.mu.Lock()
	if m.approvals[a.key()] != nil {
		m.mu.Unlock()
		m.cfg.Logger.Warn("a permission question reuses a pending tool_call_id: denied", "session", a.sessionID, "tool_call_id", a.toolCall)
		if a.timer != nil {
			a.timer.Stop()
		}
		a.respond(agent.PermissionDecision{Behavior: "deny", Message: "Another question with this tool_call_id is waiting for an answer; this one is denied."})
		return
	}
	m.approvals[a.key()] = a
	m.mu.Unlock()
	payload := wire.ApprovalRequired{
		SessionID: a.sessionID, ToolCallID: a.toolCall, Tool: a.tool, Params: a.params, Description: describe(a.tool, a.params),
		RiskLevel: a.risk, Source: string(a.source), RequestID: a.requestID,
		RememberScope: rememberScope(a.tool, a.params, a.workDir, a.risk), Kind: approvalKind(a.tool),
	}
	if !expires.IsZero() {
		payload.ExpiresAt = wire.Timestamp(expires)
	}
	// The pending question is stored in the event's commit: one commit
	// on the way to the phone, not two.
	var pending *store.Approval
	if b, err := json.Marshal(payload); err == nil {
		pending = &store.Approval{ToolCallID: a.toolCall, SessionID: a.sessionID, Source: string(a.source), Payload: b}
	}
	m.append(Entry{SessionID: a.sessionID, Type: wire.TypeApprovalRequired, ID: "approval-" + a.toolCall, Payload: payload, Approval: pending})
	m.notifyAs(a.notification, a.sessionID, "approval_required", "Approval needed: "+a.tool, describe(a.tool, a.params), "high",
		map[string]any{"tool_call_id": a.toolCall, "screen": "approval_detail", "source": string(a.source)})
}

// ended withdraws a's notification: a device that did not acknowledge it
// is not sent it again once the question is answered or gone.
func (m *Manager) ended(a *approval) {
	if a.notification == "" {
		return
	}
	if err := m.cfg.Store.DeleteNotification(context.Background(), a.notification); err != nil {
		m.cfg.Logger.Warn("withdrawing a notification", "id", a.notification, "err", err)
	}
}

// take removes a pending approval, so that it is answered at most once.
func (m *Manager) take(k approvalKey) *approval {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.approvals[k]
	if a == nil || a.answered {
		return nil
	}
	a.answered = true
	delete(m.approvals, k)
	if a.timer != nil {
		a.timer.Stop()
	}
	return a
}

// pendingIn reports whether a question of the session waits for a phone.
func (m *Manager) pendingIn(sessionID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.approvals {
		if k.sessionID == sessionID {
			return true
		}
	}
	return false
}

// takeIf is take of a's key when a is the question pending there (and not
// another that reused its id).
func (m *Manager) takeIf(a *approval) *approval {
	m.mu.Lock()
	same := m.approvals[a.key()] == a
	m.mu.Unlock()
	if !same {
		return nil
	}
	return m.take(a.key())
}

// storeResolved records an approval's answer ("" for cancelled). The phones
// and the agent have their answer either way; a record left pending is
// cancelled at the daemon's next start.
func (m *Manager) storeResolved(a *approval, decision string) {
	if err := m.cfg.Store.ResolveApproval(context.Background(), a.sessionID, a.toolCall, decision, m.cfg.Now()); err != nil {
		m.cfg.Logger.Error("recording an approval's answer", "session", a.sessionID, "tool_call", a.toolCall, "err", err)
	}
}

// cancel withdraws a taken approval: stored as cancelled, phones told.
func (m *Manager) cancel(a *approval, reason string) {
	m.storeResolved(a, "")
	m.ended(a)
	m.append(Entry{SessionID: a.sessionID, Type: wire.TypeApprovalCancelled, Payload: wire.ApprovalCancelled{
		SessionID: a.sessionID, ToolCallID: a.toolCall, Reason: reason}})
}

// ask handles a sandboxed agent's permission request.
func (m *Manager) ask(s *sess, req agent.PermissionRequest) {
	s.mu.Lock()
	policy, workDir := s.rec.Policy, s.rec.WorkingDirectory
	s.mu.Unlock()
	params := req.Input
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	// The bridge denies such a call itself, but it runs beside the agent:
	// the daemon holds the line too. A phone must see what it approves.
	if len(params) > sandbox.MaxMessage {
		s.answer(req.RequestID, agent.PermissionDecision{Behavior: "deny", Message: fmt.Sprintf("tether denied this tool call: its input of %d bytes is larger than the 1 MiB a phone can be shown", len(params))})
		return
	}
	risk := Risk(req.ToolName, params, workDir)
	switch {
	case approvalKind(req.ToolName) != "":
		// A plan or a question is the user's, whatever the policy.
	case policy == PolicyAutoApprove, policy == PolicyAutoLow && risk == RiskLow, m.remembered(s.rec.ID, req.ToolName, params, workDir, risk):
		s.answer(req.RequestID, agent.PermissionDecision{Behavior: "allow", UpdatedInput: params})
		return
	case policy == PolicyAutoDeny:
		s.answer(req.RequestID, agent.PermissionDecision{Behavior: "deny", Message: "Denied by the session's policy (auto_deny)."})
		return
	}
	toolCall := req.ToolUseID
	if toolCall == "" {
		toolCall = req.RequestID
	}
	a := &approval{sessionID: s.rec.ID, toolCall: toolCall, requestID: req.RequestID, source: SourceAgent,
		tool: req.ToolName, params: params, risk: risk, workDir: workDir,
		respond: func(d agent.PermissionDecision) { s.answer(req.RequestID, d) }}
	expires := m.cfg.Now().Add(m.cfg.ApprovalTimeout)
	m.mu.Lock()
	a.timer = time.AfterFunc(m.cfg.ApprovalTimeout, func() { m.expire(a.key()) })
	m.mu.Unlock()
	m.open(a, expires)
}

// answer sends a decision to the session's bridge.
func (s *sess) answer(requestID string, d agent.PermissionDecision) {
	s.mu.Lock()
	sb := s.sb
	s.mu.Unlock()
	if sb == nil {
		return
	}
	if err := sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdPermissionResponse, RequestID: requestID, Decision: &d}); err != nil {
		s.m.cfg.Logger.Warn("answering a permission question", "session", s.rec.ID, "err", err)
	}
}

func (m *Manager) expire(k approvalKey) {
	a := m.take(k)
	if a == nil {
		return
	}
	m.cancel(a, "timeout")
	a.respond(agent.PermissionDecision{Behavior: "deny", Message: fmt.Sprintf("No answer from a phone within %s: denied.", m.cfg.ApprovalTimeout)})
}

// withdraw cancels the session's question with requestID (the agent took
// it back).
func (m *Manager) withdraw(sessionID, requestID, reason string) {
	m.mu.Lock()
	var key approvalKey
	for k, a := range m.approvals {
		if a.sessionID == sessionID && a.requestID == requestID {
			key = k
		}
	}
	m.mu.Unlock()
	if a := m.take(key); a != nil {
		m.cancel(a, reason)
	}
}

func (m *Manager) cancelApprovals(sessionID, reason string) {
	m.mu.Lock()
	var keys []approvalKey
	for k := range m.approvals {
		if k.sessionID == sessionID {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	for _, k := range keys {
		if a := m.take(k); a != nil {
			m.cancel(a, reason)
			a.respond(agent.PermissionDecision{Behavior: "deny", Message: reason})
		}
	}
}

// withdrawStale cancels the questions a previous daemon left pending: the
// agents and hook requests that asked them are gone, except the agents of
// the sessions being adopted, whose questions it returns by session.
func (m *Manager) withdrawStale(ctx context.Context, adopting map[string]store.Session) (map[string][]store.Approval, error) {
	stale, err := m.cfg.Store.PendingApprovals(ctx)
	if err != nil {
		return nil, err
	}
	kept := map[string][]store.Approval{}
	for _, a := range stale {
		if _, ok := adopting[a.SessionID]; ok && ApprovalSource(a.Source) == SourceAgent {
			kept[a.SessionID] = append(kept[a.SessionID], a)
			continue
		}
		m.cancel(&approval{sessionID: a.SessionID, toolCall: a.ToolCallID}, "the daemon restarted")
	}
	return kept, nil
}

// PendingApprovals lists the questions waiting for a phone, as
// approval_required payloads (for connection_ack).
func (m *Manager) PendingApprovals(ctx context.Context) ([]json.RawMessage, error) {
	pending, err := m.cfg.Store.PendingApprovals(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(pending))
	for _, a := range pending {
		out = append(out, a.Payload)
	}
	return out, nil
}

// Answer applies a phone's approval_response, matched by session_id and
// tool_call_id (both required: an id names a question only within its
// session). A question already answered, expired or unknown is an error.
func (m *Manager) Answer(r wire.ApprovalResponse) error {
	if r.ToolCallID == "" || r.SessionID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "approval_response needs session_id and tool_call_id")
	}
	if r.Remember != "" && r.Remember != "session" {
		return wire.Errorf(wire.CodeInvalidMessage, `remember must be "session"`)
	}
	var d agent.PermissionDecision
	var instructions string
	var mods map[string]json.RawMessage
	switch r.Decision {
	case "approved":
		d = agent.PermissionDecision{Behavior: "allow"}
	case "rejected":
		d = agent.PermissionDecision{Behavior: "deny", Message: "Rejected from the phone."}
		if r.Reason != "" {
			d.Message = "Rejected from the phone: " + r.Reason
		}
	case "modified":
		if len(r.Modifications) == 0 || json.Unmarshal(r.Modifications, &mods) != nil || len(mods) == 0 {
			return wire.Errorf(wire.CodeInvalidMessage, `"modified" needs modifications: {"instructions": TEXT} or the tool's changed parameters`)
		}
		if raw, ok := mods["instructions"]; ok && len(mods) == 1 {
			if json.Unmarshal(raw, &instructions) != nil || strings.TrimSpace(instructions) == "" {
				return wire.Errorf(wire.CodeInvalidMessage, "modifications.instructions must be text")
			}
			d = agent.PermissionDecision{Behavior: "deny", Message: "The user says instead: " + instructions}
		} else {
			d = agent.PermissionDecision{Behavior: "allow"}
		}
	default:
		return wire.Errorf(wire.CodeInvalidMessage, "decision must be approved, rejected or modified")
	}
	key := approvalKey{r.SessionID, r.ToolCallID}
	m.mu.Lock()
	pending := m.approvals[key]
	m.mu.Unlock()
	if pending == nil {
		return errNoApproval(r)
	}
	var answered json.RawMessage
	switch {
	case r.Answers != nil && (pending.tool != toolAskUserQuestion || r.Decision != "approved"):
		return wire.Errorf(wire.CodeInvalidMessage, "answers answer a question (kind \"question\"), approved")
	case pending.tool == toolAskUserQuestion && r.Decision != "rejected":
		if r.Decision != "approved" {
			return wire.Errorf(wire.CodeInvalidMessage, "a question is approved with answers, or rejected")
		}
		in, err := withAnswers(pending.params, r.Answers)
		if err != nil {
			return err
		}
		answered = in
	case pending.tool == toolExitPlanMode && r.Decision == "rejected":
		// Rejecting a plan with feedback keeps the agent planning.
		d.Message = "The user rejected this plan."
		if r.Reason != "" {
			d.Message = "The user wants you to keep planning: " + r.Reason
		}
	}
	a := m.take(key)
	if a == nil {
		return errNoApproval(r)
	}
	if d.Behavior == "allow" {
		d.UpdatedInput = a.params
		if r.Decision == "modified" {
			d.UpdatedInput = mergeParams(a.params, mods)
		}
		if answered != nil {
			d.UpdatedInput = answered
		}
		if r.Remember == "session" {
			m.remember(a.sessionID, a.tool, a.params, a.workDir, a.risk)
		}
	}
	a.respond(d)
	m.storeResolved(a, r.Decision)
	m.ended(a)
	m.append(Entry{SessionID: a.sessionID, Type: wire.TypeApprovalResolved, Payload: wire.ApprovalResolved{
		SessionID: a.sessionID, ToolCallID: a.toolCall, Decision: r.Decision}})
	return nil
}

func errNoApproval(r wire.ApprovalResponse) error {
	return wire.Errorf(wire.CodeToolError, "no pending approval %q in session %q: it was already answered, cancelled or never asked", r.ToolCallID, r.SessionID)
}

// mergeParams lays the modified fields over the original parameters. An
// agent's parameters that are not a JSON object have no fields to keep:
// the modified ones are then the whole input.
func mergeParams(orig json.RawMessage, mods map[string]json.RawMessage) json.RawMessage {
	base := map[string]json.RawMessage{}
	if json.Unmarshal(orig, &base) != nil {
		base = map[string]json.RawMessage{}
	}
	maps.Copy(base, mods)
	out, _ := json.Marshal(base) // raw values, each valid JSON: it encodes
	return out
}
