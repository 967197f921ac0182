package gitops

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestStatusParity makes the cases Status derives from two raw diffs and
// an untracked listing rather than from git status itself (intent-to-add
// files, a rename in the working tree, changes on both sides, type and
// mode changes, submodules in every state, quoted names) and compares the
// result with git's porcelain v1 and plain numstat (the oracle), and its
// order with porcelain v2's.
func TestStatusParity(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.write("old.txt", lines("o", 20))
	r.write("renamed.txt", lines("r", 20))
	r.write("mode.sh", "#!/bin/sh\n")
	r.write("to-link", "file\n")
	r.write("added-then.txt", "")
	r.write("mod-then-deleted.txt", lines("m", 4))
	r.write("gone-and-back.txt", lines("g", 3))
	r.write("bin.dat", "\x00\x01")
	r.write("ü ber.txt", "a\n")
	r.write("tab\tname", "t\n")
	for _, s := range []string{"s1", "s2", "s3", "s4", "s5", "s6"} {
		r.subrepo(s)
	}
	r.write(".gitmodules", "[submodule \"s5\"]\n\tpath = s5\n\turl = ./s5\n\tignore = untracked\n"+
		"[submodule \"s6\"]\n\tpath = s6\n\turl = ./s6\n\tignore = all\n")
	r.commitAll("base")

	r.write("ita-new.txt", "one\ntwo\n")
	r.git("add", "-N", "ita-new.txt")
	if err := os.Rename(r.path("old.txt"), r.path("moved.txt")); err != nil {
		t.Fatal(err)
	}
	r.git("add", "-N", "moved.txt")
	r.git("mv", "renamed.txt", "renamed-new.txt")
	r.write("renamed-new.txt", lines("r", 20)+"more\n")
	if err := os.Chmod(r.path("mode.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.remove("to-link")
	r.symlink("mode.sh", "to-link")
	r.git("add", "to-link")
	r.write("staged-new.txt", "s\n")
	r.git("add", "staged-new.txt")
	r.remove("staged-new.txt")
	r.write("mod-then-deleted.txt", lines("m", 5))
	r.git("add", "mod-then-deleted.txt")
	r.remove("mod-then-deleted.txt")
	r.git("rm", "-q", "gone-and-back.txt")
	r.write("gone-and-back.txt", "back\n")
	r.write("bin.dat", "\x00\x02\x03")
	r.git("add", "bin.dat")
	r.write("ü ber.txt", "b\n")
	r.write("tab\tname", "u\n")
	r.subCommit("s1")
	r.write("s2/f.txt", "dirty\n")
	r.write("s3/untracked.txt", "u\n")
	r.subCommit("s4")
	r.git("add", "s4")
	r.write("s5/untracked.txt", "u\n")
	r.subCommit("s6")
	r.git("add", "s6")
	r.write("untracked/deep/file.txt", "x\ny\n")

	checkParity(t, r, func(want []Change) {
		// s6's configuration says ignore=all: status lists its staged
		// commit all the same, `git diff --cached --numstat` leaves it
		// out. Status lists it with the counts the diff gives when told
		// to compare submodule commits (1 and 1).
		for i := range want {
			if want[i].Path == "s6" && want[i].Staged {
				want[i].Additions, want[i].Deletions = 1, 1
			}
		}
	})
}

// TestStatusParityConflicts compares Status with git on every kind of
// unmerged path a merge leaves, beside a change the merge staged.
func TestStatusParityConflicts(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.write("both.txt", "1\n2\n3\n")
	r.write("mod-del.txt", "a\nb\n")
	r.write("del-mod.txt", "a\nb\n")
	r.write("theirs-only.txt", "t\n")
	r.commitAll("base")
	r.git("checkout", "-q", "-b", "other")
	r.write("both.txt", "1\nother\n3\n")
	r.remove("mod-del.txt")
	r.write("del-mod.txt", "a\nother\n")
	r.write("added.txt", "other\n")
	r.write("theirs-only.txt", "t\nfrom other\n")
	r.commitAll("other")
	r.git("checkout", "-q", "main")
	r.write("both.txt", "1\nmain\n3\n")
	r.write("mod-del.txt", "a\nmain\n")
	r.remove("del-mod.txt")
	r.write("added.txt", "main\n")
	r.commitAll("main")
	r.gitErr("merge", "other")
	r.write("both.txt", "1\nresolving\n3\nextra\n")

	got := checkParity(t, r, nil)
	var conflicted []string
	for _, c := range got {
		if c.Conflicted {
			conflicted = append(conflicted, c.Path)
		}
	}
	if strings.Join(conflicted, ",") != "added.txt,both.txt,del-mod.txt,mod-del.txt" {
		t.Errorf("conflicted %q", conflicted)
	}
}

// checkParity compares Status in r with the oracle (after adjust, when
// given) and with porcelain v2's order, and returns its changes.
func checkParity(t *testing.T, r *testRepo, adjust func([]Change)) []Change {
	t.Helper()
	got, err := direct.Status(context.Background(), r.dir)
	if err != nil {
		t.Fatal(err)
	}
	want := oracleChanges(t, r)
	if adjust != nil {
		adjust(want)
	}
	compareChanges(t, got.Changes, want)
	var order, gitOrder []string
	for _, c := range got.Changes {
		order = append(order, changeKey(c))
	}
	recs := strings.Split(r.gitOut("status", "--porcelain=v2", "-z", "-uall"), "\x00")
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		switch {
		case strings.HasPrefix(rec, "1 "), strings.HasPrefix(rec, "2 "):
			n := 9
			if rec[0] == '2' {
				n, i = 10, i+1
			}
			f := strings.SplitN(rec, " ", n)
			for side, code := range f[1] {
				if code != '.' {
					gitOrder = append(gitOrder, changeKey(Change{Path: f[n-1], Staged: side == 0}))
				}
			}
		case strings.HasPrefix(rec, "u "):
			gitOrder = append(gitOrder, changeKey(Change{Path: strings.SplitN(rec, " ", 11)[10], Conflicted: true}))
		case strings.HasPrefix(rec, "? "):
			gitOrder = append(gitOrder, changeKey(Change{Path: rec[2:], Status: StatusUntracked}))
		}
	}
	if strings.Join(order, "\n") != strings.Join(gitOrder, "\n") {
		t.Errorf("order:\n got %q\nwant %q", order, gitOrder)
	}
	return got.Changes
}

func changeKey(c Change) string {
	switch {
	case c.Conflicted:
		return "conflict " + c.Path
	case c.Status == StatusUntracked:
		return "untracked " + c.Path
	case c.Staged:
		return "staged " + c.Path
	}
	return "unstaged " + c.Path
}

// subrepo makes a repository with one commit at name, added to r as a
// submodule's commit (a gitlink) when r commits.
func (r *testRepo) subrepo(name string) {
	r.t.Helper()
	r.write(name+"/f.txt", "f\n")
	r.git("-C", name, "init", "-q", "-b", "main")
	r.subCommit(name)
}

// subCommit commits everything in the repository at name.
func (r *testRepo) subCommit(name string) {
	r.t.Helper()
	r.write(name+"/f.txt", r.gitOut("-C", name, "rev-list", "--all", "--count")+"\n")
	r.git("-C", name, "add", "-A")
	r.git("-C", name, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "-m", "c")
}

// TestStatusWorktreeConfigured: a repository whose core.worktree puts the
// working tree below the directory that holds .git, so that git's top level
// is not the directory Status and Diff start asking in, and one whose
// working tree does not contain the directory asked about.
func TestStatusWorktreeConfigured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	r.git("config", "core.worktree", r.path("w"))
	r.write("w/a.txt", "a\n")
	r.write("w/d/b.txt", "b\n")
	r.git("-C", "w", "add", "-A")
	r.git("-C", "w", "commit", "-q", "-m", "base")
	r.write("w/a.txt", "A\n")
	r.write("w/d/b.txt", "B\nmore\n")

	got, err := direct.Status(ctx, r.path("w"))
	if err != nil {
		t.Fatal(err)
	}
	compareChanges(t, got.Changes, []Change{
		{Path: "a.txt", Status: StatusModified, Additions: 1, Deletions: 1},
		{Path: "d/b.txt", Status: StatusModified, Additions: 2, Deletions: 1},
	})
	diff, err := direct.diffFiles(ctx, r.path("w/d"), nil, false)
	if err != nil || len(diff) != 1 || diff[0].Path != "d/b.txt" {
		t.Fatalf("diff: %+v, %v", diff, err)
	}

	r.git("config", "core.worktree", t.TempDir())
	if _, err := direct.Status(ctx, r.path("w")); !errors.Is(err, ErrUnsafeRepository) {
		t.Errorf("Status with the working tree elsewhere: %v", err)
	}
	if _, err := direct.Diff(ctx, r.path("w"), nil, false); !errors.Is(err, ErrUnsafeRepository) {
		t.Errorf("Diff with the working tree elsewhere: %v", err)
	}
}

// TestStatusBranchParity compares Status's branch fields with git's own
// porcelain v2 header (read by parsePorcelainV2) for every shape of
// upstream, a branch without a commit and a detached HEAD.
func TestStatusBranchParity(t *testing.T) {
	t.Parallel()
	base := func(t *testing.T) *testRepo {
		r := newRepo(t)
		r.write("a", "1\n")
		r.commitAll("base")
		return r
	}
	commits := func(r *testRepo, n int) {
		for i := range n {
			r.write("a", lines("c", i+2+len(r.git("rev-list", "--all"))))
			r.commitAll("c")
		}
	}
	remote := func(r *testRepo, branch string) {
		r.git("update-ref", "refs/remotes/origin/"+branch, "HEAD")
		r.git("config", "remote.origin.url", "/nonexistent")
		r.git("config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
		r.git("config", "branch."+branch+".remote", "origin")
		r.git("config", "branch."+branch+".merge", "refs/heads/"+branch)
	}
	tests := map[string]func(t *testing.T) *testRepo{
		"no upstream": base,
		"in sync": func(t *testing.T) *testRepo {
			r := base(t)
			remote(r, "main")
			return r
		},
		"ahead and behind a remote": func(t *testing.T) *testRepo {
			r := base(t)
			remote(r, "main")
			commits(r, 3)
			r.git("checkout", "-q", "-b", "tmp", "origin/main")
			commits(r, 2)
			r.git("update-ref", "refs/remotes/origin/main", "HEAD")
			r.git("checkout", "-q", "main")
			return r
		},
		"ahead of a local branch": func(t *testing.T) *testRepo {
			r := base(t)
			r.git("branch", "up")
			r.git("branch", "--set-upstream-to=up")
			commits(r, 2)
			return r
		},
		"behind, on a branch with a slash": func(t *testing.T) *testRepo {
			r := base(t)
			r.git("checkout", "-q", "-b", "feature/x")
			remote(r, "feature/x")
			r.git("reset", "-q", "--hard", "HEAD")
			r.git("checkout", "-q", "-b", "tmp")
			commits(r, 2)
			r.git("update-ref", "refs/remotes/origin/feature/x", "HEAD")
			r.git("checkout", "-q", "feature/x")
			return r
		},
		"upstream gone": func(t *testing.T) *testRepo {
			r := base(t)
			remote(r, "main")
			r.git("update-ref", "-d", "refs/remotes/origin/main")
			return r
		},
		"no commit yet, upstream configured": func(t *testing.T) *testRepo {
			r := newRepo(t)
			r.git("config", "branch.main.remote", "origin")
			r.git("config", "branch.main.merge", "refs/heads/main")
			return r
		},
		"detached": func(t *testing.T) *testRepo {
			r := base(t)
			commits(r, 1)
			r.git("checkout", "-q", "--detach", "HEAD~1")
			return r
		},
	}
	for name, setup := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := setup(t)
			got, err := direct.Status(context.Background(), r.dir)
			if err != nil {
				t.Fatal(err)
			}
			want, err := parsePorcelainV2([]byte(r.gitOut("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=no")))
			if err != nil {
				t.Fatal(err)
			}
			got.Changes, want.Changes, got.IsClean, want.IsClean, got.State = nil, nil, false, false, ""
			if !reflect.DeepEqual(got, want) {
				t.Errorf("branch fields:\n got %+v\nwant %+v", *got, *want)
			}
		})
	}
}
