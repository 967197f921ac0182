package store

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"testing"
	"time"
)

func TestTranscriptMarks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.CreateSession(ctx, Session{ID: "cc-1", Agent: "claude-code", Source: "hooks", Status: StatusIdle, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.TranscriptMark(ctx, "cc-1"); ok || err != nil {
		t.Fatalf("before any read: ok %v, %v", ok, err)
	}
	for _, m := range []TranscriptMark{{"p/a.jsonl", "2049:17", 120}, {"p/a.jsonl", "2049:18", 0}} {
		if err := s.SetTranscriptMark(ctx, "cc-1", m); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.TranscriptMark(ctx, "cc-1"); !ok || err != nil || got != m {
			t.Fatalf("mark = %+v %v %v, want %+v", got, ok, err, m)
		}
	}
}

// TestTranscriptMarkMigration: an offset recorded before files had an
// identity is kept, with none.
func TestTranscriptMarkMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tether.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	for _, name := range names[:7] {
		body, _ := migrations.ReadFile(name)
		if _, err := db.Exec(string(body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 7`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO sessions (id, agent, source, working_directory, title, status, created_at, updated_at) VALUES ('cc-1', 'claude-code', 'hooks', '/p', 'p', 'idle', 1, 1);
		INSERT INTO transcripts (session_id, path, read_to) VALUES ('cc-1', 'p/a.jsonl', 99)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, ok, err := s.TranscriptMark(ctx, "cc-1"); !ok || err != nil || got != (TranscriptMark{Path: "p/a.jsonl", Offset: 99}) {
		t.Fatalf("after migrating: %+v %v %v", got, ok, err)
	}
}
