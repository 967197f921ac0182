package store

import (
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

	// Retention by count, then by age.
	if n, err := s.PruneEvents(ctx, 100, time.Hour, now); err != nil || n != 500 {
		t.Fatalf("prune by count: %d, %v", n, err)
	}
	if first, _ := s.FirstSeq(ctx); first != 501 {
		t.Fatalf("FirstSeq after prune = %d", first)
	}
	if pending, _ := s.PendingNotifications(ctx, "tablet", 600); len(pending) != 0 {
		t.Fatal("a pruned notification is still pending")
	}
	if n, _ := s.PruneEvents(ctx, 1000, time.Minute, now.Add(time.Hour)); n != 100 {
		t.Fatalf("prune by age removed %d", n)
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
