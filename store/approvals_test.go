package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestApprovalsBySession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	harmless := Approval{SessionID: "s1", ToolCallID: "toolu_1", Source: "hooks", Payload: []byte(`{"tool":"Read"}`)}
	dangerous := Approval{SessionID: "s2", ToolCallID: "toolu_1", Source: "hooks", Payload: []byte(`{"tool":"Bash"}`)}
	for _, a := range []Approval{harmless, dangerous} {
		if err := ask(s, a, now); err != nil {
			t.Fatalf("create %s: %v", a.SessionID, err)
		}
	}
	// A second pending question with the same id in one session leaves
	// the first untouched (the event is logged all the same).
	again := harmless
	again.Payload = []byte(`{"tool":"Write"}`)
	if err := ask(s, again, now); err != nil {
		t.Fatal(err)
	}
	if pending, _ := s.PendingApprovals(ctx); len(pending) != 2 || string(pending[0].Payload) != `{"tool":"Read"}` {
		t.Fatalf("pending after asking s1's id again = %+v", pending)
	}
	if err := s.ResolveApproval(ctx, "s1", "toolu_1", "approved", now); err != nil {
		t.Fatal(err)
	}
	pending, err := s.PendingApprovals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].SessionID != "s2" || string(pending[0].Payload) != `{"tool":"Bash"}` {
		t.Fatalf("pending after answering s1's question = %+v, want only s2's, untouched", pending)
	}
	// Answered, the id may be asked again in its session.
	if err := ask(s, again, now); err != nil {
		t.Fatalf("asking an answered id again: %v", err)
	}
	if pending, _ := s.PendingApprovals(ctx); len(pending) != 2 || pending[0].SessionID != "s1" || string(pending[0].Payload) != `{"tool":"Write"}` {
		t.Fatalf("pending after asking an answered id again = %+v", pending)
	}
}

// askedSeq numbers the events ask logs.
var askedSeq atomic.Int64

// ask logs an approval_required event that carries a, as the event log
// does.
func ask(s *Store, a Approval, now time.Time) error {
	seq := askedSeq.Add(1)
	return s.AppendEvents(context.Background(), []Event{{Seq: seq, SessionID: a.SessionID, Type: "approval_required", Frame: []byte("{}"), CreatedAt: now, Approval: &a}}, nil)
}

func TestApprovalsMigrationKeepsPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tether.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"0001_devices.sql", "0002_sessions.sql", "0003_approvals.sql"} {
		body, err := migrations.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 3`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO approvals (tool_call_id, session_id, source, payload, created_at) VALUES ('toolu_9', 's9', 'hooks', X'7B7D', 1),
		('toolu_8', 's9', 'hooks', X'7B7D', 2)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE approvals SET status = 'answered', decision = 'approved' WHERE tool_call_id = 'toolu_8'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pending, err := s.PendingApprovals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].SessionID != "s9" || pending[0].ToolCallID != "toolu_9" {
		t.Fatalf("pending after migrating = %+v, want s9/toolu_9", pending)
	}
	if err := ask(s, Approval{SessionID: "s10", ToolCallID: "toolu_9", Source: "hooks", Payload: []byte("{}")}, time.Now()); err != nil {
		t.Fatalf("the same id in another session after migrating: %v", err)
	}
}
