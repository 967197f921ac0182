package openaimock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// CodexVersion is the Codex CLI version that scripts/install-deps installs
// and the tests run against.
const CodexVersion = "0.169.0"

// CodexBin returns the path of the Codex CLI for a test: $TETHER_CODEX_BIN
// when set, else .tools/bin/codex at the module root, where
// scripts/install-deps puts it. When the CLI is not there it skips the
// test, or fails it when $CI is set, since CI must run the real CLI. With
// -short it skips the test: the quick loop runs no real CLI.
func CodexBin(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("runs the Codex CLI: not with -short")
	}
	path, err := codexBin()
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("Codex CLI missing under CI (run scripts/install-deps): %v", err)
	}
	tb.Skipf("Codex CLI not installed (run scripts/install-deps or set TETHER_CODEX_BIN): %v", err)
	return ""
}

func codexBin() (string, error) {
	if p := os.Getenv("TETHER_CODEX_BIN"); p != "" {
		return checkExecutable(p)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return checkExecutable(filepath.Join(dir, ".tools", "bin", "codex"))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func checkExecutable(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("codex binary: %w", err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("codex binary %s is not an executable file", path)
	}
	return path, nil
}
