package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// TranscriptOffset returns how far the transcript of an observed session
// was read, and which file that was; ok is false before any read.
func (s *Store) TranscriptOffset(ctx context.Context, sessionID string) (path string, offset int64, ok bool, err error) {
	err = s.queryRow(ctx, `SELECT path, read_to FROM transcripts WHERE session_id = ?`, sessionID).Scan(&path, &offset)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("store: transcript offset: %w", err)
	}
	return path, offset, true, nil
}

// SetTranscriptOffset records how far the transcript at path was read.
func (s *Store) SetTranscriptOffset(ctx context.Context, sessionID, path string, offset int64) error {
	if _, err := s.exec(ctx, `INSERT INTO transcripts (session_id, path, read_to) VALUES (?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET path = excluded.path, read_to = excluded.read_to`, sessionID, path, offset); err != nil {
		return fmt.Errorf("store: set transcript offset: %w", err)
	}
	return nil
}
