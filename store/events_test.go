package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestEventsNotificationsAndCursors(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	var evs []Event
	for i := int64(1); i <= 600; i++ { // more than one multi-row INSERT
		evs = append(evs, Event{Seq: i, SessionID: "s1", Type: "stream_chunk", Frame: []byte(fmt.Sprintf(`{"seq":%d}`, i)), CreatedAt: now})
	}
	evs[9].Type = "notification"
	if err := s.AppendEvents(ctx, evs, []Notification{{ID: "n10", Seq: 10, SessionID: "s1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, evs[:1], nil); err == nil {
		t.Fatal("a seq written twice was accepted")
	}
	if last, _ := s.LastSeq(ctx); last != 600 {
		t.Fatalf("LastSeq = %d", last)
	}
	got, err := s.EventsAfter(ctx, 595, 100)
	if err != nil || len(got) != 5 || got[0].Seq != 596 || string(got[4].Frame) != `{"seq":600}` {
		t.Fatalf("EventsAfter = %+v, %v", got, err)
	}

	pending, _ := s.PendingNotifications(ctx, "phone", 600)
	if len(pending) != 1 || pending[0].Seq != 10 {
		t.Fatalf("pending = %+v", pending)
	}
	if n, err := s.AckNotifications(ctx, "phone", []string{"n10", "unknown"}, now); err != nil || n != 1 {
		t.Fatalf("ack = %d, %v", n, err)
	}
	if n, _ := s.AckNotifications(ctx, "phone", []string{"n10"}, now); n != 0 {
		t.Fatal("acknowledged twice")
	}
	if pending, _ := s.PendingNotifications(ctx, "phone", 600); len(pending) != 0 {
		t.Fatalf("acked notification still pending: %+v", pending)
	}
	if pending, _ := s.PendingNotifications(ctx, "tablet", 600); len(pending) != 1 {
		t.Fatal("an ack by one device counted for another")
	}
	if acked, _ := s.AckedNotificationSeqs(ctx, "phone", 0); !acked[10] || len(acked) != 1 {
		t.Fatalf("acked seqs = %v", acked)
	}

	if _, ok, _ := s.DeviceCursor(ctx, "phone"); ok {
		t.Fatal("cursor before any was set")
	}
	s.SetDeviceCursor(ctx, "phone", 42)
	s.SetDeviceCursor(ctx, "phone", 7) // never moves back
	if seq, ok, err := s.DeviceCursor(ctx, "phone"); !ok || seq != 42 || err != nil {
		t.Fatalf("cursor = %d %v %v", seq, ok, err)
	}

	// Retention by count, then by age: the newest event always stays, so
	// that the next seq continues after it.
	if p, err := s.Prune(ctx, Retention{MaxEvents: 100, MaxBytes: 1 << 30, MaxAge: time.Hour}, now); err != nil || p.Events != 500 {
		t.Fatalf("prune by count: %+v, %v", p, err)
	}
	if first, _ := s.FirstSeq(ctx); first != 501 {
		t.Fatalf("FirstSeq after prune = %d", first)
	}
	if pending, _ := s.PendingNotifications(ctx, "tablet", 600); len(pending) != 0 {
		t.Fatal("a pruned notification is still pending")
	}
	if p, _ := s.Prune(ctx, Retention{MaxEvents: 1000, MaxBytes: 1 << 30, MaxAge: time.Minute}, now.Add(time.Hour)); p.Events != 99 {
		t.Fatalf("prune by age removed %d", p.Events)
	}
	if last, _ := s.LastSeq(ctx); last != 600 {
		t.Fatalf("LastSeq after everything aged out = %d, want 600", last)
	}
}

// TestPruneBySize keeps the newest events whose frames fit in MaxBytes.
func TestPruneBySize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	frame := bytes.Repeat([]byte("x"), 1000)
	var evs []Event
	for i := int64(1); i <= 50; i++ {
		evs = append(evs, Event{Seq: i, SessionID: "s", Type: "stream_chunk", Frame: frame, CreatedAt: now})
	}
	if err := s.AppendEvents(ctx, evs, nil); err != nil {
		t.Fatal(err)
	}
	p, err := s.Prune(ctx, Retention{MaxEvents: 1000, MaxBytes: 10_500, MaxAge: time.Hour}, now)
	if first, _ := s.FirstSeq(ctx); err != nil || p.Events != 40 || first != 41 {
		t.Fatalf("prune by size: %+v, %v, first %d; want 40 deleted, first 41", p, err, first)
	}
	// Even a bound smaller than one frame keeps the newest event.
	s.Prune(ctx, Retention{MaxEvents: 1000, MaxBytes: 1, MaxAge: time.Hour}, now)
	if first, _ := s.FirstSeq(ctx); first != 50 {
		t.Fatalf("first after a tiny bound = %d, want 50", first)
	}
}

// TestPruneTables: ended sessions without events, answered approvals and
// client message ids go with the log's retention; what is live stays.
func TestPruneTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	old := time.Now().Add(-48 * time.Hour).Truncate(time.Millisecond)
	now := time.Now()
	for _, se := range []Session{
		{ID: "ended", Agent: "demo", Source: "sandbox", WorkingDirectory: "/w", Status: StatusClosed, CreatedAt: old, UpdatedAt: old},
		{ID: "hook", Agent: "claude-code", Source: "hooks", WorkingDirectory: "/w", Status: StatusIdle, CreatedAt: old, UpdatedAt: old},
		{ID: "live", Agent: "demo", Source: "sandbox", WorkingDirectory: "/w", Status: StatusIdle, CreatedAt: old, UpdatedAt: old},
		{ID: "ended-with-events", Agent: "demo", Source: "sandbox", WorkingDirectory: "/w", Status: StatusClosed, CreatedAt: old, UpdatedAt: old},
		{ID: "only-in-x", Agent: "claude-code", Source: "sandbox", WorkingDirectory: "/x", Status: StatusClosed, CreatedAt: old, UpdatedAt: old},
		{ID: "older-in-y", Agent: "claude-code", Source: "sandbox", WorkingDirectory: "/y", Status: StatusClosed, CreatedAt: old, UpdatedAt: old.Add(-time.Hour)},
		{ID: "newer-in-y", Agent: "claude-code", Source: "sandbox", WorkingDirectory: "/y", Status: StatusError, CreatedAt: old, UpdatedAt: old},
	} {
		if err := s.CreateSession(ctx, se); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendEvents(ctx, []Event{
		{Seq: 1, SessionID: "ended-with-events", Type: "turn_complete", Frame: []byte("{}"), CreatedAt: now},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO client_messages VALUES ('live', 'old', ?), ('live', 'new', ?)`, millis(old), millis(now)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO approvals (tool_call_id, session_id, source, payload, status, created_at, resolved_at) VALUES
		('answered-long-ago', 'live', 'sandbox', x'7b7d', 'answered', ?1, ?1),
		('answered-now', 'live', 'sandbox', x'7b7d', 'answered', ?1, ?2),
		('pending-long', 'live', 'sandbox', x'7b7d', 'pending', ?1, NULL)`, millis(old), millis(now)); err != nil {
		t.Fatal(err)
	}
	p, err := s.Prune(ctx, Retention{MaxEvents: 1000, MaxBytes: 1 << 30, MaxAge: 24 * time.Hour}, now)
	if err != nil || p.Sessions != 3 || p.ClientMessages != 1 || p.Approvals != 1 {
		t.Fatalf("prune: %+v, %v; want the ended, the hook and the older /y session, one message id, one approval", p, err)
	}
	// A working directory keeps its newest sandboxed session, ended or
	// not: the history's look-alike check remembers it (sandboxWorkDirs).
	for id, want := range map[string]bool{"ended": false, "hook": false, "live": true, "ended-with-events": true,
		"only-in-x": true, "older-in-y": false, "newer-in-y": true} {
		if _, err := s.Session(ctx, id); (err == nil) != want {
			t.Errorf("session %s kept = %v, want %v", id, err == nil, want)
		}
	}
}

func TestSessions(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now().Truncate(time.Millisecond)
	se := Session{ID: "s1", Agent: "demo", Source: "sandbox", WorkingDirectory: "/w", Status: StatusStarting, Policy: "ask", CreatedAt: now, UpdatedAt: now}
	if err := s.CreateSession(ctx, se); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(ctx, se); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	se.Status, se.AgentSessionID = StatusIdle, "agent-1"
	if err := s.UpdateSession(ctx, se); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(ctx, "s1")
	if err != nil || got.Status != StatusIdle || got.AgentSessionID != "agent-1" || !got.CreatedAt.Equal(now) || !got.Live() {
		t.Fatalf("session = %+v, %v", got, err)
	}
	se.Status = StatusClosed
	s.UpdateSession(ctx, se)
	if live, _ := s.LiveSessions(ctx); len(live) != 0 {
		t.Fatalf("closed session listed live: %+v", live)
	}
	if _, err := s.Session(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if err := s.UpdateSession(ctx, Session{ID: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if fresh, _ := s.RememberMessage(ctx, "s1", "m1", now); !fresh {
		t.Fatal("first message id not fresh")
	}
	if fresh, _ := s.RememberMessage(ctx, "s1", "m1", now); fresh {
		t.Fatal("repeated message id fresh")
	}
	if fresh, _ := s.RememberMessage(ctx, "s2", "m1", now); !fresh {
		t.Fatal("message ids are per session")
	}
}

// BenchmarkPrune measures one retention pass over a log of 200,000 events
// of 300 bytes that is within its bounds (the hourly cost when nothing
// goes): the size bound reads every kept frame's length.
func BenchmarkPrune(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir()+"/bench.db")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	frame := bytes.Repeat([]byte("x"), 300)
	for base := int64(0); base < 200_000; base += 10_000 {
		evs := make([]Event, 10_000)
		for i := range evs {
			evs[i] = Event{Seq: base + int64(i) + 1, SessionID: "s", Type: "stream_chunk", Frame: frame, CreatedAt: now}
		}
		if err := s.AppendEvents(ctx, evs, nil); err != nil {
			b.Fatal(err)
		}
	}
	r := Retention{MaxEvents: 1_000_000, MaxBytes: 1 << 30, MaxAge: time.Hour}
	for b.Loop() {
		if p, err := s.Prune(ctx, r, now); err != nil || p.Events != 0 {
			b.Fatalf("%+v %v", p, err)
		}
	}
}

func TestSessionEventsPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	var evs []Event
	for i := int64(1); i <= 50; i++ {
		sess := "a"
		if i%2 == 0 {
			sess = "b"
		}
		evs = append(evs, Event{Seq: i, SessionID: sess, Type: "stream_chunk", Frame: []byte(fmt.Sprintf(`{"seq":%d}`, i)), CreatedAt: time.Now()})
	}
	if err := s.AppendEvents(ctx, evs, nil); err != nil {
		t.Fatal(err)
	}
	seqs := func(es []Event) []int64 {
		var out []int64
		for _, e := range es {
			out = append(out, e.Seq)
		}
		return out
	}
	page, more, err := s.SessionEvents(ctx, "a", 0, 3, 1<<20)
	if err != nil || !more || fmt.Sprint(seqs(page)) != "[45 47 49]" {
		t.Fatalf("newest page = %v more=%v %v", seqs(page), more, err)
	}
	page, more, _ = s.SessionEvents(ctx, "a", 45, 3, 1<<20)
	if !more || fmt.Sprint(seqs(page)) != "[39 41 43]" {
		t.Fatalf("next page = %v more=%v", seqs(page), more)
	}
	page, more, _ = s.SessionEvents(ctx, "a", 5, 3, 1<<20)
	if more || fmt.Sprint(seqs(page)) != "[1 3]" {
		t.Fatalf("last page = %v more=%v", seqs(page), more)
	}
	// The byte bound cuts a page short, but a page holds one event at least.
	page, more, _ = s.SessionEvents(ctx, "b", 0, 10, 20)
	if !more || fmt.Sprint(seqs(page)) != "[48 50]" {
		t.Fatalf("byte-bound page = %v more=%v", seqs(page), more)
	}
	page, _, _ = s.SessionEvents(ctx, "b", 0, 10, 1)
	if fmt.Sprint(seqs(page)) != "[50]" {
		t.Fatalf("a page smaller than one event = %v", seqs(page))
	}
	if page, more, _ := s.SessionEvents(ctx, "none", 0, 10, 1<<20); len(page) != 0 || more {
		t.Fatalf("unknown session = %v more=%v", seqs(page), more)
	}
}

func TestSessionSettingsAndUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	se := Session{ID: "s1", Agent: "claude-code", Source: "sandbox", WorkingDirectory: "/w", Status: StatusIdle, CreatedAt: now, UpdatedAt: now,
		Settings: Settings{Model: "sonnet", PermissionMode: "plan"}}
	if err := s.CreateSession(ctx, se); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Session(ctx, "s1"); got.Settings != se.Settings {
		t.Fatalf("settings after create = %+v", got.Settings)
	}
	want := Settings{Model: "haiku", PermissionMode: "acceptEdits", MaxThinkingTokens: 4096}
	if err := s.SetSessionSettings(ctx, "s1", want); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddSessionUsage(ctx, "s1", Usage{Turns: 1, InputTokens: 10, OutputTokens: 5, CacheReadTokens: 3, CacheCreationTokens: 2, CostUSD: 0.25}); err != nil {
		t.Fatal(err)
	}
	total, err := s.AddSessionUsage(ctx, "s1", Usage{Turns: 1, InputTokens: 1, OutputTokens: 1, CostUSD: 0.5})
	if wantU := (Usage{Turns: 2, InputTokens: 11, OutputTokens: 6, CacheReadTokens: 3, CacheCreationTokens: 2, CostUSD: 0.75}); err != nil || total != wantU {
		t.Fatalf("totals = %+v, %v; want %+v", total, err, wantU)
	}
	// A status update keeps both.
	se.Status = StatusBusy
	if err := s.UpdateSession(ctx, se); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Session(ctx, "s1")
	if got.Settings != want || got.Usage != total {
		t.Fatalf("after UpdateSession: settings %+v usage %+v", got.Settings, got.Usage)
	}
	if err := s.SetSessionSettings(ctx, "nope", want); !errors.Is(err, ErrNotFound) {
		t.Fatalf("settings of no session: %v", err)
	}
	if _, err := s.AddSessionUsage(ctx, "nope", Usage{Turns: 1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("usage of no session: %v", err)
	}
}
