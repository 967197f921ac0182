package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// ErrFull is returned (wrapped) by writes that failed because the disk or
// file system holding the database is full. SQLite rolls such a
// transaction back whole: the database stays as it was.
var ErrFull = errors.New("the disk holding the database is full")

// ErrCorrupt is returned (wrapped) by QuickCheck for a damaged database.
var ErrCorrupt = errors.New("the database is damaged")

// IsFull reports whether err is SQLite's report of a full disk, from any
// of the store's writes.
func IsFull(err error) bool {
	var se sqlite3.Error
	return errors.Is(err, ErrFull) || errors.As(err, &se) && se.Code == sqlite3.ErrFull
}

// full wraps err with ErrFull when SQLite reports a full disk.
func full(err error) error {
	if IsFull(err) && !errors.Is(err, ErrFull) {
		return fmt.Errorf("%w: %w", ErrFull, err)
	}
	return err
}

// damaged reports whether SQLite found the database file damaged or not a
// database at all.
func damaged(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB)
}

// QuickCheck runs SQLite's quick_check over the whole database (every page
// and index entry, without matching indexes to their tables): it reads the
// database once, a second or so per GiB.
func (s *Store) QuickCheck(ctx context.Context) error {
	rows, err := s.rdb.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		// A damaged first page (the header, the schema's root) fails the
		// connection or the query before the check can run.
		if damaged(err) {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return fmt.Errorf("store: quick_check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("store: quick_check: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		// SQLite stops a check it cannot go on with (a page it cannot
		// parse) with an error: that is damage too.
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if len(problems) > 0 {
		if len(problems) > 5 {
			problems = append(problems[:5], fmt.Sprintf("and %d more", len(problems)-5))
		}
		return fmt.Errorf("%w: %s", ErrCorrupt, strings.Join(problems, "; "))
	}
	return nil
}

// Backup copies the database at src, which a daemon may be writing, to a
// new file dest with SQLite's online backup API: the copy is one
// transaction's view of the database (writers in WAL mode go on meanwhile).
// The copy is written next to dest, checked with quick_check, synced and
// then renamed to dest, 0600; dest must not exist. It returns the copy's
// size in bytes.
func Backup(ctx context.Context, src, dest string) (int64, error) {
	if _, err := os.Stat(src); err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	if _, err := os.Lstat(dest); err == nil {
		return 0, fmt.Errorf("store: backup: %s exists; remove it or name another file", dest)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	if err := tmp.Chmod(0o600); err != nil {
		return 0, fmt.Errorf("store: backup: %w", errors.Join(err, tmp.Close()))
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}

	q := url.Values{}
	q.Set("_busy_timeout", "5000")
	q.Set("mode", "ro")
	from, err := sql.Open("sqlite3", "file:"+src+"?"+q.Encode())
	if err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	defer from.Close()
	to, err := sql.Open("sqlite3", "file:"+tmpName+"?_busy_timeout=5000")
	if err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	defer to.Close()
	if err := copyDatabase(ctx, from, to); err != nil {
		return 0, fmt.Errorf("store: backup: %w", full(err))
	}
	// The copy keeps the source's WAL mode; a copy in one file is what a
	// backup is to be, so that copying dest alone restores everything.
	if _, err := to.ExecContext(ctx, "PRAGMA journal_mode=DELETE"); err != nil {
		return 0, fmt.Errorf("store: backup: %w", full(err))
	}
	copied := &Store{db: to, rdb: to}
	if err := copied.QuickCheck(ctx); err != nil {
		return 0, fmt.Errorf("store: backup: the copy: %w", err)
	}
	if err := to.Close(); err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	if err := syncFile(tmpName); err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	if err := os.Rename(tmpName, dest); err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	if err := syncFile(filepath.Dir(dest)); err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	fi, err := os.Stat(dest)
	if err != nil {
		return 0, fmt.Errorf("store: backup: %w", err)
	}
	return fi.Size(), nil
}

// copyDatabase copies from's main database over to's in one step of the
// backup API: one read transaction on from, so that the copy is
// consistent whatever writers do meanwhile.
func copyDatabase(ctx context.Context, from, to *sql.DB) error {
	src, err := from.Conn(ctx)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := to.Conn(ctx)
	if err != nil {
		return err
	}
	defer dst.Close()
	return dst.Raw(func(d any) error {
		return src.Raw(func(s any) error {
			b, err := d.(*sqlite3.SQLiteConn).Backup("main", s.(*sqlite3.SQLiteConn), "main")
			if err != nil {
				return err
			}
			for {
				done, err := b.Step(-1)
				if err != nil || done {
					return errors.Join(err, b.Close())
				}
				// Busy or locked: another connection holds a lock for a
				// moment (in WAL mode only while it recovers the log).
				select {
				case <-ctx.Done():
					return errors.Join(ctx.Err(), b.Close())
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	})
}

func syncFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
