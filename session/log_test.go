package session

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tetherdev/tether/internal/eventually"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

func newTestLog(t testing.TB) (*EventLog, *store.Store, func()) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewEventLog(context.Background(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(func() { stop(); st.Close() })
	return l, st, stop
}

func chunk(i int) Entry {
	return Entry{SessionID: "s", Type: wire.TypeStreamChunk, Payload: wire.StreamChunk{SessionID: "s", MessageID: "m", Content: "chunk"}}
}

func TestLogDeliversCommittedEventsInOrder(t *testing.T) {
	l, st, _ := newTestLog(t)
	var mu sync.Mutex
	var got []store.Event
	sub := l.Subscribe(func(e store.Event) bool {
		// Delivered only once it is in the store.
		if evs, err := st.EventsAfter(context.Background(), e.Seq-1, 1); err != nil || len(evs) != 1 || evs[0].Seq != e.Seq {
			t.Errorf("seq %d delivered before it was committed", e.Seq)
		}
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
		return true
	})
	defer sub.Close()
	if _, err := sub.Replay(context.Background(), 0, nil, func(store.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := l.Append(chunk(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 100 })
	for i, e := range got {
		var env wire.Envelope
		if err := json.Unmarshal(e.Frame, &env); err != nil || env.Seq != int64(i+1) || e.Seq != int64(i+1) || env.Type != wire.TypeStreamChunk {
			t.Fatalf("event %d: seq %d, frame %s", i, e.Seq, e.Frame)
		}
	}
}

func TestReplayDuringAppendsHasNoGapOrDuplicate(t *testing.T) {
	l, _, _ := newTestLog(t)
	const total = 20000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range total {
			l.Append(chunk(i))
		}
	}()
	// Join while events are being written, asking for everything from 0.
	for l.Flushed() < total/4 {
		time.Sleep(time.Millisecond)
	}
	var mu sync.Mutex
	var seqs []int64
	sub := l.Subscribe(func(e store.Event) bool { mu.Lock(); seqs = append(seqs, e.Seq); mu.Unlock(); return true })
	defer sub.Close()
	if _, err := sub.Replay(context.Background(), 0, nil, func(e store.Event) error {
		mu.Lock()
		seqs = append(seqs, e.Seq)
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seqs) >= total })
	mu.Lock()
	defer mu.Unlock()
	if len(seqs) != total {
		t.Fatalf("got %d events, want %d", len(seqs), total)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("position %d holds seq %d", i, s)
		}
	}
}

func TestLogSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.db")
	st, _ := store.Open(context.Background(), path)
	l, _ := NewEventLog(context.Background(), st, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	for i := range 10 {
		l.Append(chunk(i))
	}
	cancel()
	<-done
	st.Close()

	st2, _ := store.Open(context.Background(), path)
	defer st2.Close()
	l2, err := NewEventLog(context.Background(), st2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if l2.Flushed() != 10 {
		t.Fatalf("after restart the log continues after %d, want 10", l2.Flushed())
	}
	seq, _ := l2.Append(chunk(0))
	if seq != 11 {
		t.Fatalf("next seq %d, want 11", seq)
	}
}

func TestSlowReplayingSubscriberIsDropped(t *testing.T) {
	l, _, _ := newTestLog(t)
	sub := l.Subscribe(func(store.Event) bool { return true })
	defer sub.Close()
	// Never replays: live events pile up in its buffer past the bound.
	for i := range maxBuffered + 10 {
		l.Append(chunk(i))
	}
	waitFor(t, func() bool { return l.Flushed() == maxBuffered+10 })
	if _, err := sub.Replay(context.Background(), l.Flushed(), nil, func(store.Event) error { return nil }); err != ErrSubscriberBehind {
		t.Fatalf("Replay = %v, want ErrSubscriberBehind", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	eventually.True(t, "the condition", cond)
}

// BenchmarkAppend measures the durable log alone: events appended, committed
// in batches and handed to one subscriber.
func BenchmarkAppend(b *testing.B) {
	l, _, _ := newTestLog(b)
	var n int64
	var mu sync.Mutex
	sub := l.Subscribe(func(store.Event) bool { mu.Lock(); n++; mu.Unlock(); return true })
	defer sub.Close()
	sub.Replay(context.Background(), 0, nil, func(store.Event) error { return nil })
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		l.Append(chunk(i))
	}
	for {
		mu.Lock()
		done := n == int64(b.N)
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// A bridge event's entries and its sandbox mark commit together, a mark
// with no entries too, and committed is told after the commit.
func TestLogCommitsEntriesWithTheirSandboxMark(t *testing.T) {
	t.Parallel()
	l, st, _ := newTestLog(t)
	ctx := context.Background()
	now := time.Now()
	if err := st.CreateSession(ctx, store.Session{ID: "s", Agent: "demo", Source: "sandbox", WorkingDirectory: "/w", Status: store.StatusIdle, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	committed := make(chan int64, 3)
	for i, entries := range [][]Entry{{chunk(0), chunk(1)}, nil} {
		seq := int64(i + 1)
		mark := store.SandboxMark{SessionID: "s", Bridge: "42 7", Seq: seq}
		if err := l.AppendMarked(entries, mark, func() { committed <- seq }); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		<-committed
	}
	m, err := st.SandboxMarkOf(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if m.Bridge != "42 7" || m.Seq != 2 {
		t.Errorf("mark %+v, want bridge 42 7 at 2", m)
	}
	if evs, err := st.EventsAfter(ctx, 0, 10); err != nil || len(evs) != 2 {
		t.Errorf("events %d (%v), want the 2 entries", len(evs), err)
	}
}

// TestHoldSharesACommit: while a Hold is not released the writer commits
// nothing, so the events appended meanwhile go in one commit after the
// release; a hold never released delays the log by maxHold, no more.
func TestHoldSharesACommit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l, _, stop := newTestLog(t)
		defer stop()
		release := l.Hold()
		first, err := l.Append(chunk(1))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if l.Flushed() >= first {
			t.Fatalf("seq %d committed while the log was held", first)
		}
		second, _ := l.Append(chunk(2))
		release()
		release() // a second call does nothing
		synctest.Wait()
		if got := l.Flushed(); got != second {
			t.Fatalf("after the release: flushed %d, want %d", got, second)
		}

		l.Hold() // never released
		third, _ := l.Append(chunk(3))
		synctest.Wait()
		if l.Flushed() >= third {
			t.Fatal("committed at once despite the hold")
		}
		time.Sleep(maxHold)
		synctest.Wait()
		if got := l.Flushed(); got != third {
			t.Fatalf("a forgotten hold: flushed %d after maxHold, want %d", got, third)
		}
	})
}

// TestMarksWaitOnePerSession: a session's marks waiting for the writer are
// one, its latest, however many events its bridge sends meanwhile; every
// caller is told once they are committed.
func TestMarksWaitOnePerSession(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l, st, stop := newTestLog(t)
		defer stop()
		ctx := context.Background()
		now := time.Now()
		if err := st.CreateSession(ctx, store.Session{ID: "s", Agent: "demo", Source: "sandbox", WorkingDirectory: "/w", Status: store.StatusIdle, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		release := l.Hold()
		var told []int64
		for seq := int64(1); seq <= 100; seq++ {
			if err := l.AppendMarked(nil, store.SandboxMark{SessionID: "s", Bridge: "42 7", Seq: seq}, func() { told = append(told, seq) }); err != nil {
				t.Fatal(err)
			}
		}
		l.mu.Lock()
		waiting := len(l.marks)
		l.mu.Unlock()
		if waiting != 1 {
			t.Fatalf("%d marks wait for one session", waiting)
		}
		release()
		synctest.Wait()
		if len(told) != 100 || told[99] != 100 {
			t.Fatalf("told %d callers (last %v), want 100", len(told), told[len(told)-1:])
		}
		if m, err := st.SandboxMarkOf(ctx, "s"); err != nil || m.Seq != 100 {
			t.Fatalf("stored mark %+v, %v; want seq 100", m, err)
		}
	})
}
