package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/eventually"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/wire"
)

// runApproved has a demo session run shell commands, approved by policy.
func runApproved(t *testing.T, c *wstest.Client, id, cmd string) wire.ToolResult {
	t.Helper()
	c.Send(wire.TypeMessage, "", map[string]any{"session_id": id, "content": "run: " + cmd})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, forSession(id))
	c.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
	return tr
}

// reply reads until the answer to the request id, which must be of type typ.
func reply(t *testing.T, c *wstest.Client, id, typ string, v any) {
	t.Helper()
	env := c.Read()
	for env.ID != id {
		env = c.Read()
	}
	if env.Type != typ {
		t.Fatalf("%s answered %s %s", id, env.Type, env.Payload)
	}
	wstest.Decode(t, env, v)
}

// TestAgentGitConfigNeverRunsAsTheDaemon: a session writes its .git (as
// any agent can): an fsmonitor, hooks (in .git/hooks and through
// core.hooksPath), a clean filter, an external diff driver, a pager and
// an include of a file it wrote, each of which would write a marker
// outside the sandbox if run as the daemon. Then the phone asks for the
// status, the diff and a commit (an includeIf of a file it wrote too):
// every answer comes, no marker appears,
// and the commit's hook ran, inside the sandbox (it could write only the
// repository).
func TestAgentGitConfigNeverRunsAsTheDaemon(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	p := d.project
	gitIn(t, p, "config", "user.name", "Phone User")
	gitIn(t, p, "config", "user.email", "phone@example.com")
	os.WriteFile(filepath.Join(p, "a.txt"), []byte("one\n"), 0o644)
	gitIn(t, p, "add", ".")
	gitIn(t, p, "commit", "-q", "-m", "first")

	out := t.TempDir() // the daemon can write here; no sandbox sees it
	c, _ := d.phone(nil)
	const id = "git-attack"
	d.sandboxedSession(c, id, "auto_approve")
	// evil.sh NAME [FILE]: records that it ran (id > OUT/NAME); as a
	// filter or pager it passes its input through, as a text converter its
	// file, so that git goes on working.
	evil := "#!/bin/sh\nid > " + out + "/$1\ncase $1 in clean|smudge|pager) cat;; textconv) cat \"$2\";; esac\n"
	hook := "#!/bin/sh\nid > " + out + "/hook\necho inside > \"$(git rev-parse --show-toplevel)/hook-ran\"\nexit 0\n"
	e := "$PWD/.git/evil.sh"
	script := strings.Join([]string{
		"printf '" + evil + "' > .git/evil.sh && chmod +x .git/evil.sh",
		"git config core.fsmonitor \"" + e + " fsmonitor\"",
		"git config diff.external \"" + e + " external\"",
		"git config core.pager \"" + e + " pager\"",
		"git config filter.evil.clean \"" + e + " clean\"",
		"git config filter.evil.smudge \"" + e + " smudge\"",
		"git config diff.evil.textconv \"" + e + " textconv\"",
		"echo '* filter=evil diff=evil' > .gitattributes",
		"printf '[core]\\n\\tfsmonitor = " + e + " include\\n' > evil.cfg",
		"git config include.path ../evil.cfg",
		"printf '[core]\\n\\tpager = " + e + " includeif\\n' > evil-if.cfg",
		"git config \"includeIf.gitdir:$PWD/.path\" \"$PWD/evil-if.cfg\"",
		"mkdir -p .git/hooks myhooks",
		"printf '" + hook + "' > .git/hooks/pre-commit",
		"cp .git/hooks/pre-commit myhooks/post-commit",
		"chmod +x .git/hooks/pre-commit myhooks/post-commit",
		"echo two >> a.txt",
		"echo done",
	}, " && ")
	if tr := runApproved(t, c, id, script); !tr.Result.Success || !strings.Contains(tr.Result.Content, "done") {
		t.Fatalf("the agent could not write its .git: %+v", tr.Result)
	}

	var st struct{ Changes []struct{ Path string } }
	c.Send(wire.TypeGitStatusRequest, "st", map[string]any{"session_id": id})
	c.WaitFor(wire.TypeGitStatusResponse, &st, nil)
	if len(st.Changes) == 0 {
		t.Fatalf("status lists nothing: %+v", st)
	}
	var diff struct{ Files []struct{ Path string } }
	c.Send(wire.TypeGitDiff, "df", map[string]any{"session_id": id})
	c.WaitFor(wire.TypeGitDiffResponse, &diff, nil)
	if len(diff.Files) == 0 {
		t.Fatalf("diff lists nothing: %+v", diff)
	}
	var commit struct{ Hash string }
	c.Send(wire.TypeGitCommit, "ci", map[string]any{"session_id": id, "message": "from the phone", "files": []string{"a.txt"}})
	reply(t, c, "ci", wire.TypeGitCommitResponse, &commit)
	if commit.Hash == "" {
		t.Fatal("no commit")
	}
	// core.hooksPath too, for the next commit.
	runApproved(t, c, id, "git config core.hooksPath myhooks && echo three >> a.txt")
	c.Send(wire.TypeGitCommit, "ci2", map[string]any{"session_id": id, "message": "again", "files": []string{"a.txt"}})
	reply(t, c, "ci2", wire.TypeGitCommitResponse, &commit)

	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(out, e.Name()))
		t.Errorf("%s ran as the daemon: %s", e.Name(), b)
	}
	if b, err := os.ReadFile(filepath.Join(p, "hook-ran")); err != nil || string(b) != "inside\n" {
		t.Errorf("the user's commit hook did not run in the sandbox: %q %v", b, err)
	}
}

// uniqueSleep is a duration for sleep(1) that names this one process among
// the machine's.
func uniqueSleep() string {
	return fmt.Sprintf("301.%d%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
}

// sleeping reports whether a process with marker in its command line runs.
func sleeping(marker string) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil && strings.Contains(string(b), marker) {
			return true
		}
	}
	return false
}

// waitGone waits until no process with marker runs.
func waitGone(t *testing.T, marker string) {
	t.Helper()
	eventually.True(t, marker+" ends", func() bool { return !sleeping(marker) })
}

// hungRepo makes the project's git hang: its fsmonitor sleeps.
func hungRepo(t *testing.T, dir, marker string) {
	gitIn(t, dir, "config", "user.name", "A")
	gitIn(t, dir, "config", "user.email", "a@example.com")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "commit", "-q", "-m", "first")
	gitIn(t, dir, "config", "core.fsmonitor", "sh -c 'exec sleep "+marker+"' fsmonitor")
}

// TestHungGitKeepsHeartbeatsAndEndsWithConnection: a git_status_request
// whose git hangs (an fsmonitor that never answers) does not stop the
// connection: heartbeats are answered meanwhile; when the phone goes, the
// git sandbox and everything in it are killed.
func TestHungGitKeepsHeartbeatsAndEndsWithConnection(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	marker := uniqueSleep()
	hungRepo(t, d.project, marker)
	c, _ := d.phone(nil)
	const id = "hung-git"
	d.sandboxedSession(c, id, "ask")
	c.Send(wire.TypeGitStatusRequest, "st", map[string]any{"session_id": id})
	eventually.True(t, "the fsmonitor runs", func() bool { return sleeping(marker) })
	for i := range 3 {
		c.Send(wire.TypeHeartbeatPing, fmt.Sprintf("p%d", i), map[string]any{"timestamp": time.Now().UnixMilli()})
		c.WaitFor(wire.TypeHeartbeatPong, nil, func(e wire.Envelope) bool { return e.ID == fmt.Sprintf("p%d", i) })
	}
	c.WS.Close()
	waitGone(t, marker)
}

// TestHungGitMeetsItsDeadline: the same hung git, asked with a deadline,
// returns an error when it passes, and nothing of it outlives the call.
func TestHungGitMeetsItsDeadline(t *testing.T) {
	t.Parallel()
	caps := sandbox.Probe()
	if !caps.Bwrap.Available {
		t.Skip("no bubblewrap here")
	}
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	marker := uniqueSleep()
	hungRepo(t, dir, marker)
	g := sessionGit(&config{Roots: []string{dir}, DataDir: filepath.Join(t.TempDir(), "data")}, &caps, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	if _, err := g.Status(ctx, dir); err == nil {
		t.Fatal("a hung git answered")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the deadline of 1 s ended the call after %v", took)
	}
	waitGone(t, marker)
}

// TestHugeAgentOutputIsCutBeforeThePhone: an approved command prints
// 3 MB; the tool result reaches the phone cut to well under a megabyte,
// marked, and the session goes on.
func TestHugeAgentOutputIsCutBeforeThePhone(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "huge-output"
	d.startSession(c, id, "auto_approve")
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	tr := runApproved(t, c, id, "head -c 3000000 /dev/zero | tr '\\0' x; echo")
	if len(tr.Result.Content) > sandbox.MaxMessage || !strings.Contains(tr.Result.Content, "tether cut") {
		t.Fatalf("tool_result of %d bytes: %.200q", len(tr.Result.Content), tr.Result.Content)
	}
	if again := runApproved(t, c, id, "echo still-here"); !strings.Contains(again.Result.Content, "still-here") {
		t.Fatalf("after the huge output: %+v", again.Result)
	}
}

// TestHookCannotCarryTheUsersGitSecrets: the user's ~/.gitconfig holds a
// token (in an insteadOf URL) next to their identity. A pre-commit hook the
// agent planted copies every git configuration it can find into the
// working tree during the phone's commit: the commit has the user's
// identity, the copies have no token.
func TestHookCannotCarryTheUsersGitSecrets(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	home := filepath.Dir(d.project)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Phone User\n\temail = phone@example.com\n"+
		"[url \"https://ghp_SECRETTOKEN@github.com/\"]\n\tinsteadOf = https://github.com/\n"), 0o600)
	p := d.project
	os.WriteFile(filepath.Join(p, "a.txt"), []byte("one\n"), 0o644)
	gitIn(t, p, "add", ".")
	gitIn(t, p, "commit", "-q", "-m", "first")
	c, _ := d.phone(nil)
	const id = "git-secrets"
	d.sandboxedSession(c, id, "auto_approve")
	hook := "#!/bin/sh\\ncat ~/.gitconfig \\\"$GIT_CONFIG_GLOBAL\\\" ~/.config/git/config > leaked.txt 2>&1\\ngit config --list --show-origin >> leaked.txt 2>&1\\nexit 0\\n"
	runApproved(t, c, id, "printf '"+hook+"' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo two >> a.txt")
	var commit struct{ Hash string }
	c.Send(wire.TypeGitCommit, "ci", map[string]any{"session_id": id, "message": "from the phone", "files": []string{"a.txt"}})
	reply(t, c, "ci", wire.TypeGitCommitResponse, &commit)
	leaked, err := os.ReadFile(filepath.Join(p, "leaked.txt"))
	if err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	if strings.Contains(string(leaked), "SECRETTOKEN") {
		t.Fatalf("the hook read the user's token:\n%s", leaked)
	}
	if author := gitIn(t, p, "log", "-1", "--format=%an <%ae>"); strings.TrimSpace(author) != "Phone User <phone@example.com>" {
		t.Fatalf("the commit's author %q, want the user's identity from ~/.gitconfig", author)
	}
}
