package gitops

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cliLog is what `git log` says of HEAD's history: the same fields, files
// by --numstat without rename detection (binary files count 0).
func cliLog(t *testing.T, r *testRepo) []LogCommit {
	t.Helper()
	out := r.git("log", "--no-renames", "--numstat", "--format=%x1e%H%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%s%x1f%b%x1f", "HEAD")
	var commits []LogCommit
	for _, rec := range strings.Split(out, "\x1e")[1:] {
		f := strings.Split(rec, "\x1f")
		c := LogCommit{Hash: f[0], Parents: []string{}, Author: f[2], Email: f[3], Date: f[4], Subject: f[5], Body: strings.TrimSpace(f[6]), Files: []LogFile{}}
		if f[1] != "" {
			c.Parents = strings.Fields(f[1])
		}
		for _, line := range strings.Split(strings.TrimSpace(f[7]), "\n") {
			if line == "" {
				continue
			}
			parts := strings.SplitN(line, "\t", 3)
			add, _ := strconv.Atoi(parts[0]) // "-" for binary: 0
			del, _ := strconv.Atoi(parts[1])
			c.Files = append(c.Files, LogFile{Path: parts[2], Additions: add, Deletions: del})
		}
		commits = append(commits, c)
	}
	return commits
}

func sameCommit(a, b LogCommit) bool {
	ta, _ := time.Parse(time.RFC3339, a.Date)
	tb, _ := time.Parse(time.RFC3339, b.Date)
	if a.Hash != b.Hash || fmt.Sprint(a.Parents) != fmt.Sprint(b.Parents) || a.Author != b.Author || a.Email != b.Email ||
		!ta.Equal(tb) || a.Subject != b.Subject || strings.TrimSpace(a.Body) != b.Body || len(a.Files) != len(b.Files) {
		return false
	}
	files := map[string]LogFile{}
	for _, f := range a.Files {
		files[f.Path] = f
	}
	for _, f := range b.Files {
		if files[f.Path] != f {
			return false
		}
	}
	return true
}

// TestLogMatchesTheCLI pages through a replayed history of varied commits
// (edits, new, deleted and renamed files, mode changes, binary files,
// symbolic links) and compares every commit with git log's plain output
// and with go-git's reading of the objects (an implementation of its own).
func TestLogMatchesTheCLI(t *testing.T) {
	t.Parallel()
	r, _ := buildHistory(t, 40)
	r.git("commit", "--allow-empty", "-q", "-m", "A subject\n\nA body\nof two lines.")
	want := cliLog(t, r)
	var got []LogCommit
	after := ""
	for pages := 0; ; pages++ {
		res, err := (Git{}).Log(context.Background(), r.dir, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Commits) == 0 || len(res.Commits) > 7 || pages > 20 {
			t.Fatalf("page %d: %d commits", pages, len(res.Commits))
		}
		got = append(got, res.Commits...)
		after = res.Commits[len(res.Commits)-1].Hash
		if !res.HasMore {
			break
		}
	}
	oracle, err := goGitLog(context.Background(), r.dir, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) != len(oracle.Commits) {
		t.Fatalf("%d commits, git log has %d, go-git %d", len(got), len(want), len(oracle.Commits))
	}
	for i := range want {
		if !sameCommit(got[i], want[i]) || !sameCommit(oracle.Commits[i], want[i]) {
			t.Fatalf("commit %d:\n Log    %+v\n go-git %+v\n git    %+v", i, got[i], oracle.Commits[i], want[i])
		}
	}
}

// TestLogInASubdirectory: a session in a subdirectory sees the commits
// that touched it, and only its files.
func TestLogInASubdirectory(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.write("app/a.go", "a\n")
	r.write("other/b.go", "b\n")
	r.commitAll("both")
	r.write("other/b.go", "b2\n")
	r.commitAll("only other")
	res, err := (Git{}).Log(context.Background(), r.path("app"), "", 0)
	if err != nil || len(res.Commits) != 1 || res.Commits[0].Subject != "both" || len(res.Commits[0].Files) != 1 || res.Commits[0].Files[0].Path != "app/a.go" {
		t.Fatalf("log of app/: %+v %v", res, err)
	}
}

func TestLogErrors(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	if res, err := (Git{}).Log(context.Background(), r.dir, "", 0); err != nil || len(res.Commits) != 0 || res.HasMore {
		t.Fatalf("a repository without commits: %+v %v", res, err)
	}
	r.write("a.txt", "a\n")
	r.commitAll("first")
	for _, after := range []string{"nothex", strings.Repeat("0", 40)} {
		if _, err := (Git{}).Log(context.Background(), r.dir, after, 0); !errors.Is(err, ErrUnknownCommit) {
			t.Errorf("after %q: %v", after, err)
		}
	}
	if _, err := (Git{}).Log(context.Background(), t.TempDir(), "", 0); !errors.Is(err, ErrNotRepository) {
		t.Errorf("not a repository: %v", err)
	}
}

// TestShowIsTheCommitsDiff: a commit's diff from Show is the staged diff of
// a work tree whose HEAD is the commit's parent and whose index is the
// commit (Diff, itself checked against git), for every commit of a
// replayed history; a root commit is shown against the empty tree.
func TestShowIsTheCommitsDiff(t *testing.T) {
	t.Parallel()
	src, hashes := buildHistory(t, 12)
	clone := &testRepo{t: t, dir: t.TempDir()}
	clone.git("clone", "-q", "--no-local", src.dir, ".")
	ctx := context.Background()
	g := Git{}
	for i := 1; i < len(hashes); i++ {
		shown, err := g.Show(ctx, src.dir, hashes[i])
		if err != nil {
			t.Fatal(err)
		}
		clone.git("checkout", "-q", "-f", "--detach", hashes[i])
		clone.git("reset", "-q", "--soft", hashes[i-1])
		staged, err := g.Diff(ctx, clone.dir, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(shown, staged) || len(shown.Files) == 0 {
			t.Fatalf("commit %d: Show has %d files, the staged diff %d:\n%+v\n%+v", i, len(shown.Files), len(staged.Files), shown, staged)
		}
	}
	root, err := g.Show(ctx, src.dir, hashes[0])
	if err != nil || len(root.Files) != 12 || root.Files[0].Status != "added" {
		t.Fatalf("root commit: %v %+v", err, root)
	}
	for _, bad := range []string{"HEAD", strings.Repeat("0", 40), "../../etc"} {
		if _, err := g.Show(ctx, src.dir, bad); !errors.Is(err, ErrUnknownCommit) {
			t.Errorf("Show(%q): %v", bad, err)
		}
	}
}
