package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// TranscriptMark is how far the daemon has read the transcript of a
// session it observes through hooks.
type TranscriptMark struct {
	// Path is the file, relative to the Claude Code projects directory.
	Path string
	// FileID names the file itself (device and inode), so that a file
	// replaced at the same path is told apart; empty when not known.
	FileID string
	// Offset is where the next read starts: just after a line's end.
	Offset int64
}

// TranscriptMark returns how far the transcript of an observed session was
// read; ok is false before any read.
func (s *Store) TranscriptMark(ctx context.Context, sessionID string) (m TranscriptMark, ok bool, err error) {
	err = s.queryRow(ctx, `SELECT path, file_id, read_to FROM transcripts WHERE session_id = ?`, sessionID).Scan(&m.Path, &m.FileID, &m.Offset)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("store: transcript mark: %w", err)
	}
	return m, true, nil
}

// SetTranscriptMark records how far the transcript of an observed session
// was read.
func (s *Store) SetTranscriptMark(ctx context.Context, sessionID string, m TranscriptMark) error {
	if _, err := s.exec(ctx, `INSERT INTO transcripts (session_id, path, file_id, read_to) VALUES (?, ?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET path = excluded.path, file_id = excluded.file_id, read_to = excluded.read_to`,
		sessionID, m.Path, m.FileID, m.Offset); err != nil {
		return fmt.Errorf("store: set transcript mark: %w", err)
	}
	return nil
}
