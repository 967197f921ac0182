// Package store keeps tether's state in one SQLite database: paired devices
// and pairing codes, and (with later migrations) sessions, the durable event
// log, approvals and notifications. The schema lives in numbered .sql
// migrations embedded in the binary; the database runs in WAL mode with
// foreign keys on, and its files are created 0600.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrNotFound is returned when a row asked for by key does not exist.
var ErrNotFound = errors.New("not found")

// Store is the tether database. Its methods are safe for concurrent use.
//
// Writes go through a pool of one connection, so that writers queue in Go
// instead of contending for SQLite's lock (whose busy handler sleeps in
// whole milliseconds); reads use a pool of their own and, thanks to WAL,
// never wait for a writer.
type Store struct {
	db  *sql.DB // writes
	rdb *sql.DB // reads

	stmts sync.Map // query text → *sql.Stmt, prepared once

	live    listCache[Session]  // LiveSessions
	pending listCache[Approval] // PendingApprovals
}

// prepared returns the statement for a fixed query on db, preparing it the
// first time: SQLite's prepare costs as much as a small query itself.
// Queries whose text depends on input are not to come through here.
func (s *Store) prepared(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	key := q
	if db == s.rdb {
		key = "r:" + q
	}
	if st, ok := s.stmts.Load(key); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if old, loaded := s.stmts.LoadOrStore(key, st); loaded {
		st.Close()
		return old.(*sql.Stmt), nil
	}
	return st, nil
}

func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := s.prepared(ctx, s.db, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.prepared(ctx, s.rdb, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// row is a *sql.Row or the error of preparing its statement.
type row struct {
	r   *sql.Row
	err error
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.r.Scan(dest...)
}

func (s *Store) queryRow(ctx context.Context, q string, args ...any) row {
	st, err := s.prepared(ctx, s.rdb, q)
	if err != nil {
		return row{err: err}
	}
	return row{r: st.QueryRowContext(ctx, args...)}
}

// Open opens (creating it 0600 if needed) the database at path and brings
// its schema up to date.
func Open(ctx context.Context, path string) (*Store, error) { return open(ctx, path, false) }

// OpenChecked is Open with SQLite's quick_check (QuickCheck) before the
// schema is brought up to date, so that a damaged database is reported
// (ErrCorrupt) before a migration writes to it. The daemon opens its
// database so; the CLI's short commands do not pay for the check.
func OpenChecked(ctx context.Context, path string) (*Store, error) { return open(ctx, path, true) }

func open(ctx context.Context, path string, check bool) (*Store, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	f.Close()
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_foreign_keys", "on")
	q.Set("_busy_timeout", "5000")
	// FULL: a commit survives a power loss. With NORMAL in WAL mode the
	// last commits can roll back, and the event log would then hand out
	// again seqs that phones already saw (and skip what follows). The log
	// commits in groups, so this costs no measurable throughput
	// (BENCHMARKS.md, "Durability").
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	q.Set("_query_only", "true")
	rdb, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Store{db: db, rdb: rdb}
	if check {
		if err := s.QuickCheck(ctx); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	if err := s.migrate(ctx); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.stmts.Range(func(_, st any) bool { st.(*sql.Stmt).Close(); return true })
	return errors.Join(s.rdb.Close(), s.db.Close())
}

func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	var current int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("store: read schema version: %w", err)
	}
	for _, name := range names {
		n, err := strconv.Atoi(strings.SplitN(path.Base(name), "_", 2)[0])
		if err != nil {
			return fmt.Errorf("store: migration %s: name must start with its number", name)
		}
		if n <= current {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", n)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
		current = n
	}
	return nil
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// queryAll runs a fixed query and scans every row with scan.
func queryAll[T any](ctx context.Context, s *Store, scan func(rowScanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
