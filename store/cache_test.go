package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// TestListsFollowEveryWrite checks, for every method that writes sessions
// or questions, that the cached listings afterwards are what a Store with
// nothing cached reads from the same file.
func TestListsFollowEveryWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := openTest(t)
	now := time.Now().Truncate(time.Millisecond)
	old := now.Add(-48 * time.Hour)
	se := Session{ID: "s1", Agent: "demo", Source: SourceSandbox, WorkingDirectory: "/w", Status: StatusStarting, CreatedAt: now, UpdatedAt: now}
	hook := Session{ID: "h1", Agent: "claude-code", Source: SourceHooks, WorkingDirectory: "/w", Status: StatusIdle, CreatedAt: old, UpdatedAt: old}
	q := Approval{SessionID: "s1", ToolCallID: "toolu_1", Source: "agent", Payload: []byte(`{"tool":"Bash"}`)}
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"CreateSession", func() error { return s.CreateSession(ctx, se) }},
		{"CreateSession of a hook", func() error { return s.CreateSession(ctx, hook) }},
		{"CreateSession of a quiet hook", func() error { h := hook; h.ID = "h2"; return s.CreateSession(ctx, h) }},
		{"UpdateSession", func() error { se.Status, se.Title = StatusBusy, "a title"; return s.UpdateSession(ctx, se) }},
		{"SetSessionSettings", func() error { return s.SetSessionSettings(ctx, "s1", Settings{Model: "opus"}) }},
		{"AddSessionUsage", func() error { _, err := s.AddSessionUsage(ctx, "s1", Usage{Turns: 1, InputTokens: 7}); return err }},
		{"MakeTerminal", func() error { return s.MakeTerminal(ctx, "h1", "/elsewhere", now) }},
		{"AppendEvents with a question", func() error { return ask(s, q, now) }},
		{"ResolveApproval", func() error { return s.ResolveApproval(ctx, "s1", "toolu_1", "approved", now) }},
		{"Prune of the quiet hook", func() error {
			_, err := s.Prune(ctx, Retention{MaxEvents: 1000, MaxBytes: 1 << 30, MaxAge: 24 * time.Hour}, now)
			return err
		}},
		{"UpdateSession to closed", func() error { se.Status = StatusClosed; return s.UpdateSession(ctx, se) }},
	} {
		// Fill the caches, write, then compare with a fresh reader.
		if _, err := s.LiveSessions(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PendingApprovals(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.write(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		fresh, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		same(t, w.name+": live sessions", s.LiveSessions, fresh.LiveSessions)
		same(t, w.name+": pending questions", s.PendingApprovals, fresh.PendingApprovals)
		fresh.Close()
	}
}

func same[T any](t *testing.T, what string, cached, fresh func(context.Context) ([]T, error)) {
	t.Helper()
	got, err := cached(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, err := fresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

// TestListCacheDropsALoadThatRacedAWrite: a load that a write overlapped
// may have read the table before the write: it is returned, not kept.
func TestListCacheDropsALoadThatRacedAWrite(t *testing.T) {
	t.Parallel()
	var c listCache[int]
	loads := 0
	load := func(rows ...int) func(context.Context) ([]int, error) {
		return func(context.Context) ([]int, error) { loads++; return rows, nil }
	}
	racing := func(context.Context) ([]int, error) {
		loads++
		c.invalidate() // a write committed while this load ran
		return []int{1}, nil
	}
	if got, _ := c.get(context.Background(), racing); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("racing load returned %v", got)
	}
	if got, _ := c.get(context.Background(), load(1, 2)); !reflect.DeepEqual(got, []int{1, 2}) || loads != 2 {
		t.Fatalf("after a racing load: %v, %d loads; want a new load", got, loads)
	}
	got, _ := c.get(context.Background(), load(9))
	if !reflect.DeepEqual(got, []int{1, 2}) || loads != 2 {
		t.Fatalf("cached: %v, %d loads; want the kept rows and no load", got, loads)
	}
	got[0] = 7 // the caller's copy
	if again, _ := c.get(context.Background(), load(9)); again[0] != 1 {
		t.Fatalf("a caller's change reached the cache: %v", again)
	}
	failing := func(context.Context) ([]int, error) { loads++; return nil, errors.New("disk on fire") }
	c.invalidate()
	if _, err := c.get(context.Background(), failing); err == nil {
		t.Fatal("a failed load's error was not returned")
	}
	if got, _ := c.get(context.Background(), load(3)); !reflect.DeepEqual(got, []int{3}) {
		t.Fatalf("after a failed load: %v; want a new load", got)
	}
}

// TestListsUnderConcurrentWrites runs readers against writers (for the
// race detector) and then checks the listings against a fresh reader.
func TestListsUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := openTest(t)
	now := time.Now()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.LiveSessions(ctx); err != nil {
					t.Error(err)
				}
				if _, err := s.PendingApprovals(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range 50 {
		id := fmt.Sprintf("s%d", i)
		if err := s.CreateSession(ctx, Session{ID: id, Agent: "demo", Source: SourceSandbox, WorkingDirectory: "/w", Status: StatusIdle, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		if err := ask(s, Approval{SessionID: id, ToolCallID: "toolu_1", Source: "agent", Payload: []byte(`{}`)}, now); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := s.ResolveApproval(ctx, id, "toolu_1", "approved", now); err != nil {
				t.Fatal(err)
			}
			if err := s.UpdateSession(ctx, Session{ID: id, Status: StatusClosed, UpdatedAt: now}); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	fresh, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	same(t, "live sessions", s.LiveSessions, fresh.LiveSessions)
	same(t, "pending questions", s.PendingApprovals, fresh.PendingApprovals)
	if live, _ := s.LiveSessions(ctx); len(live) != 33 {
		t.Errorf("%d live sessions, want 33", len(live))
	}
}
