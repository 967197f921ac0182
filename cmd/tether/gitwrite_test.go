package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// phoneDiff is the part of git_diff_response the phone acts on.
type phoneDiff struct {
	Files []struct {
		Path        string
		Fingerprint string
		Hunks       []struct{ Header string }
	}
}

func (d phoneDiff) fingerprint(t *testing.T, path string) string {
	t.Helper()
	for _, f := range d.Files {
		if f.Path == path {
			return f.Fingerprint
		}
	}
	t.Fatalf("%s not in the diff %+v", path, d)
	return ""
}

func askDiff(c *wstest.Client, id, session string) phoneDiff {
	var diff phoneDiff
	c.Send(wire.TypeGitDiff, id, map[string]any{"session_id": session})
	c.WaitFor(wire.TypeGitDiffResponse, &diff, func(e wire.Envelope) bool { return e.ID == id })
	return diff
}

// expectStatus waits for the git_status_response answering id.
func expectStatus(t *testing.T, c *wstest.Client, id string) map[string]any {
	t.Helper()
	var st map[string]any
	c.WaitFor(wire.TypeGitStatusResponse, &st, func(e wire.Envelope) bool { return e.ID == id })
	return st
}

func expectGitError(t *testing.T, c *wstest.Client, id, code, text string) {
	t.Helper()
	var ep wire.ErrorPayload
	c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == id })
	if ep.Code != code || !strings.Contains(ep.Message, text) {
		t.Fatalf("%s: %+v, want %s %q", id, ep, code, text)
	}
}

// TestGitWritesOverTheProtocol: from the phone, through the daemon and the
// session's git sandbox: branches, a hunk staged, a file discarded and
// recovered, a commit pushed to a bare remote, a pull, a branch created
// and checked out; bad requests answered with protocol codes. The agent
// planted a pre-push hook and a receivepack; neither runs.
func TestGitWritesOverTheProtocol(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	p := d.project
	// A remote on this machine must lie in the roots, as the session does.
	bare := filepath.Join(filepath.Dir(p), "remote.git")
	gitIn(t, p, "config", "user.name", "Phone User")
	gitIn(t, p, "config", "user.email", "phone@example.com")
	var body strings.Builder
	for i := 1; i <= 30; i++ {
		body.WriteString("line " + string(rune('a'+i%26)) + "\n")
	}
	os.WriteFile(filepath.Join(p, "a.txt"), []byte(body.String()), 0o644)
	gitIn(t, p, "add", ".")
	gitIn(t, p, "commit", "-q", "-m", "first")
	if out, err := exec.Command("git", "init", "-q", "--bare", "-b", "main", bare).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	gitIn(t, p, "remote", "add", "origin", bare)
	gitIn(t, p, "push", "-q", "-u", "origin", "main")
	lines := strings.Split(body.String(), "\n")
	lines[1], lines[25] = "second, edited", "twenty-sixth, edited"
	os.WriteFile(filepath.Join(p, "a.txt"), []byte(strings.Join(lines, "\n")), 0o644)
	os.WriteFile(filepath.Join(p, "scratch.txt"), []byte("notes\n"), 0o644)
	// What an agent could write into .git.
	marker := filepath.Join(t.TempDir(), "ran")
	os.WriteFile(filepath.Join(p, ".git", "hooks", "pre-push"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
	gitIn(t, p, "config", "remote.origin.receivepack", "touch "+marker+"; git-receive-pack")

	c, _ := d.phone(nil)
	const id = "gw"
	d.readySession(c, id, "ask")

	var branches struct {
		Current string
		Local   []struct {
			Name, Upstream string
			Ahead, Behind  int
		}
		Remotes []struct{ Name, URL string }
	}
	c.Send(wire.TypeGitBranches, "br", map[string]any{"session_id": id})
	c.WaitFor(wire.TypeGitBranchesResponse, &branches, nil)
	if branches.Current != "main" || len(branches.Local) != 1 || branches.Local[0].Upstream != "origin/main" ||
		len(branches.Remotes) != 1 || branches.Remotes[0].URL != bare {
		t.Fatalf("branches %+v", branches)
	}

	// Stage the second hunk only.
	diff := askDiff(c, "diff-1", id)
	c.Send(wire.TypeGitStage, "stage-hunk", map[string]any{"session_id": id, "path": "a.txt", "fingerprint": diff.fingerprint(t, "a.txt"), "hunk": 1})
	expectStatus(t, c, "stage-hunk")
	if cached := gitIn(t, p, "diff", "--cached", "-U0"); !strings.Contains(cached, "+twenty-sixth, edited") || strings.Contains(cached, "second, edited") {
		t.Fatalf("staged:\n%s", cached)
	}
	// The same fingerprint again: a.txt changed since (hunk 2 is staged).
	c.Send(wire.TypeGitStage, "stale", map[string]any{"session_id": id, "path": "a.txt", "fingerprint": diff.fingerprint(t, "a.txt"), "hunk": 0})
	expectGitError(t, c, "stale", wire.CodeGitError, "changed since")

	// Discard the untracked file; it is kept under a ref.
	c.Send(wire.TypeGitDiscard, "discard", map[string]any{"session_id": id,
		"files": []map[string]string{{"path": "scratch.txt", "fingerprint": diff.fingerprint(t, "scratch.txt")}}})
	var kept struct {
		Ref string `json:"recovery_ref"`
	}
	c.WaitFor(wire.TypeGitDiscardResponse, &kept, nil)
	expectStatus(t, c, "discard")
	if _, err := os.Stat(filepath.Join(p, "scratch.txt")); !os.IsNotExist(err) || gitIn(t, p, "show", kept.Ref+":scratch.txt") != "notes\n" {
		t.Fatalf("scratch.txt after discard: %v, kept as %q", err, kept.Ref)
	}

	// Commit what is staged and push it.
	c.Send(wire.TypeGitCommit, "commit", map[string]any{"session_id": id, "message": "hunk two"})
	expectStatus(t, c, "commit")
	c.Send(wire.TypeGitPush, "push", map[string]any{"session_id": id, "url": bare})
	var pushed struct {
		After, URL string
		UpToDate   bool `json:"up_to_date"`
	}
	c.WaitFor(wire.TypeGitPushResponse, &pushed, nil)
	expectStatus(t, c, "push")
	head := strings.TrimSpace(gitIn(t, p, "rev-parse", "HEAD"))
	if pushed.After != head || strings.TrimSpace(gitIn(t, bare, "rev-parse", "main")) != head || pushed.UpToDate {
		t.Fatalf("push %+v, HEAD %s", pushed, head)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the agent's pre-push hook or receivepack ran")
	}
	c.Send(wire.TypeGitPush, "push-elsewhere", map[string]any{"session_id": id, "url": "https://example.com/other.git"})
	expectGitError(t, c, "push-elsewhere", wire.CodeGitError, "URL changed")
	// A remote the agent pointed outside the roots (any repository of the
	// user's) is not reached.
	outside := filepath.Join(t.TempDir(), "private.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", outside).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	gitIn(t, p, "remote", "add", "private", outside)
	c.Send(wire.TypeGitPush, "push-outside", map[string]any{"session_id": id, "remote": "private"})
	expectGitError(t, c, "push-outside", wire.CodeGitError, "not one tether will use")

	// Someone else pushes; the phone pulls (a rebase is refused while a
	// change is unstaged; a fast-forward carries it along), and again from
	// the ReCursor app's frame (no id).
	other := t.TempDir()
	gitIn(t, other, "clone", "-q", bare, ".")
	os.WriteFile(filepath.Join(other, "b.txt"), []byte("theirs\n"), 0o644)
	gitIn(t, other, "add", ".")
	gitIn(t, other, "commit", "-q", "-m", "theirs")
	gitIn(t, other, "push", "-q")
	c.Send(wire.TypeGitPull, "pull-rebase", map[string]any{"session_id": id, "rebase": true})
	expectGitError(t, c, "pull-rebase", wire.CodeGitError, "local changes would be overwritten")
	c.Send(wire.TypeGitPull, "pull", map[string]any{"session_id": id})
	var pulled struct{ Before, After string }
	c.WaitFor(wire.TypeGitPullResponse, &pulled, nil)
	expectStatus(t, c, "pull")
	if strings.TrimSpace(gitIn(t, p, "rev-parse", "HEAD")) != strings.TrimSpace(gitIn(t, bare, "rev-parse", "main")) || pulled.Before != head {
		t.Fatalf("pull %+v", pulled)
	}
	c.Send(wire.TypeClaudeEvent, "", map[string]any{"type": "git_pull", "session_id": id})
	var again struct {
		UpToDate bool `json:"up_to_date"`
	}
	c.WaitFor(wire.TypeGitPullResponse, &again, nil)
	c.WaitFor(wire.TypeGitStatusResponse, nil, nil)
	if !again.UpToDate {
		t.Fatalf("second pull %+v", again)
	}

	// A branch, created and checked out; back to main, the hunk left
	// unstaged carried along.
	c.Send(wire.TypeGitBranchCreate, "create", map[string]any{"session_id": id, "name": "phone/fix", "checkout": true})
	if st := expectStatus(t, c, "create"); st["branch"] != "phone/fix" {
		t.Fatalf("after branch_create: %v", st["branch"])
	}
	c.Send(wire.TypeGitCheckout, "checkout", map[string]any{"session_id": id, "branch": "main"})
	if st := expectStatus(t, c, "checkout"); st["branch"] != "main" || st["is_clean"] == true {
		t.Fatalf("after checkout: %v", st)
	}

	for _, bad := range []struct {
		typ     string
		payload map[string]any
		code    string
	}{
		{wire.TypeGitStage, map[string]any{"session_id": id}, wire.CodeInvalidMessage},
		{wire.TypeGitStage, map[string]any{"session_id": id, "files": []string{"a.txt"}, "path": "a.txt", "fingerprint": "x", "hunk": 0}, wire.CodeInvalidMessage},
		{wire.TypeGitStage, map[string]any{"session_id": id, "path": "a.txt", "hunk": 0}, wire.CodeInvalidMessage},
		{wire.TypeGitStage, map[string]any{"session_id": id, "files": "a.txt"}, wire.CodeInvalidMessage},
		{wire.TypeGitUnstage, map[string]any{"session_id": id, "files": []any{7}}, wire.CodeInvalidMessage},
		{wire.TypeGitDiscard, map[string]any{"session_id": id, "files": []string{"a.txt"}}, wire.CodeInvalidMessage},
		{wire.TypeGitStage, map[string]any{"session_id": id, "files": []string{"../outside"}}, wire.CodeGitError},
		{wire.TypeGitCheckout, map[string]any{"session_id": id}, wire.CodeInvalidMessage},
		{wire.TypeGitCheckout, map[string]any{"session_id": id, "branch": "--orphan"}, wire.CodeGitError},
		{wire.TypeGitBranchCreate, map[string]any{"session_id": id, "name": 3}, wire.CodeInvalidMessage},
		{wire.TypeGitBranches, map[string]any{}, wire.CodeInvalidMessage},
		{wire.TypeGitPush, map[string]any{"session_id": "nope"}, wire.CodeSessionNotFound},
		{wire.TypeGitPull, map[string]any{"session_id": id, "rebase": "yes"}, wire.CodeInvalidMessage},
		{wire.TypeClaudeEvent, map[string]any{"type": "terminal_create", "session_id": id}, wire.CodeUnknownType},
		{wire.TypeClaudeEvent, map[string]any{"type": "git_push"}, wire.CodeInvalidMessage},
	} {
		raw, _ := json.Marshal(bad.payload)
		c.Send(bad.typ, "bad", json.RawMessage(raw))
		var ep wire.ErrorPayload
		if env := c.WaitFor(wire.TypeError, &ep, nil); env.ID != "bad" || ep.Code != bad.code {
			t.Fatalf("%s %s: %s %+v, want %s", bad.typ, raw, env.ID, ep, bad.code)
		}
	}
	c.Send(wire.TypeHeartbeatPing, "alive", nil)
	c.WaitFor(wire.TypeHeartbeatPong, nil, nil)
}
