package gitops

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// twoHunkRepo has a.txt committed with 30 lines and changed at lines 3 and
// 25: two hunks.
func twoHunkRepo(t *testing.T) *testRepo {
	r := newRepo(t)
	r.write("a.txt", lines("line", 30))
	r.write("b.txt", "b\n")
	r.commitAll("first")
	edited := strings.Replace(lines("line", 30), "line 3\n", "line 3 edited\n", 1)
	r.write("a.txt", strings.Replace(edited, "line 25\n", "line 25 edited\n", 1))
	return r
}

func fileDiff(t *testing.T, dir, path string, cached bool) FileDiff {
	t.Helper()
	res, err := direct.Diff(context.Background(), dir, []string{path}, cached)
	if err != nil {
		t.Fatal(err)
	}
	return findDiff(t, res.Files, path)
}

// TestHunkStagingRoundTrip: staging the second hunk puts exactly it in the
// index (git diff --cached shows it alone), the first stays unstaged;
// unstaging it puts the index back.
func TestHunkStagingRoundTrip(t *testing.T) {
	t.Parallel()
	r := twoHunkRepo(t)
	ctx := context.Background()
	fd := fileDiff(t, r.dir, "a.txt", false)
	if len(fd.Hunks) != 2 {
		t.Fatalf("%d hunks", len(fd.Hunks))
	}
	if _, err := direct.StageHunk(ctx, r.dir, HunkRef{Path: "a.txt", Fingerprint: fd.Fingerprint, Hunk: 1}); err != nil {
		t.Fatal(err)
	}
	cached := r.gitOut("diff", "--cached", "-U0")
	if !strings.Contains(cached, "+line 25 edited") || strings.Contains(cached, "line 3 edited") {
		t.Fatalf("git diff --cached after staging hunk 2:\n%s", cached)
	}
	unstaged := r.gitOut("diff", "-U0")
	if !strings.Contains(unstaged, "+line 3 edited") || strings.Contains(unstaged, "line 25") {
		t.Fatalf("git diff after staging hunk 2:\n%s", unstaged)
	}
	staged := fileDiff(t, r.dir, "a.txt", true)
	if len(staged.Hunks) != 1 {
		t.Fatalf("staged hunks: %+v", staged.Hunks)
	}
	if _, err := direct.UnstageHunk(ctx, r.dir, HunkRef{Path: "a.txt", Fingerprint: staged.Fingerprint, Hunk: 0}); err != nil {
		t.Fatal(err)
	}
	if out := r.gitOut("diff", "--cached"); out != "" {
		t.Fatalf("index after unstaging: %s", out)
	}
	if got := fileDiff(t, r.dir, "a.txt", false); got.Fingerprint != fd.Fingerprint {
		t.Fatal("the round trip changed the unstaged diff")
	}
}

// TestHunkOpsRefuseAChangedFile: a fingerprint of an earlier diff is
// refused, and nothing changes.
func TestHunkOpsRefuseAChangedFile(t *testing.T) {
	t.Parallel()
	r := twoHunkRepo(t)
	ctx := context.Background()
	fd := fileDiff(t, r.dir, "a.txt", false)
	r.write("a.txt", strings.Replace(lines("line", 30), "line 3\n", "line 3 edited again\n", 1))
	before := r.snapshot()
	h := HunkRef{Path: "a.txt", Fingerprint: fd.Fingerprint, Hunk: 0}
	if _, err := direct.StageHunk(ctx, r.dir, h); !errors.Is(err, ErrChanged) {
		t.Fatalf("stage: %v", err)
	}
	if _, _, err := direct.DiscardHunk(ctx, r.dir, h); !errors.Is(err, ErrChanged) {
		t.Fatalf("discard: %v", err)
	}
	if _, _, err := direct.Discard(ctx, r.dir, map[string]string{"a.txt": fd.Fingerprint}); !errors.Is(err, ErrChanged) {
		t.Fatalf("discard file: %v", err)
	}
	if r.snapshot() != before {
		t.Fatal("a refused operation changed the repository")
	}
	fresh := fileDiff(t, r.dir, "a.txt", false)
	if _, err := direct.StageHunk(ctx, r.dir, HunkRef{Path: "a.txt", Fingerprint: fresh.Fingerprint, Hunk: 5}); !errors.Is(err, ErrNoHunk) {
		t.Fatalf("hunk out of range: %v", err)
	}
	if _, err := direct.StageHunk(ctx, r.dir, HunkRef{Path: "b.txt", Fingerprint: fresh.Fingerprint}); !errors.Is(err, ErrNoChange) {
		t.Fatalf("unchanged file: %v", err)
	}
	if _, err := direct.StageHunk(ctx, r.dir, HunkRef{Path: "../x", Fingerprint: fresh.Fingerprint}); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("path outside: %v", err)
	}
}

// TestHunkOfNewDeletedAndOddFiles: an untracked file's one hunk stages it,
// a deletion's stages the deletion, a file with a quote, a tab and a
// non-ASCII letter in its name and no final newline round-trips, and a
// binary file is refused hunk by hunk.
func TestHunkOfNewDeletedAndOddFiles(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	odd := "we\"ird\tnäme.txt"
	r.write(odd, "one\ntwo")
	r.write("gone.txt", "bye\n")
	r.commitAll("first")
	r.write(odd, "one\nTWO")
	r.remove("gone.txt")
	r.write("new.txt", "hello\n")
	r.write("bin.dat", "\x00\x01")
	ctx := context.Background()
	for _, path := range []string{odd, "gone.txt", "new.txt"} {
		fd := fileDiff(t, r.dir, path, false)
		if _, err := direct.StageHunk(ctx, r.dir, HunkRef{Path: path, Fingerprint: fd.Fingerprint}); err != nil {
			t.Fatalf("%q: %v", path, err)
		}
	}
	if out := r.gitOut("diff"); out != "" {
		t.Fatalf("unstaged after staging every hunk:\n%s", out)
	}
	if st := r.gitOut("status", "--porcelain"); !strings.Contains(st, "A  new.txt") || !strings.Contains(st, "D  gone.txt") {
		t.Fatalf("status:\n%s", st)
	}
	if got := r.gitOut("show", ":"+odd); got != "one\nTWO" {
		t.Fatalf("index content %q", got)
	}
	fd := fileDiff(t, r.dir, "bin.dat", false)
	if _, err := direct.StageHunk(ctx, r.dir, HunkRef{Path: "bin.dat", Fingerprint: fd.Fingerprint}); !errors.Is(err, ErrHunkUnsupported) {
		t.Fatalf("binary hunk: %v", err)
	}
	if _, err := direct.Stage(ctx, r.dir, []string{"bin.dat"}); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Unstage(ctx, r.dir, []string{"bin.dat", "new.txt", "gone.txt"}); err != nil {
		t.Fatal(err)
	}
	if st := r.gitOut("status", "--porcelain"); !strings.Contains(st, "?? new.txt") || !strings.Contains(st, " D gone.txt") || !strings.Contains(st, "?? bin.dat") {
		t.Fatalf("status after unstaging:\n%s", st)
	}
	if _, err := direct.Stage(ctx, r.dir, []string{"nothing.txt"}); !errors.Is(err, ErrPathNotFound) {
		t.Fatalf("stage of nothing: %v", err)
	}
}

// TestDiscardKeepsWhatItThrowsAway: discarding a hunk, a tracked file and
// an untracked file leaves the staged change alone, and each discarded
// content comes back from its recovery ref.
func TestDiscardKeepsWhatItThrowsAway(t *testing.T) {
	t.Parallel()
	r := twoHunkRepo(t)
	ctx := context.Background()
	r.write("b.txt", "b staged\n")
	r.git("add", "b.txt")
	r.write("b.txt", "b staged\nand more\n")
	r.write("scratch.txt", "precious notes\n")
	edited, _ := os.ReadFile(r.path("a.txt"))

	fd := fileDiff(t, r.dir, "a.txt", false)
	kept, st, err := direct.DiscardHunk(ctx, r.dir, HunkRef{Path: "a.txt", Fingerprint: fd.Fingerprint, Hunk: 0})
	if err != nil {
		t.Fatal(err)
	}
	now, _ := os.ReadFile(r.path("a.txt"))
	if strings.Contains(string(now), "line 3 edited") || !strings.Contains(string(now), "line 25 edited") {
		t.Fatalf("a.txt after discarding hunk 1:\n%s", now)
	}
	if !strings.HasPrefix(kept.Ref, "refs/tether/discarded/") || kept.Until.IsZero() || st == nil {
		t.Fatalf("kept %+v", kept)
	}
	if got := r.gitOut("show", kept.Ref+":a.txt"); got != string(edited) {
		t.Fatalf("recovered a.txt:\n%s", got)
	}

	files := map[string]string{
		"b.txt":       fileDiff(t, r.dir, "b.txt", false).Fingerprint,
		"scratch.txt": fileDiff(t, r.dir, "scratch.txt", false).Fingerprint,
	}
	kept2, _, err := direct.Discard(ctx, r.dir, files)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.path("scratch.txt")); !os.IsNotExist(err) {
		t.Fatal("the untracked file is still there")
	}
	if got, _ := os.ReadFile(r.path("b.txt")); string(got) != "b staged\n" {
		t.Fatalf("b.txt = %q, want its staged content", got)
	}
	if out := r.gitOut("diff", "--cached", "--name-only"); out != "b.txt\n" {
		t.Fatalf("the staged change was lost: %q", out)
	}
	if got := r.gitOut("show", kept2.Ref+":scratch.txt"); got != "precious notes\n" {
		t.Fatalf("recovered scratch.txt %q", got)
	}
	r.git("restore", "--source="+kept2.Ref, "--", "b.txt")
	if got, _ := os.ReadFile(r.path("b.txt")); string(got) != "b staged\nand more\n" {
		t.Fatalf("restored b.txt = %q", got)
	}
	if refs := r.gitOut("for-each-ref", "refs/tether/"); strings.Count(refs, "\n") != 2 {
		t.Fatalf("recovery refs:\n%s", refs)
	}
	if _, _, err := direct.Discard(ctx, r.dir, map[string]string{"a.txt": ""}); !errors.Is(err, ErrChanged) {
		t.Fatalf("discard without the fingerprint: %v", err)
	}
}

// TestDiscardPrunesOldRecoveryRefs: refs past DiscardKeep go at the next
// discard; younger ones stay.
func TestDiscardPrunesOldRecoveryRefs(t *testing.T) {
	t.Parallel()
	r := twoHunkRepo(t)
	head := strings.TrimSpace(r.git("rev-parse", "HEAD"))
	r.git("update-ref", "refs/tether/discarded/1000-aaaaaaaa", head)
	r.git("update-ref", "refs/tether/discarded/99999999999-bbbbbbbb", head)
	fd := fileDiff(t, r.dir, "a.txt", false)
	if _, _, err := direct.Discard(context.Background(), r.dir, map[string]string{"a.txt": fd.Fingerprint}); err != nil {
		t.Fatal(err)
	}
	refs := r.gitOut("for-each-ref", "--format=%(refname)", "refs/tether/")
	if strings.Contains(refs, "1000-aaaaaaaa") || !strings.Contains(refs, "99999999999-bbbbbbbb") || strings.Count(refs, "\n") != 2 {
		t.Fatalf("refs after pruning:\n%s", refs)
	}
}
