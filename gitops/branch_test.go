package gitops

import (
	"context"
	"testing"
)

func TestBranch(t *testing.T) {
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("first")
	if got, err := direct.Branch(context.Background(), r.dir); err != nil || got != "main" {
		t.Fatalf("Branch = %q, %v", got, err)
	}
	r.git("checkout", "-q", "--detach")
	got, err := direct.Branch(context.Background(), r.dir)
	if err != nil || got[:len("HEAD (detached at ")] != "HEAD (detached at " {
		t.Fatalf("detached Branch = %q, %v", got, err)
	}
	if _, err := direct.Branch(context.Background(), t.TempDir()); err == nil {
		t.Fatal("Branch outside a repository succeeded")
	}
}
