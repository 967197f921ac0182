package store

import (
	"context"
	"fmt"
	"time"
)

// Approval is a stored permission question, named by its session and its
// tool_call_id together. Payload is the approval_required payload as sent
// to phones.
type Approval struct {
	ToolCallID string
	SessionID  string
	Source     string
	Payload    []byte
}

// createApproval records a pending question (AppendEvents, with the
// event that asks it). A tool_call_id answered or cancelled before in the
// same session is asked again (pending anew); one still pending in the
// same session is left untouched.
const createApproval = `INSERT INTO approvals (session_id, tool_call_id, source, payload, created_at) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (session_id, tool_call_id) DO UPDATE SET source = excluded.source, payload = excluded.payload,
	  status = 'pending', decision = '', created_at = excluded.created_at, resolved_at = NULL
	WHERE approvals.status <> 'pending'`

// ResolveApproval marks the pending question toolCallID of sessionID
// answered (with its decision) or cancelled (decision empty).
func (s *Store) ResolveApproval(ctx context.Context, sessionID, toolCallID, decision string, now time.Time) error {
	defer s.pending.invalidate()
	status := "answered"
	if decision == "" {
		status = "cancelled"
	}
	_, err := s.exec(ctx, `UPDATE approvals SET status = ?, decision = ?, resolved_at = ? WHERE session_id = ? AND tool_call_id = ? AND status = 'pending'`,
		status, decision, millis(now), sessionID, toolCallID)
	if err != nil {
		return fmt.Errorf("store: resolve approval: %w", err)
	}
	return nil
}

// PendingApprovals lists the questions still waiting, oldest first. It
// reads the database only after a change (listCache).
func (s *Store) PendingApprovals(ctx context.Context) ([]Approval, error) {
	return s.pending.get(ctx, func(ctx context.Context) ([]Approval, error) {
		return queryAll(ctx, s, func(r rowScanner) (Approval, error) {
			var a Approval
			err := r.Scan(&a.ToolCallID, &a.SessionID, &a.Source, &a.Payload)
			return a, err
		}, `SELECT tool_call_id, session_id, source, payload FROM approvals WHERE status = 'pending' ORDER BY created_at, session_id, tool_call_id`)
	})
}
