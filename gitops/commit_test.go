package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// commitRepo has one committed base and a mix of staged, unstaged and
// untracked changes.
func commitRepo(t *testing.T) *testRepo {
	r := newRepo(t)
	r.write("keep.txt", "keep\n")
	r.write("mod.txt", "1\n")
	r.write("del.txt", "gone soon\n")
	r.write("staged.txt", "s\n")
	r.write("old-name.txt", lines("rename", 10))
	r.commitAll("base")
	r.write("mod.txt", "2\n")
	r.remove("del.txt")
	r.write("staged.txt", "staged change\n")
	r.git("add", "staged.txt")
	r.write("new.txt", "brand new\n")
	r.write("other-untracked.txt", "leave me\n")
	r.git("mv", "old-name.txt", "new-name.txt")
	return r
}

// committedFiles lists the paths HEAD's commit changed, with their status
// letters.
func committedFiles(r *testRepo) []string {
	out := r.git("show", "--name-status", "--format=", "HEAD")
	return strings.Fields(out)
}

func TestCommitNamedFiles(t *testing.T) {
	r := commitRepo(t)
	res, err := direct.Commit(context.Background(), r.dir, "Commit chosen files\n\nBody text.", []string{"mod.txt", "del.txt", "new.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := committedFiles(r), []string{"D", "del.txt", "M", "mod.txt", "A", "new.txt"}; !slices.Equal(got, want) {
		t.Errorf("committed %v, want %v", got, want)
	}
	head := strings.TrimSpace(r.git("rev-parse", "HEAD"))
	if res.Hash != head || res.Branch != "main" || res.Summary != "Commit chosen files" {
		t.Errorf("result %+v, HEAD %s", res, head)
	}
	if msg := r.git("log", "-1", "--format=%B"); msg != "Commit chosen files\n\nBody text.\n\n" {
		t.Errorf("message %q", msg)
	}
	if a := r.git("log", "-1", "--format=%an <%ae>|%cn <%ce>"); a != "Test User <test@example.com>|Test User <test@example.com>\n" {
		t.Errorf("identity %q", a)
	}
	// What was not named is untouched: still staged, still untracked.
	compareChanges(t, res.Status.Changes, []Change{
		{Path: "new-name.txt", OldPath: "old-name.txt", Status: StatusRenamed, Staged: true},
		{Path: "other-untracked.txt", Status: StatusUntracked, Additions: 1},
		{Path: "staged.txt", Status: StatusModified, Staged: true, Additions: 1, Deletions: 1},
	})
	compareChanges(t, res.Status.Changes, oracleChanges(t, r))
}

func TestCommitStaged(t *testing.T) {
	r := commitRepo(t)
	res, err := direct.Commit(context.Background(), r.dir, "staged only", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := committedFiles(r), []string{"R100", "old-name.txt", "new-name.txt", "M", "staged.txt"}; !slices.Equal(got, want) {
		t.Errorf("committed %v, want %v", got, want)
	}
	compareChanges(t, res.Status.Changes, []Change{
		{Path: "del.txt", Status: StatusDeleted, Deletions: 1},
		{Path: "mod.txt", Status: StatusModified, Additions: 1, Deletions: 1},
		{Path: "new.txt", Status: StatusUntracked, Additions: 1},
		{Path: "other-untracked.txt", Status: StatusUntracked, Additions: 1},
	})
}

// TestCommitRename names one side of a staged rename: both sides go in.
func TestCommitRename(t *testing.T) {
	for _, name := range []string{"new-name.txt", "old-name.txt"} {
		t.Run(name, func(t *testing.T) {
			r := commitRepo(t)
			if _, err := direct.Commit(context.Background(), r.dir, "rename", []string{name}); err != nil {
				t.Fatal(err)
			}
			if got, want := committedFiles(r), []string{"R100", "old-name.txt", "new-name.txt"}; !slices.Equal(got, want) {
				t.Errorf("committed %v, want %v", got, want)
			}
		})
	}
}

// TestCommitStagedAndUnstaged names a file with staged and unstaged
// changes: like `git commit -- file`, the working tree's version goes in.
func TestCommitStagedAndUnstaged(t *testing.T) {
	r := commitRepo(t)
	r.write("staged.txt", "staged change\nand more\n")
	res, err := direct.Commit(context.Background(), r.dir, "both", []string{"staged.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.git("show", "HEAD:staged.txt"); got != "staged change\nand more\n" {
		t.Errorf("committed content %q", got)
	}
	for _, c := range res.Status.Changes {
		if c.Path == "staged.txt" {
			t.Errorf("staged.txt still changed: %+v", c)
		}
	}
}

func TestCommitInitial(t *testing.T) {
	r := newRepo(t)
	r.write("first.txt", "1\n")
	r.write("second.txt", "2\n")
	res, err := direct.Commit(context.Background(), r.dir, "root commit", []string{"first.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := committedFiles(r), []string{"A", "first.txt"}; !slices.Equal(got, want) {
		t.Errorf("committed %v, want %v", got, want)
	}
	if res.Branch != "main" || res.Status.Head != res.Hash {
		t.Errorf("result %+v", res)
	}
	compareChanges(t, res.Status.Changes, []Change{{Path: "second.txt", Status: StatusUntracked, Additions: 1}})
}

func TestCommitMerge(t *testing.T) {
	r := conflictRepo(t)
	r.gitErr("merge", "other")
	ctx := context.Background()
	before := r.snapshot()
	if _, err := direct.Commit(ctx, r.dir, "merge", nil); !errors.Is(err, ErrUnmergedPaths) {
		t.Fatalf("with conflicts: %v", err)
	}
	if after := r.snapshot(); after != before {
		t.Errorf("repository changed:\n%s\n---\n%s", before, after)
	}
	r.write("c.txt", "1\nresolved\n3\n")
	r.git("add", "c.txt")
	if _, err := direct.Commit(ctx, r.dir, "merge", []string{"c.txt"}); !errors.Is(err, ErrMergeInProgress) {
		t.Fatalf("partial merge commit: %v", err)
	}
	res, err := direct.Commit(ctx, r.dir, "Merge other", nil)
	if err != nil {
		t.Fatal(err)
	}
	if parents := strings.Fields(r.git("log", "-1", "--format=%P")); len(parents) != 2 {
		t.Errorf("merge commit parents %v", parents)
	}
	if res.Status.State != StateNone || !res.Status.IsClean {
		t.Errorf("after merge %+v", res.Status)
	}
}

// TestCommitCherryPick refuses named files while a cherry-pick is being
// concluded, and concludes it with what is staged.
func TestCommitCherryPick(t *testing.T) {
	r := conflictRepo(t)
	r.gitErr("cherry-pick", "other")
	r.write("c.txt", "1\npicked\n3\n")
	r.git("add", "c.txt")
	ctx := context.Background()
	before := r.snapshot()
	if _, err := direct.Commit(ctx, r.dir, "pick", []string{"c.txt"}); !errors.Is(err, ErrMergeInProgress) {
		t.Fatalf("partial commit during cherry-pick: %v", err)
	}
	if after := r.snapshot(); after != before {
		t.Errorf("repository changed:\n%s\n---\n%s", before, after)
	}
	res, err := direct.Commit(ctx, r.dir, "pick", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status.State != StateNone || r.git("show", "HEAD:c.txt") != "1\npicked\n3\n" {
		t.Errorf("after cherry-pick: %+v", res.Status)
	}
}

// TestCommitAuthorEnv checks that GIT_AUTHOR_* is honoured as git does.
func TestCommitAuthorEnv(t *testing.T) {
	r := commitRepo(t)
	t.Setenv("GIT_AUTHOR_NAME", "Env Author")
	t.Setenv("GIT_AUTHOR_EMAIL", "env@example.com")
	if _, err := direct.Commit(context.Background(), r.dir, "env", []string{"mod.txt"}); err != nil {
		t.Fatal(err)
	}
	if a := r.git("log", "-1", "--format=%an <%ae>|%cn <%ce>"); a != "Env Author <env@example.com>|Test User <test@example.com>\n" {
		t.Errorf("identity %q", a)
	}
}

// TestCommitHooksRun checks that the repository's hooks run like they do
// for git commit: commit-msg may rewrite the message, post-commit runs.
func TestCommitHooksRun(t *testing.T) {
	r := commitRepo(t)
	writeHook(t, r, "pre-commit", "#!/bin/sh\necho ran > \"$(git rev-parse --git-dir)/pre-commit-ran\"\n")
	writeHook(t, r, "commit-msg", "#!/bin/sh\nprintf '\\nSigned-off-by: Hook <hook@example.com>\\n' >> \"$1\"\n")
	writeHook(t, r, "post-commit", "#!/bin/sh\necho ran > \"$(git rev-parse --git-dir)/post-commit-ran\"\n")
	if _, err := direct.Commit(context.Background(), r.dir, "hooked", []string{"mod.txt"}); err != nil {
		t.Fatal(err)
	}
	if msg := r.git("log", "-1", "--format=%B"); !strings.Contains(msg, "Signed-off-by: Hook") {
		t.Errorf("commit-msg hook did not run: %q", msg)
	}
	for _, f := range []string{"pre-commit-ran", "post-commit-ran"} {
		if _, err := os.Stat(filepath.Join(r.dir, ".git", f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func writeHook(t *testing.T, r *testRepo, name, script string) {
	t.Helper()
	dir := filepath.Join(r.dir, ".git", "hooks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestCommitErrors checks every refusal and that the repository is left
// exactly as it was.
func TestCommitErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, r *testRepo)
		message string
		files   []string
		want    error
		text    string
	}{
		{name: "empty message", message: " \n\t", files: []string{"mod.txt"}, want: ErrEmptyMessage},
		{name: "nothing staged", setup: func(t *testing.T, r *testRepo) { r.git("reset", "-q") }, want: ErrNothingToCommit},
		{name: "no files ticked", files: []string{}, want: ErrNothingToCommit},
		{name: "unchanged tracked file", files: []string{"keep.txt"}, want: ErrNothingToCommit},
		{name: "changed back to HEAD", setup: func(t *testing.T, r *testRepo) { r.write("staged.txt", "s\n") }, files: []string{"staged.txt"}, want: ErrNothingToCommit},
		{name: "missing file", files: []string{"mod.txt", "no-such.txt"}, want: ErrPathNotFound},
		{name: "ignored file", setup: func(t *testing.T, r *testRepo) {
			r.write(".git/info/exclude", "ignored.log\n")
			r.write("ignored.log", "x\n")
		}, files: []string{"ignored.log"}, want: ErrPathNotFound},
		{name: "directory", setup: func(t *testing.T, r *testRepo) { r.write("dir/a.txt", "a\n") }, files: []string{"dir"}, want: ErrPathNotFound},
		{name: "outside", files: []string{"../escape.txt"}, want: ErrInvalidPath},
		{name: "absolute", files: []string{"/etc/passwd"}, want: ErrInvalidPath},
		{name: "git dir", files: []string{".git/config"}, want: ErrInvalidPath},
		{name: "detached", setup: func(t *testing.T, r *testRepo) { r.git("checkout", "-q", "--detach") }, files: []string{"mod.txt"}, want: ErrDetachedHead},
		{name: "no identity", setup: func(t *testing.T, r *testRepo) {
			r.git("config", "--unset", "user.name")
			r.git("config", "--unset", "user.email")
			r.git("config", "user.useConfigOnly", "true")
		}, files: []string{"mod.txt"}, want: ErrNoIdentity},
		{name: "pre-commit refuses", setup: func(t *testing.T, r *testRepo) {
			writeHook(t, r, "pre-commit", "#!/bin/sh\necho 'lint failed: fix it' >&2\nexit 1\n")
		}, files: []string{"mod.txt", "new.txt", "del.txt"}, want: ErrHookFailed, text: "lint failed: fix it"},
		{name: "pre-commit refuses staged", setup: func(t *testing.T, r *testRepo) {
			writeHook(t, r, "pre-commit", "#!/bin/sh\nexit 1\n")
		}, want: ErrHookFailed},
		{name: "commit-msg refuses", setup: func(t *testing.T, r *testRepo) {
			writeHook(t, r, "commit-msg", "#!/bin/sh\necho 'message must mention a ticket' >&2\nexit 1\n")
		}, files: []string{"new.txt"}, want: ErrHookFailed, text: "ticket"},
		{name: "hooks path", setup: func(t *testing.T, r *testRepo) {
			dir := filepath.Join(r.dir, "..", filepath.Base(r.dir)+"-hooks")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "pre-commit"), []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			r.git("config", "core.hooksPath", dir)
		}, files: []string{"new.txt"}, want: ErrHookFailed},
		{name: "index locked", setup: func(t *testing.T, r *testRepo) { r.write(".git/index.lock", "") }, files: []string{"mod.txt"}, want: ErrGit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := commitRepo(t)
			if tt.setup != nil {
				tt.setup(t, r)
			}
			msg := tt.message
			if msg == "" {
				msg = "a message"
			}
			before := r.snapshot()
			res, err := direct.Commit(context.Background(), r.dir, msg, tt.files)
			if !errors.Is(err, tt.want) || res != nil {
				t.Fatalf("Commit: %v, %+v; want %v", err, res, tt.want)
			}
			if tt.text != "" && !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q lacks %q", err, tt.text)
			}
			if after := r.snapshot(); after != before {
				t.Errorf("repository changed:\n%s\n---\n%s", before, after)
			}
		})
	}
}
