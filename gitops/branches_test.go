package gitops

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestBranchesAgreeWithTheCLI: names, tips, the current branch and the
// distance from the upstream are git's own (`git for-each-ref`, `git
// rev-list --count`).
func TestBranchesAgreeWithTheCLI(t *testing.T) {
	t.Parallel()
	remote := newRepo(t)
	remote.write("a.txt", "a\n")
	remote.commitAll("first")
	remote.git("branch", "feature")
	r := &testRepo{t: t, dir: t.TempDir()}
	r.git("clone", "-q", remote.dir, ".")
	r.git("config", "user.name", "T")
	r.git("config", "user.email", "t@example.com")
	remote.write("a.txt", "a\nb\n")
	remote.commitAll("second")
	r.git("fetch", "-q")
	r.write("c.txt", "c\n")
	r.commitAll("mine")
	r.write("d.txt", "d\n")
	r.commitAll("mine too")
	r.git("branch", "--no-track", "topic")

	got, err := direct.Branches(context.Background(), r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Current != "main" || got.Detached || got.Head != strings.TrimSpace(r.git("rev-parse", "HEAD")) {
		t.Fatalf("current %q detached %v head %q", got.Current, got.Detached, got.Head)
	}
	var names []string
	for _, b := range got.Local {
		names = append(names, b.Name)
		if b.Hash != strings.TrimSpace(r.git("rev-parse", "refs/heads/"+b.Name)) {
			t.Errorf("%s: hash %s", b.Name, b.Hash)
		}
	}
	if strings.Join(names, " ") != "main topic" {
		t.Fatalf("local branches %v", names)
	}
	main := got.Local[0]
	ahead := strings.TrimSpace(r.git("rev-list", "--count", "origin/main..main"))
	behind := strings.TrimSpace(r.git("rev-list", "--count", "main..origin/main"))
	if !main.Current || main.Upstream != "origin/main" || ahead != "2" || behind != "1" || main.Ahead != 2 || main.Behind != 1 || main.Subject != "mine too" {
		t.Fatalf("main = %+v (CLI: ahead %s behind %s)", main, ahead, behind)
	}
	if got.Local[1].Upstream != "" || got.Local[1].Current {
		t.Fatalf("topic = %+v", got.Local[1])
	}
	var remotes []string
	for _, b := range got.Remote {
		remotes = append(remotes, b.Name+"@"+b.Remote)
	}
	if strings.Join(remotes, " ") != "origin/feature@origin origin/main@origin" || len(got.Remotes) != 1 || got.Remotes[0] != (RemoteInfo{Name: "origin", URL: remote.dir}) {
		t.Fatalf("remote branches %v (origin/HEAD is a symbolic ref, not a branch)", remotes)
	}

	r.git("checkout", "-q", "--detach")
	if got, err = direct.Branches(context.Background(), r.dir); err != nil || !got.Detached || got.Current != "" {
		t.Fatalf("detached: %+v %v", got, err)
	}
	empty := newRepo(t)
	if got, err = direct.Branches(context.Background(), empty.dir); err != nil || got.Current != "main" || got.Detached || got.Head != "" || len(got.Local) != 0 {
		t.Fatalf("unborn: %+v %v", got, err)
	}
}

// TestCheckoutNeverLosesWork: a switch that would overwrite a local change
// or an untracked file is refused and changes nothing; one that does not
// touch the change carries it along; a remote-only branch becomes a
// tracking branch.
func TestCheckoutNeverLosesWork(t *testing.T) {
	t.Parallel()
	remote := newRepo(t)
	remote.write("a.txt", "a\n")
	remote.commitAll("first")
	remote.git("checkout", "-q", "-b", "feature")
	remote.write("a.txt", "feature\n")
	remote.write("new.txt", "from feature\n")
	remote.commitAll("feature work")
	remote.git("checkout", "-q", "main")
	r := &testRepo{t: t, dir: t.TempDir()}
	r.git("clone", "-q", remote.dir, ".")
	ctx := context.Background()

	r.write("a.txt", "my edit\n")
	before := r.snapshot()
	if _, err := direct.Checkout(ctx, r.dir, "feature"); !errors.Is(err, ErrWouldOverwrite) {
		t.Fatalf("checkout over a local change: %v", err)
	}
	if r.snapshot() != before {
		t.Fatal("a refused checkout changed the repository")
	}
	r.git("checkout", "-q", "--", "a.txt")
	r.write("new.txt", "untracked, mine\n")
	if _, err := direct.Checkout(ctx, r.dir, "feature"); !errors.Is(err, ErrWouldOverwrite) {
		t.Fatalf("checkout over an untracked file: %v", err)
	}
	r.remove("new.txt")
	r.write("notes.txt", "carried along\n")
	st, err := direct.Checkout(ctx, r.dir, "feature")
	if err != nil {
		t.Fatal(err)
	}
	if st.Branch != "feature" || strings.TrimSpace(r.git("rev-parse", "--abbrev-ref", "feature@{upstream}")) != "origin/feature" {
		t.Fatalf("branch %q, upstream %q", st.Branch, r.git("rev-parse", "--abbrev-ref", "feature@{upstream}"))
	}
	if len(st.Changes) != 1 || st.Changes[0].Path != "notes.txt" {
		t.Fatalf("changes after checkout: %+v", st.Changes)
	}
	for _, bad := range []string{"", "-f", "no such", "../x", "a..b", "x.lock", "@{-1}", "HEAD"} {
		if _, err := direct.Checkout(ctx, r.dir, bad); err == nil {
			t.Errorf("checkout %q succeeded", bad)
		}
	}
	if _, err := direct.Checkout(ctx, r.dir, "nonexistent"); !errors.Is(err, ErrUnknownBranch) {
		t.Fatalf("unknown branch: %v", err)
	}
}

func TestCreateBranch(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.write("a.txt", "a\n")
	r.commitAll("first")
	first := strings.TrimSpace(r.git("rev-parse", "HEAD"))
	r.write("a.txt", "b\n")
	r.commitAll("second")
	ctx := context.Background()

	st, err := direct.CreateBranch(ctx, r.dir, "fix/one", first, false)
	if err != nil || st.Branch != "main" {
		t.Fatalf("create without checkout: %+v %v", st, err)
	}
	if got := strings.TrimSpace(r.git("rev-parse", "fix/one")); got != first {
		t.Fatalf("fix/one at %s, want %s", got, first)
	}
	if st, err = direct.CreateBranch(ctx, r.dir, "two", "", true); err != nil || st.Branch != "two" {
		t.Fatalf("create with checkout: %+v %v", st, err)
	}
	if _, err := direct.CreateBranch(ctx, r.dir, "two", "", false); !errors.Is(err, ErrBranchExists) {
		t.Fatalf("existing: %v", err)
	}
	if _, err := direct.CreateBranch(ctx, r.dir, "three", "nowhere", false); !errors.Is(err, ErrUnknownBranch) {
		t.Fatalf("bad start: %v", err)
	}
	if _, err := direct.CreateBranch(ctx, r.dir, "-D", "", false); !errors.Is(err, ErrInvalidBranchName) {
		t.Fatalf("option-like name: %v", err)
	}
	if _, err := direct.CreateBranch(ctx, r.dir, "four", "--orphan", false); !errors.Is(err, ErrUnknownBranch) {
		t.Fatalf("option-like start: %v", err)
	}
}
