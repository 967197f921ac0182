package gitops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
