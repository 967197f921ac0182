package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

func isConstraint(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrConstraint
}

// Event is one logged session event.
type Event struct {
	Seq       int64
	SessionID string
	Type      string
	Frame     []byte
	CreatedAt time.Time
	// Approval, when set, is the pending question this event announces
	// (approval_required), stored in the event's own transaction: a
	// question is pending in the store exactly when its event is logged,
	// and asking costs one commit, not two.
	Approval *Approval
}

// Notification ties a logged notification event to its id, so that it can be
// acknowledged per device.
type Notification struct {
	ID        string
	Seq       int64
	SessionID string
}

// eventsPerInsert is how many events one INSERT writes.
const eventsPerInsert = 256

// SandboxMark says how far a session's sandbox bridge is committed: its
// events up to Seq are handled, and what they made the phones see is
// logged. Bridge names the sandbox bridge process; a mark is worth something only
// to the same one.
type SandboxMark struct {
	SessionID string
	Bridge    string
	Seq       int64
	// State is the caller's state of the session at that point, opaque.
	State []byte
}

// AppendEvents writes events (and the notifications and approvals among
// them) in one transaction, with the sandbox marks that they complete.
// Seqs are the caller's and must be new.
func (s *Store) AppendEvents(ctx context.Context, events []Event, notes []Notification, marks ...SandboxMark) error {
	if slices.ContainsFunc(events, func(e Event) bool { return e.Approval != nil }) {
		defer s.pending.invalidate()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: append events: %w", full(err))
	}
	defer tx.Rollback()
	all := events
	// Many rows a statement: one cgo round trip for up to eventsPerInsert
	// events instead of one each.
	for len(events) > 0 {
		n := min(len(events), eventsPerInsert)
		q := `INSERT INTO events (seq, session_id, type, frame, created_at) VALUES (?, ?, ?, ?, ?)` + strings.Repeat(`, (?, ?, ?, ?, ?)`, n-1)
		args := make([]any, 0, 5*n)
		for _, e := range events[:n] {
			args = append(args, e.Seq, e.SessionID, e.Type, e.Frame, millis(e.CreatedAt))
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("store: append events %d…: %w", events[0].Seq, full(err))
		}
		events = events[n:]
	}
	for _, n := range notes {
		if _, err := tx.ExecContext(ctx, `INSERT INTO notifications (id, seq, session_id, created_at) VALUES (?, ?, ?, ?)`,
			n.ID, n.Seq, n.SessionID, millis(time.Now())); err != nil {
			return fmt.Errorf("store: append notification: %w", full(err))
		}
	}
	for _, e := range all {
		if a := e.Approval; a != nil {
			if _, err := tx.ExecContext(ctx, createApproval, a.SessionID, a.ToolCallID, a.Source, a.Payload, millis(e.CreatedAt)); err != nil {
				return fmt.Errorf("store: append approval: %w", full(err))
			}
		}
	}
	for _, m := range marks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_marks (session_id, bridge, seq, state) VALUES (?, ?, ?, ?)
			ON CONFLICT (session_id) DO UPDATE SET bridge = excluded.bridge, seq = excluded.seq, state = excluded.state`,
			m.SessionID, m.Bridge, m.Seq, string(m.State)); err != nil {
			return fmt.Errorf("store: append sandbox mark: %w", full(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: append events: %w", full(err))
	}
	return nil
}

// SandboxMarkOf returns the session's sandbox mark, the zero mark when it
// has none.
func (s *Store) SandboxMarkOf(ctx context.Context, sessionID string) (SandboxMark, error) {
	m := SandboxMark{SessionID: sessionID}
	var state string
	err := s.queryRow(ctx, `SELECT bridge, seq, state FROM sandbox_marks WHERE session_id = ?`, sessionID).Scan(&m.Bridge, &m.Seq, &state)
	m.State = []byte(state)
	if errors.Is(err, sql.ErrNoRows) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("store: sandbox mark: %w", err)
	}
	return m, nil
}

// LastSeq is the highest seq ever logged, 0 for none.
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := s.queryRow(ctx, `SELECT coalesce(max(seq), 0) FROM events`).Scan(&seq)
	return seq, err
}

// FirstSeq is the lowest seq still retained, 0 for none.
func (s *Store) FirstSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := s.queryRow(ctx, `SELECT coalesce(min(seq), 0) FROM events`).Scan(&seq)
	return seq, err
}

// EventsAfter returns up to limit events with seq > after, in seq order.
func (s *Store) EventsAfter(ctx context.Context, after int64, limit int) ([]Event, error) {
	rows, err := s.query(ctx, `SELECT seq, session_id, type, frame, created_at FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: read events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var created int64
		if err := rows.Scan(&e.Seq, &e.SessionID, &e.Type, &e.Frame, &created); err != nil {
			return nil, fmt.Errorf("store: read events: %w", err)
		}
		e.CreatedAt = fromMillis(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

// SessionEvents returns a page of a session's events: the newest with seq
// below before (0: the newest of all), at most limit of them and at most
// maxBytes of frames (at least one), in seq order. more says whether older
// ones remain.
func (s *Store) SessionEvents(ctx context.Context, sessionID string, before int64, limit, maxBytes int) (events []Event, more bool, err error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.query(ctx, `SELECT seq, session_id, type, frame, created_at FROM events
		WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`, sessionID, before, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("store: read session events: %w", err)
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		var e Event
		var created int64
		if err := rows.Scan(&e.Seq, &e.SessionID, &e.Type, &e.Frame, &created); err != nil {
			return nil, false, fmt.Errorf("store: read session events: %w", err)
		}
		if len(events) == limit || len(events) > 0 && size+len(e.Frame) > maxBytes {
			more = true
			break
		}
		e.CreatedAt = fromMillis(created)
		size += len(e.Frame)
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	slices.Reverse(events)
	return events, more, nil
}

// PendingNotifications returns the frames of notifications at or below seq
// upTo that device has not acknowledged, in seq order.
func (s *Store) PendingNotifications(ctx context.Context, deviceID string, upTo int64) ([]Event, error) {
	rows, err := s.query(ctx, `
		SELECT e.seq, e.session_id, e.type, e.frame FROM notifications n JOIN events e ON e.seq = n.seq
		WHERE n.seq <= ? AND NOT EXISTS (SELECT 1 FROM notification_acks a WHERE a.notification_id = n.id AND a.device_id = ?)
		ORDER BY n.seq`, upTo, deviceID)
	if err != nil {
		return nil, fmt.Errorf("store: pending notifications: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.Seq, &e.SessionID, &e.Type, &e.Frame); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// DeleteNotification forgets a notification (and its acknowledgments): it
// is not pending for any device any more. Its event stays in the log.
func (s *Store) DeleteNotification(ctx context.Context, id string) error {
	if _, err := s.exec(ctx, `DELETE FROM notifications WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: delete notification: %w", err)
	}
	return nil
}

// AckNotifications records that device acknowledged the notifications ids;
// unknown ids are ignored. It returns how many were newly acknowledged.
func (s *Store) AckNotifications(ctx context.Context, deviceID string, ids []string, now time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	args := []any{deviceID, millis(now)}
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := s.exec(ctx, `INSERT OR IGNORE INTO notification_acks (notification_id, device_id, acked_at)
		SELECT id, ?, ? FROM notifications WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, args...)
	if err != nil {
		return 0, fmt.Errorf("store: ack notifications: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// SetDeviceCursor records the last seq written to a device's socket.
func (s *Store) SetDeviceCursor(ctx context.Context, deviceID string, seq int64) error {
	_, err := s.exec(ctx, `INSERT INTO device_cursors (device_id, last_seq) VALUES (?, ?)
		ON CONFLICT (device_id) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq)`, deviceID, seq)
	if err != nil {
		return fmt.Errorf("store: device cursor: %w", err)
	}
	return nil
}

// DeviceCursor returns the last seq written to a device's socket; ok is false
// when none was recorded.
func (s *Store) DeviceCursor(ctx context.Context, deviceID string) (seq int64, ok bool, err error) {
	err = s.queryRow(ctx, `SELECT last_seq FROM device_cursors WHERE device_id = ?`, deviceID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: device cursor: %w", err)
	}
	return seq, true, nil
}

// Retention bounds what the store keeps of past activity.
type Retention struct {
	// MaxEvents is how many of the newest events are kept.
	MaxEvents int64
	// MaxBytes bounds the total size of the kept events' frames.
	MaxBytes int64
	// MaxAge is the age past which events, ended sessions, answered
	// approvals and client message ids are deleted.
	MaxAge time.Duration
}

// Pruned counts what Prune deleted.
type Pruned struct {
	Events, Sessions, Approvals, ClientMessages int64
}

// Total is the number of rows deleted.
func (p Pruned) Total() int64 { return p.Events + p.Sessions + p.Approvals + p.ClientMessages }

// Prune applies r: the oldest events beyond MaxEvents, beyond MaxBytes or
// older than MaxAge go (notifications and their acks with them), except
// the newest event, which is kept so that the next seq never repeats one a
// phone has seen. Sessions that ended before the cut and have no event
// left, answered approvals and client message ids older than MaxAge go too.
func (s *Store) Prune(ctx context.Context, r Retention, now time.Time) (Pruned, error) {
	defer s.live.invalidate() // the hooks' sessions it deletes may be live
	// It deletes only answered questions, but every writer of a cached
	// table drops its cache (TestEveryWriterInvalidates): once an hour.
	defer s.pending.invalidate()
	var p Pruned
	cutoff := millis(now.Add(-r.MaxAge))
	// The newest seq whose event no longer fits in MaxBytes, counting from
	// the newest: found on the read connection, so that the scan of every
	// frame's length does not hold up the log's writer.
	var sizeCut int64
	err := s.queryRow(ctx, `SELECT seq FROM (SELECT seq, sum(length(frame)) OVER (ORDER BY seq DESC) AS kept FROM events)
		WHERE kept > ? ORDER BY seq DESC LIMIT 1`, r.MaxBytes).Scan(&sizeCut)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("store: prune events by size: %w", err)
	}
	steps := []struct {
		n    *int64
		what string
		sql  string
		args []any
	}{
		{&p.Events, "events", `DELETE FROM events WHERE (seq <= (SELECT max(seq) FROM events) - ? OR created_at < ?)
			AND seq < (SELECT max(seq) FROM events)`, []any{r.MaxEvents, cutoff}},
		{&p.Events, "events by size", `DELETE FROM events WHERE seq <= ? AND seq < (SELECT max(seq) FROM events)`, []any{sizeCut}},
		{nil, "notifications", `DELETE FROM notifications WHERE seq < (SELECT coalesce(min(seq), 0) FROM events)`, nil},
		// Of the sandboxed sessions, the newest of each working directory
		// stays: the history's look-alike check (history.sandboxWorkDirs)
		// must remember every directory a sandbox wrote transcripts from,
		// however long ago, or what an agent planted there would become
		// resumable in its look-alike once its session aged out.
		{&p.Sessions, "sessions", `DELETE FROM sessions WHERE (status IN ('closed', 'error') OR source = 'hooks') AND updated_at < ?
			AND NOT EXISTS (SELECT 1 FROM events WHERE events.session_id = sessions.id)
			AND (source != 'sandbox' OR id NOT IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY working_directory
				ORDER BY updated_at DESC, id DESC) AS n FROM sessions WHERE source = 'sandbox') WHERE n = 1))`, []any{cutoff}},
		{&p.Approvals, "approvals", `DELETE FROM approvals WHERE status != 'pending' AND coalesce(resolved_at, created_at) < ?`, []any{cutoff}},
		{&p.ClientMessages, "client messages", `DELETE FROM client_messages WHERE created_at < ? OR session_id NOT IN (SELECT id FROM sessions)`, []any{cutoff}},
	}
	for _, st := range steps {
		res, err := s.exec(ctx, st.sql, st.args...)
		if err != nil {
			return p, fmt.Errorf("store: prune %s: %w", st.what, err)
		}
		if st.n != nil {
			n, _ := res.RowsAffected()
			*st.n += n
		}
	}
	return p, nil
}

// AckedNotificationSeqs returns the seqs above after of the notifications
// device has acknowledged.
func (s *Store) AckedNotificationSeqs(ctx context.Context, deviceID string, after int64) (map[int64]bool, error) {
	rows, err := s.query(ctx, `SELECT n.seq FROM notifications n JOIN notification_acks a ON a.notification_id = n.id
		WHERE a.device_id = ? AND n.seq > ?`, deviceID, after)
	if err != nil {
		return nil, fmt.Errorf("store: acked notifications: %w", err)
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, err
		}
		out[seq] = true
	}
	return out, rows.Err()
}
