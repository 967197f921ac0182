package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// workDir checks that dir exists, is a directory and lies inside a root,
// after resolving symlinks and "..", and returns its resolved path.
func (m *Manager) workDir(dir string) (string, error) {
	if dir == "" {
		return "", wire.Errorf(wire.CodeInvalidMessage, "working_directory is required")
	}
	if strings.ContainsRune(dir, 0) || !filepath.IsAbs(dir) {
		return "", wire.Errorf(wire.CodeInvalidMessage, "working_directory must be an absolute path")
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(dir))
	if err != nil {
		return "", wire.Errorf(wire.CodeInvalidMessage, "working_directory %q does not exist", dir)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", wire.Errorf(wire.CodeInvalidMessage, "working_directory %q is not a directory", dir)
	}
	inRoot := false
	for _, root := range m.cfg.Roots {
		if r := realPath(root); r != "" && within(real, r) {
			inRoot = true
		}
	}
	if !inRoot {
		return "", wire.Errorf(wire.CodeInvalidMessage, "working_directory %q is outside the allowed roots (%s)", dir, strings.Join(m.cfg.Roots, ", "))
	}
	// The data directory is hidden in every sandbox, but the daemon's own
	// file and git requests would see it: no session works in it, or in a
	// directory that holds it, except the home directory itself (the
	// default root), which is warned about at session_ready.
	if data := realPath(m.cfg.DataDir); data != "" && (within(real, data) || within(data, real) && real != realPath(m.cfg.Home)) {
		return "", wire.Errorf(wire.CodeInvalidMessage, "working_directory %q is, holds or lies in tether's data directory (%s): sessions may not work there", dir, m.cfg.DataDir)
	}
	return real, nil
}

// realPath is p with its symbolic links resolved; a path that does not
// exist yet is only cleaned; "" stays "".
func realPath(p string) string {
	if p == "" {
		return ""
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		// Only a relative path needs the process's working directory,
		// and it has none: nothing lies within such a path.
		return ""
	}
	return abs
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel)
}

// CheckWorkDir returns the directory a session asked to work in dir would
// work in, or the error its start would meet.
func (m *Manager) CheckWorkDir(dir string) (string, error) { return m.workDir(dir) }

// WorkDir returns the working directory of a session (live or ended), for
// git and file requests, checked again against the roots and the data
// directory: a session observed through hooks names its directory itself
// (a terminal in "/"), and the roots may have changed since.
func (m *Manager) WorkDir(ctx context.Context, sessionID string) (string, error) {
	// A short read on the store's read-only connection, which never waits
	// for the writer: not cancellable, which spares database/sql and the
	// driver a goroutine each (store.BenchmarkQuickRead), on every file and
	// git request.
	rec, err := m.cfg.Store.Session(context.WithoutCancel(ctx), sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return "", errNotFound(sessionID)
	}
	if err != nil {
		return "", err
	}
	dir, err := m.workDir(rec.WorkingDirectory)
	if err != nil {
		return "", wire.Errorf(wire.CodePathOutsideRoot, "session %q: its files and git are not served: %s", sessionID, err.(*wire.Error).Message)
	}
	return dir, nil
}
