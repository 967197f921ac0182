package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tetherdev/tether/store"
)

const backupUsage = `Usage:
  tether backup [--data DIR] FILE

Copies the database (devices, sessions, approvals, the event log) to FILE, a
new file, with SQLite's online backup API: a consistent copy, also while the
daemon runs and writes. The data directory's other files (certificates,
keys, the hook token) are not in it.
`

func backupCmd(ctx context.Context, args, envList []string, stdout, stderr io.Writer) int {
	env := envMap(envList)
	var cfg config
	fs := newFlagSet("backup", stderr, &cfg, env)
	fs.Usage = func() { fmt.Fprint(stderr, backupUsage) }
	if err := parseFlags(fs, args, env); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, backupUsage)
		return 2
	}
	src := filepath.Join(cfg.DataDir, dbFile)
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "tether backup: no database at %s: is --data (TETHER_DATA) the daemon's?\n", src)
		return 1
	}
	size, err := store.Backup(ctx, src, fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "tether backup:", err)
		return 1
	}
	fmt.Fprintf(stdout, "backed up %s to %s (%d bytes, checked).\n", src, fs.Arg(0), size)
	fmt.Fprintf(stdout, "To restore it: stop the daemon, remove %s-wal and %s-shm if they are there, and copy the backup to %s.\n", src, src, src)
	return 0
}

// damagedDatabase says, for an error of store.OpenChecked that found the
// daemon's database damaged, what to do; other errors it returns as they are.
func damagedDatabase(err error, dataDir string) error {
	if !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	db := filepath.Join(dataDir, dbFile)
	return fmt.Errorf(`%s failed SQLite's integrity check (quick_check): %w
Do not delete it. With no daemon running, copy the data directory aside, then either
  - restore a backup made with "tether backup FILE": remove %s-wal and %s-shm and copy FILE to %s, or
  - keep what is readable: sqlite3 %s .recover | sqlite3 recovered.db, and put recovered.db in its place`, db, err, db, db, db, db)
}
