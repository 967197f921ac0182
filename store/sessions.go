package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SessionStatus is a session's status, as the phones see it in
// session_status and the session list.
type SessionStatus string

// Session statuses. Every status but StatusClosed and StatusError is live.
const (
	StatusStarting SessionStatus = "starting"
	StatusIdle     SessionStatus = "idle"
	StatusBusy     SessionStatus = "busy"
	StatusClosed   SessionStatus = "closed"
	StatusError    SessionStatus = "error"
)

// SessionSource says where a session's agent runs, as the phones see it
// in the session list.
type SessionSource string

// Session sources.
const (
	// SourceSandbox is a session whose agent runs in a sandbox of the
	// daemon's.
	SourceSandbox SessionSource = "sandbox"
	// SourceHooks is Claude Code running in a terminal of its own,
	// observed through its hooks.
	SourceHooks SessionSource = "hooks"
	// SourceTerminal is Claude Code running in a terminal under `tether
	// claude`: stored as source 'hooks' marked terminal.
	SourceTerminal SessionSource = "terminal"
)

// ErrExists is returned when a row with the same key already exists.
var ErrExists = errors.New("already exists")

// Session is an agent session.
type Session struct {
	ID               string
	Agent            string
	Source           SessionSource
	WorkingDirectory string
	Title            string
	Status           SessionStatus
	AgentSessionID   string
	Policy           string
	Error            string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	// Settings are what the agent runs with; written by CreateSession and
	// SetSessionSettings only.
	Settings Settings
	// Usage is summed over the session's turns; written by AddSessionUsage
	// only.
	Usage Usage
}

// Settings are a session's agent settings; a zero field means the agent's
// own default.
type Settings struct {
	Model             string
	PermissionMode    string
	MaxThinkingTokens int
}

// Usage counts what a session's turns used.
type Usage struct {
	Turns               int64
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	CostUSD             float64
}

// Live reports whether the session has not ended.
func (s Session) Live() bool { return s.Status != StatusClosed && s.Status != StatusError }

const sessionColumns = `id, agent, CASE WHEN terminal = 1 THEN 'terminal' ELSE source END, working_directory, title, status, agent_session_id, policy, error, created_at, updated_at, ` +
	`model, permission_mode, max_thinking_tokens, turns, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd`

func scanSession(r rowScanner) (Session, error) {
	var s Session
	var created, updated int64
	u := &s.Usage
	err := r.Scan(&s.ID, &s.Agent, &s.Source, &s.WorkingDirectory, &s.Title, &s.Status, &s.AgentSessionID, &s.Policy, &s.Error, &created, &updated,
		&s.Settings.Model, &s.Settings.PermissionMode, &s.Settings.MaxThinkingTokens,
		&u.Turns, &u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheCreationTokens, &u.CostUSD)
	s.CreatedAt, s.UpdatedAt = fromMillis(created), fromMillis(updated)
	return s, err
}

// CreateSession stores a new session; ErrExists if its id is taken.
func (s *Store) CreateSession(ctx context.Context, se Session) error {
	defer s.live.invalidate()
	_, err := s.exec(ctx, `INSERT INTO sessions (id, agent, source, working_directory, title, status, agent_session_id, policy, error, created_at, updated_at,
		model, permission_mode, max_thinking_tokens, terminal) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		se.ID, se.Agent, storedSource(se.Source), se.WorkingDirectory, se.Title, se.Status, se.AgentSessionID, se.Policy, se.Error,
		millis(se.CreatedAt), millis(se.UpdatedAt), se.Settings.Model, se.Settings.PermissionMode, se.Settings.MaxThinkingTokens, se.Source == SourceTerminal)
	if isConstraint(err) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	return nil
}

// storedSource is the source column of a Source.
func storedSource(source SessionSource) SessionSource {
	if source == SourceTerminal {
		return SourceHooks
	}
	return source
}

// MakeTerminal marks an observed session as one running under `tether
// claude`, working in dir; ErrNotFound for a session that does not exist
// or is a sandbox's.
func (s *Store) MakeTerminal(ctx context.Context, id, dir string, at time.Time) error {
	defer s.live.invalidate()
	res, err := s.exec(ctx, `UPDATE sessions SET terminal = 1, working_directory = ?, agent_session_id = id, updated_at = ? WHERE id = ? AND source = 'hooks'`,
		dir, millis(at), id)
	if err != nil {
		return fmt.Errorf("store: terminal session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// Session returns the session with id, or ErrNotFound.
func (s *Store) Session(ctx context.Context, id string) (Session, error) {
	se, err := scanSession(s.queryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: read session: %w", err)
	}
	return se, nil
}

// LiveSessions lists the sessions that have not ended, oldest first. It
// reads the database only after a change (listCache).
func (s *Store) LiveSessions(ctx context.Context) ([]Session, error) {
	out, err := s.live.get(ctx, func(ctx context.Context) ([]Session, error) {
		return queryAll(ctx, s, scanSession, `SELECT `+sessionColumns+` FROM sessions WHERE status NOT IN (?, ?) ORDER BY created_at, id`,
			StatusClosed, StatusError)
	})
	if err != nil {
		return nil, fmt.Errorf("store: live sessions: %w", err)
	}
	return out, nil
}

// UpdateSession writes a session's mutable fields (status, title, agent
// session id, error) and its updated time.
func (s *Store) UpdateSession(ctx context.Context, se Session) error {
	defer s.live.invalidate()
	res, err := s.db.ExecContext(ctx,
		`UPDATE sessions SET status = ?, title = ?, agent_session_id = ?, error = ?, updated_at = ? WHERE id = ?`,
		se.Status, se.Title, se.AgentSessionID, se.Error, millis(se.UpdatedAt), se.ID)
	if err != nil {
		return fmt.Errorf("store: update session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// SetSessionSettings writes a session's agent settings.
func (s *Store) SetSessionSettings(ctx context.Context, id string, st Settings) error {
	defer s.live.invalidate()
	res, err := s.exec(ctx, `UPDATE sessions SET model = ?, permission_mode = ?, max_thinking_tokens = ? WHERE id = ?`,
		st.Model, st.PermissionMode, st.MaxThinkingTokens, id)
	if err != nil {
		return fmt.Errorf("store: session settings: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// AddSessionUsage adds one turn's usage to a session's and returns the
// session's new totals.
func (s *Store) AddSessionUsage(ctx context.Context, id string, u Usage) (Usage, error) {
	defer s.live.invalidate()
	var t Usage
	err := s.db.QueryRowContext(ctx, `UPDATE sessions SET turns = turns + ?, input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
		cache_read_tokens = cache_read_tokens + ?, cache_creation_tokens = cache_creation_tokens + ?, cost_usd = cost_usd + ?
		WHERE id = ? RETURNING turns, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd`,
		u.Turns, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens, u.CostUSD, id).
		Scan(&t.Turns, &t.InputTokens, &t.OutputTokens, &t.CacheReadTokens, &t.CacheCreationTokens, &t.CostUSD)
	if errors.Is(err, sql.ErrNoRows) {
		return Usage{}, ErrNotFound
	}
	if err != nil {
		return Usage{}, fmt.Errorf("store: session usage: %w", err)
	}
	return t, nil
}

// RememberMessage records that a client message id was taken for a session;
// it reports false when the id was already there (a re-sent message).
func (s *Store) RememberMessage(ctx context.Context, sessionID, messageID string, now time.Time) (bool, error) {
	res, err := s.exec(ctx, `INSERT OR IGNORE INTO client_messages (session_id, message_id, created_at) VALUES (?, ?, ?)`,
		sessionID, messageID, millis(now))
	if err != nil {
		return false, fmt.Errorf("store: remember message: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// AllSessions lists every session, ended ones too, oldest first.
func (s *Store) AllSessions(ctx context.Context) ([]Session, error) {
	out, err := queryAll(ctx, s, scanSession, `SELECT `+sessionColumns+` FROM sessions ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: sessions: %w", err)
	}
	return out, nil
}

// SessionDigest is what the session history shows of a session's logged
// conversation.
type SessionDigest struct {
	// First is the frame of the session's first event of the first type
	// asked for; nil when it has none.
	First []byte
	// Count is how many of its events are of the types asked for.
	Count int
}

// SessionDigest reads, from the events the log still holds of a session,
// the first of types[0] and the number of those of any of types.
func (s *Store) SessionDigest(ctx context.Context, sessionID string, types ...string) (SessionDigest, error) {
	var d SessionDigest
	if len(types) == 0 {
		return d, nil
	}
	err := s.queryRow(ctx, `SELECT frame FROM events WHERE session_id = ? AND type = ? ORDER BY seq LIMIT 1`, sessionID, types[0]).Scan(&d.First)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("store: session digest: %w", err)
	}
	for _, t := range types {
		var n int
		if err := s.queryRow(ctx, `SELECT COUNT(*) FROM events WHERE session_id = ? AND type = ?`, sessionID, t).Scan(&n); err != nil {
			return d, fmt.Errorf("store: session digest: %w", err)
		}
		d.Count += n
	}
	return d, nil
}
