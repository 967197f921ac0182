package gitops

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Location is where a repository lies, as found without running git.
type Location struct {
	// Top is the directory that holds .git.
	Top string
	// GitDir is the git directory: Top/.git, or what a .git file names
	// (a linked worktree's, a submodule's).
	GitDir string
	// CommonDir is a linked worktree's common directory; "" otherwise.
	CommonDir string
}

// Locate finds the repository dir belongs to, as git does: the first
// ancestor holding .git; ok is false when there is none. Paths come with
// their links resolved. The files it reads (a .git file, commondir) are the
// agent's to write: readSmall reads them.
func Locate(dir string) (loc Location, ok bool, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return Location{}, false, fmt.Errorf("%w: %w", ErrNotRepository, err)
	}
	dir = realOrSelf(dir)
	for d := dir; ; d = filepath.Dir(d) {
		dotGit := filepath.Join(d, ".git")
		info, err := os.Stat(dotGit)
		switch {
		case err == nil && info.IsDir():
			return Location{Top: d, GitDir: dotGit}, true, nil
		case err == nil:
			gitDir, err := pointedTo(dotGit, "gitdir:")
			if err != nil {
				return Location{}, false, err
			}
			l := Location{Top: d, GitDir: gitDir}
			if common, err := pointedTo(filepath.Join(gitDir, "commondir"), ""); err == nil {
				l.CommonDir = common
			}
			return l, true, nil
		}
		if d == filepath.Dir(d) {
			return Location{}, false, nil
		}
	}
}

// pointedTo is the path a file names after prefix, relative to the
// file's directory unless absolute, links resolved.
func pointedTo(name, prefix string) (string, error) {
	b, err := readSmall(name)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotRepository, err)
	}
	p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), prefix)
	if !ok || strings.TrimSpace(p) == "" {
		return "", fmt.Errorf("%w: %s does not name a directory", ErrNotRepository, name)
	}
	p = strings.TrimSpace(p)
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(name), p)
	}
	return realOrSelf(p), nil
}

// readSmall reads the first 4 KiB of a regular file an agent may have
// written: not through a link at its name, never blocking on a pipe or
// device put there instead.
func readSmall(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	return io.ReadAll(io.LimitReader(f, 4<<10))
}
