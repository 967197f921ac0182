package anthropicmock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// ClaudeVersion is the Claude Code CLI version that scripts/install-deps
// installs and the tests run against.
const ClaudeVersion = "2.1.197"

// ClaudeBin returns the path of the Claude Code CLI for a test:
// $TETHER_CLAUDE_BIN when set, else .tools/bin/claude at the module root,
// where scripts/install-deps puts it. When the CLI is not there it skips the
// test, or fails it when $CI is set, since CI must run the real CLI. With
// -short it skips the test: the quick loop runs no real CLI.
func ClaudeBin(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("runs the Claude Code CLI: not with -short")
	}
	path, err := claudeBin()
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("Claude Code CLI missing under CI (run scripts/install-deps): %v", err)
	}
	tb.Skipf("Claude Code CLI not installed (run scripts/install-deps or set TETHER_CLAUDE_BIN): %v", err)
	return ""
}

func claudeBin() (string, error) {
	if p := os.Getenv("TETHER_CLAUDE_BIN"); p != "" {
		return checkExecutable(p)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return checkExecutable(filepath.Join(dir, ".tools", "bin", "claude"))
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
		return "", fmt.Errorf("claude binary: %w", err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("claude binary %s is not an executable file", path)
	}
	return path, nil
}

// ClaudeEnv returns a whole environment for running the Claude Code CLI
// against s: HOME set to home (keep it across processes to resume a
// session), the caller's PATH, ANTHROPIC_BASE_URL pointing at s, a dummy
// ANTHROPIC_API_KEY, and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 so that
// the CLI contacts nothing but s.
func (s *Server) ClaudeEnv(home string) []string {
	return []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"ANTHROPIC_BASE_URL=" + s.URL,
		"ANTHROPIC_API_KEY=sk-ant-mock-not-a-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	}
}
