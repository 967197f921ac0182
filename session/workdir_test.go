package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/wire"
)

// TestWorkingDirectories: where a session may work, resolved; tether's
// data directory, and any directory that holds it but the home directory,
// are refused; a session in the home directory is warned; files and git
// are refused for a session whose directory left the roots.
func TestWorkingDirectories(t *testing.T) {
	home := t.TempDir()
	inBubble(t, func(c *Config) {
		c.Home = home
		c.Roots = []string{home}
		c.DataDir = filepath.Join(home, "work", ".tether")
	}, func(t *testing.T, f *fixture) {
		proj := filepath.Join(home, "work", "proj")
		for _, d := range []string{proj, f.cfg.DataDir, filepath.Join(f.cfg.DataDir, "sessions")} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(proj, filepath.Join(home, "link")); err != nil {
			t.Fatal(err)
		}
		for dir, want := range map[string]string{
			proj:                                     proj,
			filepath.Join(home, "link"):              proj,
			filepath.Join(proj, "..", "proj"):        proj,
			home:                                     home,
			filepath.Join(home, "work"):              "",
			f.cfg.DataDir:                            "",
			filepath.Join(f.cfg.DataDir, "sessions"): "",
			"/":                                      "",
		} {
			got, err := f.m.CheckWorkDir(dir)
			if got != want || (want == "") != (code(err) == wire.CodeInvalidMessage) {
				t.Errorf("%s: %q, %v; want %q", dir, got, err, want)
			}
		}
		id, err := f.m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: home}})
		if err != nil {
			t.Fatal(err)
		}
		f.settle()
		var ready wire.SessionReady
		if !f.last(id, wire.TypeSessionReady, &ready) || len(ready.Warnings) != 1 || !strings.Contains(ready.Warnings[0], "home directory") {
			t.Fatalf("session_ready in the home directory: %+v", ready)
		}
		if dir, err := f.m.WorkDir(context.Background(), id); err != nil || dir != home {
			t.Fatalf("WorkDir %q, %v", dir, err)
		}
		// The roots change under a session: its files are no longer served.
		f.cfg.Roots = []string{proj}
		f.restart()
		if _, err := f.m.WorkDir(context.Background(), id); code(err) != wire.CodePathOutsideRoot {
			t.Fatalf("WorkDir outside the roots: %v", err)
		}
		if _, err := f.m.WorkDir(context.Background(), "sess_nobody"); code(err) != wire.CodeSessionNotFound {
			t.Fatalf("WorkDir of no session: %v", err)
		}
	})
}
