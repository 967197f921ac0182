package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/wire"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return string(out)
}

func TestGitOverTheProtocol(t *testing.T) {
	d := newDaemon(t)
	p := d.project
	gitIn(t, p, "config", "user.name", "Phone User")
	gitIn(t, p, "config", "user.email", "phone@example.com")
	os.WriteFile(filepath.Join(p, "app.go"), []byte("package app\n\nfunc A() int { return 1 }\n"), 0o644)
	os.WriteFile(filepath.Join(p, "keep.txt"), []byte("keep\n"), 0o644)
	gitIn(t, p, "add", ".")
	gitIn(t, p, "commit", "-q", "-m", "first")
	os.WriteFile(filepath.Join(p, "app.go"), []byte("package app\n\nfunc A() int { return 2 }\n"), 0o644)
	os.WriteFile(filepath.Join(p, "new.txt"), []byte("new\nfile\n"), 0o644)
	os.WriteFile(filepath.Join(p, "stray.txt"), []byte("not named\n"), 0o644)

	c, _ := d.phone(nil)
	const id = "git"
	d.startSession(c, id, "ask")
	var ready wire.SessionReady
	c.WaitFor(wire.TypeSessionReady, &ready, nil)
	if ready.Branch != "main" {
		t.Fatalf("session_ready branch %q", ready.Branch)
	}

	type change struct {
		Path, Status         string
		Staged               bool
		Additions, Deletions int
	}
	var st struct {
		SessionID string `json:"session_id"`
		Branch    string
		Ahead     int
		IsClean   bool `json:"is_clean"`
		Changes   []change
	}
	c.Send(wire.TypeGitStatusRequest, "git-1", map[string]any{"session_id": id})
	if env := c.WaitFor(wire.TypeGitStatusResponse, &st, nil); env.ID != "git-1" || st.SessionID != id {
		t.Fatalf("status reply %q %+v", env.ID, st)
	}
	got := map[string]change{}
	for _, ch := range st.Changes {
		got[ch.Path] = ch
	}
	if st.Branch != "main" || st.IsClean || got["app.go"].Status != "modified" || got["app.go"].Additions != 1 || got["app.go"].Deletions != 1 ||
		got["new.txt"].Status != "untracked" || got["new.txt"].Additions != 2 {
		t.Fatalf("status = %+v", st)
	}

	var diff struct {
		Files []struct {
			Path, Status string
			Hunks        []struct {
				Header string
				Lines  []struct{ Type, Content string }
			}
		}
	}
	c.Send(wire.TypeGitDiff, "git-2", map[string]any{"session_id": id, "files": []string{"app.go"}, "cached": false})
	c.WaitFor(wire.TypeGitDiffResponse, &diff, nil)
	if len(diff.Files) != 1 || len(diff.Files[0].Hunks) != 1 || !strings.HasPrefix(diff.Files[0].Hunks[0].Header, "@@ -1,3 +1,3 @@") {
		t.Fatalf("diff = %+v", diff)
	}
	lines := diff.Files[0].Hunks[0].Lines
	if lines[2].Type != "removed" || lines[2].Content != "func A() int { return 1 }" || lines[3].Type != "added" {
		t.Fatalf("diff lines = %+v", lines)
	}
	want := gitIn(t, p, "diff", "--", "app.go")
	if !strings.Contains(want, "-func A() int { return 1 }") {
		t.Fatalf("git's own diff: %s", want)
	}

	// Commit two named files; the stray untracked file stays out.
	c.Send(wire.TypeGitCommit, "git-3", map[string]any{"session_id": id, "message": "Bump A and add new.txt", "files": []string{"app.go", "new.txt"}})
	var cr struct{ Hash, Branch, Summary string }
	c.WaitFor(wire.TypeGitCommitResponse, &cr, nil)
	c.WaitFor(wire.TypeGitStatusResponse, &st, func(e wire.Envelope) bool { return e.ID == "git-3" })
	if len(cr.Hash) != 40 || cr.Branch != "main" || len(st.Changes) != 1 || st.Changes[0].Path != "stray.txt" {
		t.Fatalf("commit %+v, status after %+v", cr, st)
	}
	if head := strings.TrimSpace(gitIn(t, p, "rev-parse", "HEAD")); head != cr.Hash {
		t.Fatalf("HEAD %s, reply %s", head, cr.Hash)
	}
	if files := gitIn(t, p, "show", "--name-only", "--format=%an", "HEAD"); !strings.Contains(files, "Phone User") || strings.Contains(files, "stray.txt") {
		t.Fatalf("commit holds %s", files)
	}

	for _, tt := range []struct{ typ, payload string }{
		{wire.TypeGitCommit, `{"session_id":"git","message":"nothing","files":null}`},
		{wire.TypeGitCommit, `{"session_id":"git","message":"","files":["stray.txt"]}`},
		{wire.TypeGitCommit, `{"session_id":"git","message":"x","files":["../outside"]}`},
		{wire.TypeGitDiff, `{"session_id":"git","files":["nope/../../x"]}`},
	} {
		c.SendRaw(`{"type":"` + tt.typ + `","id":"bad","payload":` + tt.payload + `}`)
		var ep wire.ErrorPayload
		c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == "bad" })
		if ep.Code != wire.CodeGitError || ep.Message == "" || strings.Contains(ep.Message, p) {
			t.Errorf("%s %s: %+v", tt.typ, tt.payload, ep)
		}
	}
	for _, tt := range []struct{ typ, payload, code string }{
		{wire.TypeGitStatusRequest, `{"session_id":"nope"}`, wire.CodeSessionNotFound},
		{wire.TypeGitStatusRequest, `{}`, wire.CodeInvalidMessage},
		{wire.TypeGitDiff, `{"session_id":"git","files":"app.go"}`, wire.CodeInvalidMessage},
		{wire.TypeGitCommit, `{"session_id":"git","message":5}`, wire.CodeInvalidMessage},
		{wire.TypeGitDiff, `{"session_id":"git","cached":"no"}`, wire.CodeInvalidMessage},
	} {
		c.SendRaw(`{"type":"` + tt.typ + `","id":"bad2","payload":` + tt.payload + `}`)
		var ep wire.ErrorPayload
		c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == "bad2" })
		if ep.Code != tt.code {
			t.Errorf("%s %s: %+v, want %s", tt.typ, tt.payload, ep, tt.code)
		}
	}
}

func TestGitOutsideARepository(t *testing.T) {
	d := newDaemon(t)
	plain := filepath.Join(filepath.Dir(d.project), "plain")
	os.MkdirAll(plain, 0o755)
	c, _ := d.phone(nil)
	c.Send(wire.TypeSessionStart, "s", map[string]any{"agent": "demo", "session_id": "plain", "working_directory": plain})
	var ready wire.SessionReady
	c.WaitFor(wire.TypeSessionReady, &ready, nil)
	if ready.Branch != "" {
		t.Fatalf("branch %q outside a repository", ready.Branch)
	}
	c.Send(wire.TypeGitStatusRequest, "g", map[string]any{"session_id": "plain"})
	var ep wire.ErrorPayload
	c.WaitFor(wire.TypeError, &ep, nil)
	if ep.Code != wire.CodeGitError || !strings.Contains(ep.Message, "not a git repository") {
		t.Fatalf("status outside a repository: %+v", ep)
	}
}

// TestGitLogOverTheProtocol: the phone pages through the session
// repository's history (git log, run in the session's sandbox), opens a
// commit's diff, and bad requests are answered with the frame's id.
func TestGitLogOverTheProtocol(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	p := d.project
	for i := range 5 {
		os.WriteFile(filepath.Join(p, fmt.Sprintf("f%d.txt", i)), []byte(strings.Repeat("line\n", i+1)), 0o644)
		gitIn(t, p, "add", ".")
		gitIn(t, p, "commit", "-q", "-m", fmt.Sprintf("step %d\n\nWhy step %d.", i, i))
	}
	c, _ := d.phone(nil)
	const id = "history"
	d.readySession(c, id, "ask")

	type page struct {
		SessionID string `json:"session_id"`
		Commits   []struct {
			Hash, Subject, Body, Author string
			Parents                     []string
			Files                       []struct {
				Path      string
				Additions int
			}
		}
		HasMore bool `json:"has_more"`
	}
	var first, second page
	c.Send(wire.TypeGitLog, "log-1", map[string]any{"session_id": id, "limit": 3})
	if env := c.WaitFor(wire.TypeGitLogResponse, &first, nil); env.ID != "log-1" || first.SessionID != id || len(first.Commits) != 3 || !first.HasMore {
		t.Fatalf("first page %q %+v", env.ID, first)
	}
	top := first.Commits[0]
	if top.Subject != "step 4" || top.Body != "Why step 4." || top.Author == "" || len(top.Parents) != 1 ||
		len(top.Files) != 1 || top.Files[0].Path != "f4.txt" || top.Files[0].Additions != 5 {
		t.Fatalf("newest commit %+v", top)
	}
	c.Send(wire.TypeGitLog, "log-2", map[string]any{"session_id": id, "after": first.Commits[2].Hash, "limit": 3})
	c.WaitFor(wire.TypeGitLogResponse, &second, nil)
	if len(second.Commits) != 2 || second.HasMore || second.Commits[0].Subject != "step 1" || second.Commits[1].Subject != "step 0" || len(second.Commits[1].Parents) != 0 {
		t.Fatalf("second page %+v", second)
	}

	// One commit's diff, in git_diff_response's shape.
	var shown struct {
		SessionID string `json:"session_id"`
		Hash      string
		Files     []struct {
			Path, Status string
			Additions    int
			Hunks        []struct {
				Lines []struct{ Type, Content string }
			}
		}
	}
	c.Send(wire.TypeGitShow, "show-1", map[string]any{"session_id": id, "hash": top.Hash})
	if env := c.WaitFor(wire.TypeGitShowResponse, &shown, nil); env.ID != "show-1" || shown.Hash != top.Hash || len(shown.Files) != 1 ||
		shown.Files[0].Path != "f4.txt" || shown.Files[0].Status != "added" || shown.Files[0].Additions != 5 || len(shown.Files[0].Hunks) != 1 {
		t.Fatalf("git_show %q %+v", env.ID, shown)
	}
	for _, bad := range []struct {
		typ     string
		payload map[string]any
		code    string
	}{
		{wire.TypeGitShow, map[string]any{"session_id": id}, wire.CodeInvalidMessage},
		{wire.TypeGitShow, map[string]any{"session_id": id, "hash": strings.Repeat("b", 40)}, wire.CodeGitError},
		{wire.TypeGitShow, map[string]any{"session_id": id, "hash": []int{1}}, wire.CodeInvalidMessage},
	} {
		c.Send(bad.typ, "bad-show", bad.payload)
		var ep wire.ErrorPayload
		if env := c.WaitFor(wire.TypeError, &ep, nil); env.ID != "bad-show" || ep.Code != bad.code {
			t.Fatalf("%s %v: %s %+v, want %s", bad.typ, bad.payload, env.ID, ep, bad.code)
		}
	}

	for _, bad := range []struct {
		payload map[string]any
		code    string
	}{
		{map[string]any{}, wire.CodeInvalidMessage},
		{map[string]any{"session_id": id, "limit": 1000}, wire.CodeInvalidMessage},
		{map[string]any{"session_id": id, "after": 7}, wire.CodeInvalidMessage},
		{map[string]any{"session_id": id, "after": "not-a-hash"}, wire.CodeGitError},
		{map[string]any{"session_id": id, "after": strings.Repeat("a", 40)}, wire.CodeGitError},
		{map[string]any{"session_id": "nope"}, wire.CodeSessionNotFound},
	} {
		c.Send(wire.TypeGitLog, "bad", bad.payload)
		var ep wire.ErrorPayload
		if env := c.WaitFor(wire.TypeError, &ep, nil); env.ID != "bad" || ep.Code != bad.code {
			t.Fatalf("%v: %s %+v, want %s", bad.payload, env.ID, ep, bad.code)
		}
	}
}
