package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Run statuses. Only RunRunning is live.
const (
	RunRunning   = "running"
	RunPassed    = "passed"
	RunExhausted = "exhausted"
	RunStopped   = "stopped"
	RunFailed    = "failed"
)

// Run is an agent-to-agent run.
type Run struct {
	ID        int64
	Template  string
	Task      string
	WorkDir   string
	MaxRounds int
	Status    string
	// Reason says why an ended run ended.
	Reason    string
	CreatedAt time.Time
	// EndedAt is zero while the run runs.
	EndedAt time.Time
}

// RunParticipant is a session taking part in a run under a name.
type RunParticipant struct {
	RunID     int64
	Name      string
	SessionID string
	Agent     string
	Role      string
	// Delivered is the seq of the last message of the run it has seen.
	Delivered int64
}

// RunMessage is one message of a run's stream.
type RunMessage struct {
	RunID int64
	// Seq numbers the run's messages from 1, in the order they were taken.
	Seq       int64
	ID        string
	Type      string
	From      string
	To        string
	Content   string
	Signal    string
	CreatedAt time.Time
}

// CreateRun stores a new running run with its participants and returns its
// id. A participant's session is in at most one run: ErrExists otherwise.
func (s *Store) CreateRun(ctx context.Context, r Run, ps []RunParticipant) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: create run: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO runs (template, task, work_dir, max_rounds, status, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Template, r.Task, r.WorkDir, r.MaxRounds, RunRunning, millis(r.CreatedAt))
	if err != nil {
		return 0, fmt.Errorf("store: create run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("store: create run: %w", err)
	}
	for _, p := range ps {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_participants (run_id, name, session_id, agent, role) VALUES (?, ?, ?, ?, ?)`,
			id, p.Name, p.SessionID, p.Agent, p.Role); err != nil {
			if isConstraint(err) {
				return 0, fmt.Errorf("store: create run: participant %q: %w", p.Name, ErrExists)
			}
			return 0, fmt.Errorf("store: create run: %w", err)
		}
	}
	return id, tx.Commit()
}

const runColumns = `id, template, task, work_dir, max_rounds, status, reason, created_at, ended_at`

func scanRun(sc interface{ Scan(...any) error }) (Run, error) {
	var r Run
	var created int64
	var ended sql.NullInt64
	if err := sc.Scan(&r.ID, &r.Template, &r.Task, &r.WorkDir, &r.MaxRounds, &r.Status, &r.Reason, &created, &ended); err != nil {
		return Run{}, err
	}
	r.CreatedAt = fromMillis(created)
	if ended.Valid {
		r.EndedAt = fromMillis(ended.Int64)
	}
	return r, nil
}

// Run returns a run and its participants, in the order they were given.
func (s *Store) Run(ctx context.Context, id int64) (Run, []RunParticipant, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, nil, ErrNotFound
	}
	if err != nil {
		return Run{}, nil, fmt.Errorf("store: run: %w", err)
	}
	ps, err := s.participants(ctx, `WHERE run_id = ? ORDER BY rowid`, id)
	return r, ps, err
}

// Runs returns the newest runs first, at most limit; running ones only
// when live.
func (s *Store) Runs(ctx context.Context, live bool, limit int) ([]Run, error) {
	q := `SELECT ` + runColumns + ` FROM runs`
	if live {
		q += ` WHERE status = 'running'`
	}
	rows, err := s.query(ctx, q+` ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("store: runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RunParticipantBySession returns the participant a session is, or
// ErrNotFound when it is in no run.
func (s *Store) RunParticipantBySession(ctx context.Context, sessionID string) (RunParticipant, error) {
	ps, err := s.participants(ctx, `WHERE session_id = ?`, sessionID)
	if err != nil {
		return RunParticipant{}, err
	}
	if len(ps) == 0 {
		return RunParticipant{}, ErrNotFound
	}
	return ps[0], nil
}

func (s *Store) participants(ctx context.Context, where string, args ...any) ([]RunParticipant, error) {
	rows, err := s.query(ctx, `SELECT run_id, name, session_id, agent, role, delivered FROM run_participants `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: run participants: %w", err)
	}
	defer rows.Close()
	var out []RunParticipant
	for rows.Next() {
		var p RunParticipant
		if err := rows.Scan(&p.RunID, &p.Name, &p.SessionID, &p.Agent, &p.Role, &p.Delivered); err != nil {
			return nil, fmt.Errorf("store: run participants: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// EndRun ends a running run with status and reason; a run already ended is
// left as it is, and EndRun reports false.
func (s *Store) EndRun(ctx context.Context, id int64, status, reason string, at time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET status = ?, reason = ?, ended_at = ? WHERE id = ? AND status = 'running'`,
		status, reason, millis(at), id)
	if err != nil {
		return false, fmt.Errorf("store: end run: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// AppendRunMessage adds m to its run's stream with the next seq and returns
// it. A message whose id the run already holds is not added: AppendRunMessage
// then returns the seq it has, and false.
func (s *Store) AppendRunMessage(ctx context.Context, m RunMessage) (int64, bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("store: append run message: %w", err)
	}
	defer tx.Rollback()
	var seq int64
	err = tx.QueryRowContext(ctx, `SELECT seq FROM run_messages WHERE run_id = ? AND id = ?`, m.RunID, m.ID).Scan(&seq)
	if err == nil {
		return seq, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("store: append run message: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) + 1 FROM run_messages WHERE run_id = ?`, m.RunID).Scan(&seq); err != nil {
		return 0, false, fmt.Errorf("store: append run message: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO run_messages (run_id, seq, id, type, sender, recipient, content, signal, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.RunID, seq, m.ID, m.Type, m.From, m.To, m.Content, m.Signal, millis(m.CreatedAt)); err != nil {
		return 0, false, fmt.Errorf("store: append run message: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("store: append run message: %w", err)
	}
	return seq, true, nil
}

// RunMessages returns a run's messages after seq after, oldest first, at
// most limit.
func (s *Store) RunMessages(ctx context.Context, runID, after int64, limit int) ([]RunMessage, error) {
	rows, err := s.query(ctx, `SELECT run_id, seq, id, type, sender, recipient, content, signal, created_at FROM run_messages
		WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, runID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: run messages: %w", err)
	}
	defer rows.Close()
	var out []RunMessage
	for rows.Next() {
		var m RunMessage
		var created int64
		if err := rows.Scan(&m.RunID, &m.Seq, &m.ID, &m.Type, &m.From, &m.To, &m.Content, &m.Signal, &created); err != nil {
			return nil, fmt.Errorf("store: run messages: %w", err)
		}
		m.CreatedAt = fromMillis(created)
		out = append(out, m)
	}
	return out, rows.Err()
}

// RunCount is how many of a run's messages share a sender, type and signal.
type RunCount struct {
	From, Type, Signal string
	N                  int
}

// RunCounts counts a run's messages by sender, type and signal.
func (s *Store) RunCounts(ctx context.Context, runID int64) ([]RunCount, error) {
	rows, err := s.query(ctx, `SELECT sender, type, signal, count(*) FROM run_messages WHERE run_id = ? GROUP BY sender, type, signal`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: run counts: %w", err)
	}
	defer rows.Close()
	var out []RunCount
	for rows.Next() {
		var c RunCount
		if err := rows.Scan(&c.From, &c.Type, &c.Signal, &c.N); err != nil {
			return nil, fmt.Errorf("store: run counts: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// SetRunDelivered records that a participant has seen its run's messages
// up to seq; it never moves back.
func (s *Store) SetRunDelivered(ctx context.Context, runID int64, name string, seq int64) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE run_participants SET delivered = max(delivered, ?) WHERE run_id = ? AND name = ?`, seq, runID, name); err != nil {
		return fmt.Errorf("store: run delivered: %w", err)
	}
	return nil
}
