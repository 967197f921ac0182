package gitops

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBranch(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("first")
	if got, err := Branch(r.dir); err != nil || got != "main" {
		t.Fatalf("Branch = %q, %v", got, err)
	}
	r.git("checkout", "-q", "--detach")
	got, err := Branch(r.dir)
	if err != nil || got[:len("HEAD (detached at ")] != "HEAD (detached at " {
		t.Fatalf("detached Branch = %q, %v", got, err)
	}
	if _, err := Branch(t.TempDir()); err == nil {
		t.Fatal("Branch outside a repository succeeded")
	}
}

// TestBranchOfAnAgentsHEAD: HEAD is the agent's to write; what it holds
// is shown only when it is a branch name or an object name.
func TestBranchOfAnAgentsHEAD(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("first")
	for head, want := range map[string]string{
		"ref: refs/heads/feature/x\n":                 "feature/x",
		"ref: refs/heads/\x1b[2Jevil\n":               "",
		"ref: refs/heads/" + strings.Repeat("b", 300): "",
		"0123456789abcdef0123456789abcdef01234567\n":  "HEAD (detached at 0123456)",
		"garbage": "",
	} {
		os.WriteFile(filepath.Join(r.dir, ".git", "HEAD"), []byte(head), 0o644)
		if got, _ := Branch(r.dir); got != want {
			t.Errorf("HEAD %q: %q, want %q", head, got, want)
		}
	}
}

// TestBranchDoesNotBlockOnAPipe: an agent replaces HEAD, or the .git file
// of a linked worktree, with a named pipe; reading the branch returns an
// error at once instead of blocking a session's start for ever.
func TestBranchDoesNotBlockOnAPipe(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("first")
	head := filepath.Join(r.dir, ".git", "HEAD")
	os.Remove(head)
	if err := syscall.Mkfifo(head, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Branch(r.dir); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a pipe for HEAD named a branch")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Branch blocked on a pipe for HEAD")
	}
	wt := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(wt, ".git"), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() { _, _, err := Locate(wt); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a pipe for .git located a repository")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Locate blocked on a pipe for .git")
	}
}
