package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Look-alike working directories (<root>/a-b, <root>/a/b) share one
// directory of transcripts in the user's ~/.claude: a session in either
// gets its own instead, and keeps it once the look-alike is gone; a
// session in a directory of its own name shares the user's.
func TestLookAlikesKeepTheirTranscriptsApart(t *testing.T) {
	t.Parallel()
	home, root := t.TempDir(), t.TempDir()
	dashed, nested, solo := filepath.Join(root, "a-b"), filepath.Join(root, "a", "b"), filepath.Join(root, "solo")
	for _, d := range []string{filepath.Join(home, ".claude"), dashed, nested, solo} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	shared := filepath.Join(home, ".claude", "projects")
	sharesTranscripts := func(workDir, stateDir string) bool {
		t.Helper()
		binds, err := claudeBinds(home, workDir, stateDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range binds {
			if strings.HasPrefix(b.Src, shared+string(filepath.Separator)) {
				return true
			}
		}
		if _, err := os.Stat(filepath.Join(stateDir, "claude", "dot-claude", "projects", ClaudeProjectDir(workDir))); err != nil {
			t.Fatalf("%s has neither the user's transcripts nor its own: %v", workDir, err)
		}
		return false
	}
	dashedState, nestedState := t.TempDir(), t.TempDir()
	if sharesTranscripts(dashed, dashedState) || sharesTranscripts(nested, nestedState) {
		t.Fatal("a session in a look-alike directory shares the user's transcripts")
	}
	if err := os.RemoveAll(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if sharesTranscripts(dashed, dashedState) {
		t.Error("once its look-alike is gone, the session left its own transcripts")
	}
	if !sharesTranscripts(solo, t.TempDir()) || !sharesTranscripts(dashed, t.TempDir()) {
		t.Error("a session without a look-alike does not share the user's transcripts")
	}
}

// FuzzClaudeProjectDir: the name is the CLI's, every character but an
// ASCII letter or digit replaced by '-', as a regular expression does it
// (an invalid byte counting as one character).
func FuzzClaudeProjectDir(f *testing.F) {
	for _, s := range []string{"/home/dev/project", "/r/a-b", "/r/a.b/ü", "\xff\xfe/x", ""} {
		f.Add(s)
	}
	nonAlnum := regexp.MustCompile(`[^A-Za-z0-9]`)
	f.Fuzz(func(t *testing.T, dir string) {
		if got, want := ClaudeProjectDir(dir), nonAlnum.ReplaceAllString(dir, "-"); got != want {
			t.Fatalf("ClaudeProjectDir(%q) = %q, want %q", dir, got, want)
		}
	})
}
