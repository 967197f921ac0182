package store

import (
	"context"
	"fmt"
	"time"
)

// Approval is a stored permission question. Payload is the approval_required
// payload as sent to phones.
type Approval struct {
	ToolCallID string
	SessionID  string
	Source     string
	Payload    []byte
}

// CreateApproval records a pending question; a session's tool_call_id asked
// before is asked again (pending anew).
func (s *Store) CreateApproval(ctx context.Context, a Approval, now time.Time) error {
	_, err := s.exec(ctx, `INSERT INTO approvals (tool_call_id, session_id, source, payload, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (session_id, tool_call_id) DO UPDATE SET source = excluded.source, payload = excluded.payload,
		  status = 'pending', decision = '', created_at = excluded.created_at, resolved_at = NULL`,
		a.ToolCallID, a.SessionID, a.Source, a.Payload, millis(now))
	if err != nil {
		return fmt.Errorf("store: create approval: %w", err)
	}
	return nil
}

// ResolveApproval marks a session's question answered (with its decision)
// or cancelled (decision empty).
func (s *Store) ResolveApproval(ctx context.Context, sessionID, toolCallID, decision string, now time.Time) error {
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

// PendingApprovals lists the questions still waiting, oldest first.
func (s *Store) PendingApprovals(ctx context.Context) ([]Approval, error) {
	rows, err := s.query(ctx, `SELECT tool_call_id, session_id, source, payload FROM approvals WHERE status = 'pending' ORDER BY created_at, tool_call_id`)
	if err != nil {
		return nil, fmt.Errorf("store: pending approvals: %w", err)
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		var a Approval
		if err := rows.Scan(&a.ToolCallID, &a.SessionID, &a.Source, &a.Payload); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
