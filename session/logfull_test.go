package session

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// TestLogRefusesEventsOnAFullDisk fills a small tmpfs holding the database
// with events: the log refuses new ones with ErrLogFull, nothing committed
// before is lost or damaged, and once space is freed (and the refusal has
// run out) events are logged again under seqs never handed out before.
func TestLogRefusesEventsOnAFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Skipf("skipped: mounting a small tmpfs needs root: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Error(err)
		}
	})
	// Room to free later, as a user would by deleting something.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	path := filepath.Join(dir, "tether.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewEventLog(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	l.now = func() time.Time { return time.Unix(0, clock.Load()) }
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(runCtx); close(done) }()

	big := Entry{SessionID: "s", Type: wire.TypeStreamChunk, Payload: wire.StreamChunk{SessionID: "s", MessageID: "m", Content: strings.Repeat("z", 4000)}}
	var refused error
	var handedOut int64
	for range 2000 { // 1 MiB holds about 200 such events
		seq, err := l.Append(big)
		if err != nil {
			refused = err
			break
		}
		handedOut = seq
		waitFor(t, func() bool { return l.Flushed() == seq || l.Full() != nil })
	}
	if !errors.Is(refused, ErrLogFull) || !errors.Is(refused, store.ErrFull) {
		t.Fatalf("a full disk: Append said %v", refused)
	}
	t.Log(refused)
	flushed := l.Flushed()
	if flushed == 0 || flushed >= handedOut {
		t.Fatalf("flushed %d of %d: the disk never filled or nothing was logged", flushed, handedOut)
	}
	if err := st.QuickCheck(ctx); err != nil {
		t.Fatalf("the database after the disk filled: %v", err)
	}
	evs, err := st.EventsAfter(ctx, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evs)) != flushed || evs[len(evs)-1].Seq != flushed {
		t.Fatalf("%d events in the store, up to seq %d; %d were committed", len(evs), evs[len(evs)-1].Seq, flushed)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(big); !errors.Is(err, ErrLogFull) {
		t.Fatalf("within the refusal: %v", err)
	}
	clock.Add(int64(fullRefusal))
	seq, err := l.Append(big)
	if err != nil {
		t.Fatalf("after space was freed: %v", err)
	}
	if seq <= handedOut {
		t.Fatalf("seq %d handed out again (up to %d were before)", seq, handedOut)
	}
	waitFor(t, func() bool { return l.Flushed() == seq })
	if l.Full() != nil {
		t.Error("still refusing after a write succeeded")
	}
	cancel()
	<-done
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.QuickCheck(ctx); err != nil {
		t.Fatalf("the database reopened: %v", err)
	}
	if last, err := st.LastSeq(ctx); err != nil || last != seq {
		t.Fatalf("reopened: last seq %d, %v; want %d", last, err, seq)
	}
}
