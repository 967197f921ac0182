package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusKinds makes one change of every kind and checks each field,
// then compares the whole result with git's porcelain v1 output and
// numstat.
func TestStatusKinds(t *testing.T) {
	r := newRepo(t)
	r.write("modified.txt", lines("m", 10))
	r.write("deleted.txt", lines("d", 3))
	r.write("staged-deleted.txt", lines("sd", 2))
	r.write("renamed-old.txt", lines("r", 20))
	r.write("both.txt", lines("b", 10))
	r.write("typechange", "target\n")
	r.write("bin.dat", "\x00\x01\x02")
	r.write("exec.sh", "#!/bin/sh\n")
	r.commitAll("base")

	r.write("modified.txt", strings.Replace(lines("m", 10), "m 5\n", "M 5\nextra\n", 1))
	r.remove("deleted.txt")
	r.git("rm", "-q", "staged-deleted.txt")
	r.git("mv", "renamed-old.txt", "renamed-new.txt")
	r.write("added.txt", "one\ntwo\n")
	r.git("add", "added.txt")
	r.write("both.txt", strings.Replace(lines("b", 10), "b 1\n", "B 1\n", 1))
	r.git("add", "both.txt")
	r.write("both.txt", strings.Replace(lines("b", 10), "b 1\n", "B 1\n", 1)+"tail\n")
	r.remove("typechange")
	r.symlink("modified.txt", "typechange")
	r.write("bin.dat", "\x00\x01\x03\x04")
	if err := os.Chmod(r.path("exec.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.write("untracked.txt", "u1\nu2\nu3")
	r.write("dir/nested/untracked.md", "# title\n")
	r.write("untracked.bin", "a\x00b")
	r.write("empty-untracked", "")

	got, err := direct.Status(context.Background(), r.dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Path: "added.txt", Status: StatusAdded, Staged: true, Additions: 2},
		{Path: "bin.dat", Status: StatusModified, Binary: true},
		{Path: "both.txt", Status: StatusModified, Staged: true, Additions: 1, Deletions: 1},
		{Path: "both.txt", Status: StatusModified, Additions: 1},
		{Path: "deleted.txt", Status: StatusDeleted, Deletions: 3},
		{Path: "dir/nested/untracked.md", Status: StatusUntracked, Additions: 1},
		{Path: "empty-untracked", Status: StatusUntracked},
		{Path: "exec.sh", Status: StatusModified},
		{Path: "modified.txt", Status: StatusModified, Additions: 2, Deletions: 1},
		{Path: "renamed-new.txt", OldPath: "renamed-old.txt", Status: StatusRenamed, Staged: true},
		{Path: "staged-deleted.txt", Status: StatusDeleted, Staged: true, Deletions: 2},
		{Path: "typechange", Status: StatusModified, TypeChanged: true, Additions: 1, Deletions: 1},
		{Path: "untracked.bin", Status: StatusUntracked, Binary: true},
		{Path: "untracked.txt", Status: StatusUntracked, Additions: 3},
	}
	compareChanges(t, got.Changes, want)
	compareChanges(t, got.Changes, oracleChanges(t, r))
	if got.IsClean {
		t.Error("IsClean with changes")
	}
	if got.Branch != "main" || got.Detached || got.HasUpstream || got.Ahead != 0 || got.Behind != 0 || got.State != StateNone {
		t.Errorf("branch fields: %+v", got)
	}
	if head := strings.TrimSpace(r.git("rev-parse", "HEAD")); got.Head != head {
		t.Errorf("Head %q, want %q", got.Head, head)
	}
}

// TestStatusClean checks a clean repository, and what the app's parser
// requires of it: a branch, and a list of changes (empty, not null).
func TestStatusClean(t *testing.T) {
	r := newRepo(t)
	r.write("a", "a\n")
	r.commitAll("a")
	got, err := direct.Status(context.Background(), r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.IsClean || len(got.Changes) != 0 {
		t.Fatalf("clean repo: %+v", got)
	}
	if got.Changes == nil || got.Branch == "" {
		t.Errorf("clean repo: changes must be an empty list and the branch named: %+v", got)
	}
}

// TestGitLimitedToSessionSubdirectory asks about a subdirectory, as a
// session working there would: status, diff and commit see nothing of the
// rest of the repository (paths stay relative to its top level), and
// naming a path outside is ErrInvalidPath.
func TestGitLimitedToSessionSubdirectory(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	r.write("sub/dir/f.txt", "1\n")
	r.write("top.txt", "1\n")
	r.commitAll("c")
	r.write("sub/dir/f.txt", "2\n")
	r.write("top.txt", "2\n")
	r.write("toplevel-secret.txt", "hunter2\n")
	sub := r.path("sub/dir")
	got, err := direct.Status(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	compareChanges(t, got.Changes, []Change{
		{Path: "sub/dir/f.txt", Status: StatusModified, Additions: 1, Deletions: 1},
	})
	diff, err := direct.diffFiles(ctx, sub, nil, false)
	if err != nil || len(diff) != 1 || diff[0].Path != "sub/dir/f.txt" {
		t.Fatalf("diff from the subdirectory: %+v, %v", diff, err)
	}
	for _, outside := range []string{"top.txt", "toplevel-secret.txt", "sub/other.txt"} {
		if _, err := direct.Diff(ctx, sub, []string{outside}, false); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("diff of %s: %v, want ErrInvalidPath", outside, err)
		}
		if _, err := direct.Commit(ctx, sub, "m", []string{outside}); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("commit of %s: %v, want ErrInvalidPath", outside, err)
		}
	}
	r.git("add", "top.txt")
	if _, err := direct.Commit(ctx, sub, "staged outside", nil); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("commit of the index with top.txt staged: %v, want ErrInvalidPath", err)
	}
	res, err := direct.Commit(ctx, sub, "inside", []string{"sub/dir/f.txt"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Status.Changes {
		if !strings.HasPrefix(c.Path, "sub/dir/") {
			t.Errorf("the status after the commit shows %s", c.Path)
		}
	}
}

func TestStatusBranch(t *testing.T) {
	ctx := context.Background()
	t.Run("unborn", func(t *testing.T) {
		r := newRepo(t)
		r.write("new", "x\n")
		r.write("staged", "a\nb\n")
		r.git("add", "staged")
		got, err := direct.Status(ctx, r.dir)
		if err != nil {
			t.Fatal(err)
		}
		if got.Branch != "main" || got.Head != "" || got.Detached {
			t.Errorf("unborn: %+v", got)
		}
		compareChanges(t, got.Changes, []Change{
			{Path: "new", Status: StatusUntracked, Additions: 1},
			{Path: "staged", Status: StatusAdded, Staged: true, Additions: 2},
		})
		compareChanges(t, got.Changes, oracleChanges(t, r))
	})
	t.Run("detached", func(t *testing.T) {
		r := newRepo(t)
		r.write("a", "1\n")
		r.commitAll("one")
		r.write("a", "2\n")
		r.commitAll("two")
		r.git("checkout", "-q", "--detach", "HEAD~1")
		head := strings.TrimSpace(r.git("rev-parse", "HEAD"))
		got, err := direct.Status(ctx, r.dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := "HEAD (detached at " + head[:7] + ")"; got.Branch != want || !got.Detached || got.Head != head {
			t.Errorf("detached: branch %q detached %v head %q, want %q", got.Branch, got.Detached, got.Head, want)
		}
		if got.HasUpstream || got.Ahead != 0 || got.Behind != 0 {
			t.Errorf("detached upstream fields: %+v", got)
		}
	})
	t.Run("upstream", func(t *testing.T) {
		r := newRepo(t)
		r.write("a", "1\n")
		r.commitAll("base")
		r.git("branch", "upstream")
		r.git("branch", "--set-upstream-to=upstream")
		for i := range 3 {
			r.write("a", lines("ahead", i+2))
			r.commitAll("ahead")
		}
		r.git("checkout", "-q", "upstream")
		for i := range 2 {
			r.write("b", lines("behind", i+1))
			r.commitAll("behind")
		}
		r.git("checkout", "-q", "main")
		got, err := direct.Status(ctx, r.dir)
		if err != nil {
			t.Fatal(err)
		}
		if !got.HasUpstream || got.Upstream != "upstream" || got.Ahead != 3 || got.Behind != 2 {
			t.Errorf("upstream: %+v", got)
		}
		ab := strings.Fields(r.git("rev-list", "--left-right", "--count", "main...upstream"))
		if ab[0] != "3" || ab[1] != "2" {
			t.Errorf("git counts %v", ab)
		}
	})
	t.Run("upstream gone", func(t *testing.T) {
		r := newRepo(t)
		r.write("a", "1\n")
		r.commitAll("base")
		r.git("branch", "gone")
		r.git("branch", "--set-upstream-to=gone")
		r.git("branch", "-D", "gone")
		got, err := direct.Status(ctx, r.dir)
		if err != nil {
			t.Fatal(err)
		}
		if got.HasUpstream || got.Upstream != "gone" || got.Ahead != 0 || got.Behind != 0 {
			t.Errorf("gone upstream: %+v", got)
		}
	})
}

// TestStatusLinkedWorktree checks a linked worktree, whose git directory
// (where operation state lives) is not .git.
func TestStatusLinkedWorktree(t *testing.T) {
	r := conflictRepo(t)
	wt := &testRepo{t: t, dir: filepath.Join(t.TempDir(), "wt")}
	r.git("worktree", "add", "-q", "-b", "side", wt.dir, "main")
	wt.gitErr("merge", "other")
	got, err := direct.Status(context.Background(), wt.dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Branch != "side" || got.State != StateMerging {
		t.Errorf("worktree: branch %q state %q", got.Branch, got.State)
	}
	compareChanges(t, got.Changes, oracleChanges(t, wt))
	main, err := direct.Status(context.Background(), r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if main.State != StateNone || !main.IsClean {
		t.Errorf("main worktree: %+v", main)
	}
}

func TestStatusErrors(t *testing.T) {
	ctx := context.Background()
	plain := t.TempDir()
	bare := newRepo(t)
	bareDir := filepath.Join(bare.dir, "bare.git")
	bare.git("init", "-q", "--bare", bareDir)
	inGit := newRepo(t)
	file := filepath.Join(plain, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		want error
	}{
		{"plain directory", plain, ErrNotRepository},
		{"missing directory", filepath.Join(plain, "missing"), ErrNotRepository},
		{"a file", file, ErrNotRepository},
		{"empty", "", ErrNotRepository},
		{"bare", bareDir, ErrBareRepository},
		{"inside .git", filepath.Join(inGit.dir, ".git"), ErrNotRepository},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := direct.Status(ctx, tt.dir); !errors.Is(err, tt.want) {
				t.Errorf("Status: %v, want %v", err, tt.want)
			}
			if _, err := direct.diffFiles(ctx, tt.dir, nil, false); !errors.Is(err, tt.want) {
				t.Errorf("Diff: %v, want %v", err, tt.want)
			}
			if _, err := direct.Commit(ctx, tt.dir, "msg", nil); !errors.Is(err, tt.want) {
				t.Errorf("Commit: %v, want %v", err, tt.want)
			}
		})
	}
}

// conflictRepo returns a repository whose main branch and branch "other"
// change the same line of c.txt.
func conflictRepo(t *testing.T) *testRepo {
	r := newRepo(t)
	r.write("c.txt", "1\n2\n3\n")
	r.write("clean.txt", "x\n")
	r.commitAll("base")
	r.git("checkout", "-q", "-b", "other")
	r.write("c.txt", "1\nother\n3\n")
	r.commitAll("other")
	r.git("checkout", "-q", "main")
	r.write("c.txt", "1\nmain\n3\n")
	r.write("m.txt", "from main\n")
	r.commitAll("main")
	return r
}

func TestStatusStates(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		setup    func(r *testRepo)
		state    State
		detached bool
	}{
		{"merge conflict", func(r *testRepo) { r.gitErr("merge", "other") }, StateMerging, false},
		{"rebase conflict", func(r *testRepo) { r.gitErr("rebase", "other") }, StateRebasing, true},
		{"cherry-pick conflict", func(r *testRepo) { r.gitErr("cherry-pick", "other") }, StateCherryPicking, false},
		{"revert conflict", func(r *testRepo) {
			r.write("c.txt", "1\nmain again\n3\n")
			r.commitAll("again")
			r.gitErr("revert", "--no-edit", "HEAD~1")
		}, StateReverting, false},
		{"bisect", func(r *testRepo) { r.git("bisect", "start") }, StateBisecting, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := conflictRepo(t)
			tt.setup(r)
			got, err := direct.Status(ctx, r.dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tt.state || got.Detached != tt.detached {
				t.Errorf("state %q detached %v, want %q %v", got.State, got.Detached, tt.state, tt.detached)
			}
			compareChanges(t, got.Changes, oracleChanges(t, r))
			if tt.state == StateBisecting {
				return
			}
			var conflicted []Change
			for _, c := range got.Changes {
				if c.Conflicted {
					conflicted = append(conflicted, c)
				}
			}
			if len(conflicted) != 1 || conflicted[0].Path != "c.txt" || conflicted[0].Status != StatusModified || conflicted[0].Staged {
				t.Errorf("conflicted changes %+v", conflicted)
			}
		})
	}
}

// TestStatusUntrackedCounts compares the line counts of untracked files
// with `git diff --no-index --numstat /dev/null FILE`.
func TestStatusUntrackedCounts(t *testing.T) {
	r := newRepo(t)
	r.commitAll("empty")
	files := map[string]string{
		"trailing-newline": "a\nb\n",
		"no-newline":       "a\nb",
		"single":           "x",
		"empty":            "",
		"only-newlines":    "\n\n\n",
		"crlf":             "a\r\nb\r\n",
		"nul-early":        "a\x00b\n",
		"nul-late":         strings.Repeat("x", binarySniffLen) + "\x00\n",
		"big":              strings.Repeat("line\n", 50000),
	}
	for name, content := range files {
		r.write(name, content)
	}
	r.symlink("some/target", "link")
	got, err := direct.Status(context.Background(), r.dir)
	if err != nil {
		t.Fatal(err)
	}
	compareChanges(t, got.Changes, oracleChanges(t, r))
	if len(got.Changes) != len(files)+1 {
		t.Errorf("%d changes, want %d", len(got.Changes), len(files)+1)
	}
}

func TestStatusCanceled(t *testing.T) {
	r := newRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := direct.Status(ctx, r.dir); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled Status: %v", err)
	}
}
