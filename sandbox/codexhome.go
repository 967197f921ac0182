package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// codexShared are the entries of the user's ~/.codex a codex session sees,
// read-only: the login (auth.json) and the user's instructions. The rest,
// other sessions' rollouts, logs and history included, stays out.
var codexShared = []string{"auth.json", "AGENTS.md"}

// codexBinds gives the Codex CLI a ~/.codex of the session's own,
// StateDir/codex/home, which outlives the sandbox: the thread's rollout
// lands there, which resuming the session reads. The user's config.toml
// is copied into it when the session first starts (their model and
// providers apply; the CLI's changes stay with the session), and the
// entries of codexShared are bound in read-only.
func codexBinds(home, _, stateDir, _ string) ([]Bind, error) {
	if home == "" || stateDir == "" {
		return nil, nil
	}
	own := filepath.Join(stateDir, "codex", "home")
	if err := os.MkdirAll(own, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: codex state: %w", err)
	}
	user := filepath.Join(home, ".codex")
	if err := copyIfMissing(filepath.Join(user, "config.toml"), filepath.Join(own, "config.toml")); err != nil {
		return nil, err
	}
	binds := []Bind{{Src: own, Dst: user, Writable: true}}
	for _, name := range codexShared {
		p := filepath.Join(user, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			binds = append(binds, Bind{Src: p, Dst: p})
		}
	}
	return binds, nil
}

// copyIfMissing copies src to dst unless dst exists or src does not.
func copyIfMissing(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("sandbox: ~/.codex/config.toml: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return fmt.Errorf("sandbox: codex state: %w", err)
	}
	return nil
}
