package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBackupWhileWriting copies the database while another connection
// commits events as fast as it can: every copy is a consistent snapshot
// (seqs 1…n without a gap), passes quick_check, and a later copy holds at
// least what was committed before it began.
func TestBackupWhileWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := openTest(t)
	var committed atomic.Int64
	stop, warm := make(chan struct{}), make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		frame := []byte(strings.Repeat("x", 200))
		for seq := int64(1); ; seq += 10 {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			var evs []Event
			for i := range int64(10) {
				evs = append(evs, Event{Seq: seq + i, SessionID: "s", Type: "stream_chunk", Frame: frame, CreatedAt: time.Now()})
			}
			if err := s.AppendEvents(ctx, evs, nil); err != nil {
				writerDone <- err
				return
			}
			committed.Store(seq + 9)
			if seq+9 == 2000 {
				close(warm) // some events first, so that no copy is empty
			}
		}
	}()
	select {
	case <-warm:
	case err := <-writerDone:
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i := range 3 {
		before := committed.Load()
		dest := filepath.Join(dir, fmt.Sprintf("copy%d.db", i))
		size, err := Backup(ctx, path, dest)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(dest); err != nil || fi.Size() != size || fi.Mode().Perm() != 0o600 {
			t.Fatalf("copy %d: %v, %v", i, fi, err)
		}
		if _, err := os.Stat(dest + "-wal"); !os.IsNotExist(err) {
			t.Errorf("copy %d has a WAL file beside it: %v", i, err)
		}
		c, err := Open(ctx, dest)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.QuickCheck(ctx); err != nil {
			t.Errorf("copy %d: %v", i, err)
		}
		last, err := c.LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := c.rdb.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != last || last < before {
			t.Errorf("copy %d holds %d events up to seq %d; %d were committed before it began", i, n, last, before)
		}
		c.Close()
	}
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatalf("the writer failed during the backups: %v", err)
	}
	if _, err := Backup(ctx, path, filepath.Join(dir, "copy0.db")); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a backup over an existing file: %v", err)
	}
	if _, err := Backup(ctx, filepath.Join(dir, "none.db"), filepath.Join(dir, "x.db")); err == nil {
		t.Error("a backup of no database succeeded")
	}
}

// TestQuickCheckFindsDamage damages a page of a closed database in place,
// as a failing disk would: the database still opens, quick_check tells.
func TestQuickCheckFindsDamage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := filledStore(t)
	if err := s.QuickCheck(ctx); err != nil {
		t.Fatalf("a sound database: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, path)

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("a database with one damaged page of events no longer opens: %v", err)
	}
	defer s.Close()
	err = s.QuickCheck(ctx)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("quick_check of a damaged database: %v", err)
	}
	t.Log(err)
}

// TestOpenCheckedBeforeMigrating: a damaged database whose schema is
// behind is reported damaged (ErrCorrupt, for the advice serve prints),
// before a migration writes to it, wherever the damage is: in the events'
// pages, in the first page's header, or in the schema's root on it.
func TestOpenCheckedBeforeMigrating(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		hurt func(t *testing.T, path string)
	}{
		{"events", damage},
		{"header", func(t *testing.T, path string) { overwrite(t, path, 0, 16) }},
		{"schema root", func(t *testing.T, path string) { overwrite(t, path, 100, 2048) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, path := filledStore(t)
			// As if written by the release before the last migration.
			if _, err := s.db.Exec("PRAGMA user_version = 1"); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tt.hurt(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := OpenChecked(context.Background(), path); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenChecked of a damaged database: %v, want ErrCorrupt", err)
			}
			if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
				t.Fatalf("the damaged database changed (%v): a migration ran on it", err)
			}
		})
	}
}

// damage overwrites half of a page in the middle of the closed database
// at path (of an events table filled beforehand): its header and cells.
func damage(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	overwrite(t, path, fi.Size()/4096/2*4096, 2048)
}

// overwrite writes n bytes of 0xa5 at off in the closed database at path.
func overwrite(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, n), off); err != nil {
		t.Fatal(err)
	}
}

// filledStore opens a new database and logs 2,000 events of 300 bytes in
// it: pages enough for damage to hit the events' table.
func filledStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tether.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for i := int64(1); i <= 2000; i++ {
		evs = append(evs, Event{Seq: i, SessionID: "s", Type: "stream_chunk", Frame: []byte(strings.Repeat("y", 300)), CreatedAt: time.Now()})
	}
	if err := s.AppendEvents(context.Background(), evs, nil); err != nil {
		t.Fatal(err)
	}
	return s, path
}
