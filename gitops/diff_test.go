package gitops

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// goSource is a file with functions, so that git prints function context
// after hunk headers.
func goSource(body string) string {
	var b strings.Builder
	b.WriteString("package p\n\n")
	for _, name := range []string{"alpha", "beta", "gamma"} {
		b.WriteString("func " + name + "() int {\n")
		for i := range 8 {
			b.WriteString("\tx := " + name + "\n")
			if name == "beta" && i == 4 {
				b.WriteString(body)
			}
		}
		b.WriteString("\treturn 0\n}\n\n")
	}
	return b.String()
}

// diffRepo makes a repository with every kind of change, half staged.
func diffRepo(t *testing.T) *testRepo {
	r := newRepo(t)
	r.write("code.go", goSource(""))
	r.write("nonl.txt", "a\nb\nc")
	r.write("addnl.txt", "a\nb")
	r.write("deleted.txt", lines("d", 4))
	r.write("empty-deleted", "")
	r.write("rename-me.txt", lines("rename", 30))
	r.write("mode.sh", "#!/bin/sh\necho hi\n")
	r.write("image.bin", "\x89PNG\x00\x01")
	r.write("link-to-file", "was a file\n")
	r.write("staged-mod.txt", lines("s", 12))
	r.write("big.txt", lines("big", 200))
	r.write("space name.txt", "old\n")
	r.commitAll("base")

	r.write("code.go", strings.Replace(goSource("\ty := 2\n"), "x := gamma\n", "x := GAMMA\n", 1))
	r.write("nonl.txt", "a\nB\nc")
	r.write("addnl.txt", "a\nb\n")
	r.remove("deleted.txt")
	r.remove("empty-deleted")
	if err := os.Chmod(r.path("mode.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.write("image.bin", "\x89PNG\x00\x02\x03")
	r.remove("link-to-file")
	r.symlink("code.go", "link-to-file")
	r.write("big.txt", strings.Replace(strings.Replace(lines("big", 200), "big 10\n", "BIG 10\n", 1), "big 150\n", "", 1))
	r.write("space name.txt", "new\n")

	r.git("mv", "rename-me.txt", "renamed.txt")
	r.write("renamed.txt", strings.Replace(lines("rename", 30), "rename 15\n", "renamed 15\n", 1))
	r.git("add", "renamed.txt")
	r.write("staged-mod.txt", strings.Replace(lines("s", 12), "s 3\n", "S 3\n", 1))
	r.git("add", "staged-mod.txt")
	r.write("staged-mod.txt", strings.Replace(lines("s", 12), "s 3\n", "S 3\n", 1)+"unstaged\n")
	r.write("staged-new.txt", "new file\nstaged\n")
	r.write("staged-empty", "")
	r.git("add", "staged-new.txt", "staged-empty")

	r.write("untracked.txt", "u1\nu2")
	r.write("untracked-empty", "")
	r.write("untracked.bin", "\x00\x00")
	r.symlink("nowhere", "untracked-link")
	r.write("untracked-exec", "#!/bin/sh\n")
	if err := os.Chmod(r.path("untracked-exec"), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDiffAgreesWithGit(t *testing.T) {
	r := diffRepo(t)
	ctx := context.Background()
	for _, cached := range []bool{false, true} {
		got, err := direct.diffFiles(ctx, r.dir, nil, cached)
		if err != nil {
			t.Fatal(err)
		}
		compareDiff(t, r, got, cached)
	}
}

func TestDiffCases(t *testing.T) {
	r := diffRepo(t)
	ctx := context.Background()
	unstaged, err := direct.diffFiles(ctx, r.dir, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	staged, err := direct.diffFiles(ctx, r.dir, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		status            ChangeStatus
		oldPath, newPath  string
		oldMode, newMode  string
		add, del, hunks   int
		binary, typeChg   bool
		lastNoNewline     bool
		firstHeaderSuffix string
	}
	tests := []struct {
		name   string
		diffs  []FileDiff
		path   string
		want   want
		extras func(t *testing.T, fd FileDiff)
	}{
		{"function context", unstaged, "code.go", want{status: StatusModified, oldMode: "100644", newMode: "100644", add: 2, del: 1, hunks: 2, firstHeaderSuffix: " func beta() int {"}, nil},
		{"change at end without newline", unstaged, "nonl.txt", want{status: StatusModified, oldMode: "100644", newMode: "100644", add: 1, del: 1, hunks: 1, lastNoNewline: true}, func(t *testing.T, fd FileDiff) {
			var flagged []Line
			for _, l := range fd.Hunks[0].Lines {
				if l.NoNewline {
					flagged = append(flagged, l)
				}
			}
			if len(flagged) != 1 || flagged[0].Type != LineContext || flagged[0].Content != "c" {
				t.Errorf("no-newline flags on %+v", flagged)
			}
		}},
		{"newline added at end", unstaged, "addnl.txt", want{status: StatusModified, oldMode: "100644", newMode: "100644", add: 1, del: 1, hunks: 1}, func(t *testing.T, fd FileDiff) {
			ls := fd.Hunks[0].Lines
			if len(ls) != 3 || ls[1].Type != LineRemoved || !ls[1].NoNewline || ls[2].Type != LineAdded || ls[2].NoNewline || ls[2].Content != "b" {
				t.Errorf("lines %+v", ls)
			}
		}},
		{"deleted", unstaged, "deleted.txt", want{status: StatusDeleted, oldMode: "100644", del: 4, hunks: 1}, nil},
		{"empty deleted", unstaged, "empty-deleted", want{status: StatusDeleted, oldMode: "100644"}, nil},
		{"mode change only", unstaged, "mode.sh", want{status: StatusModified, oldMode: "100644", newMode: "100755"}, nil},
		{"binary", unstaged, "image.bin", want{status: StatusModified, oldMode: "100644", newMode: "100644", binary: true}, nil},
		{"file became symlink", unstaged, "link-to-file", want{status: StatusModified, oldMode: "100644", newMode: "120000", add: 1, del: 1, hunks: 2, typeChg: true, lastNoNewline: true}, nil},
		{"two hunks", unstaged, "big.txt", want{status: StatusModified, oldMode: "100644", newMode: "100644", add: 1, del: 2, hunks: 2, firstHeaderSuffix: " big 6"}, nil},
		{"space in name", unstaged, "space name.txt", want{status: StatusModified, oldMode: "100644", newMode: "100644", add: 1, del: 1, hunks: 1}, nil},
		{"unstaged part of staged file", unstaged, "staged-mod.txt", want{status: StatusModified, oldMode: "100644", newMode: "100644", add: 1, hunks: 1, firstHeaderSuffix: " s 9"}, nil},
		{"untracked", unstaged, "untracked.txt", want{status: StatusUntracked, newMode: "100644", add: 2, hunks: 1, lastNoNewline: true}, func(t *testing.T, fd FileDiff) {
			if h := fd.Hunks[0]; h.Header != "@@ -0,0 +1,2 @@" {
				t.Errorf("header %q", h.Header)
			}
		}},
		{"untracked empty", unstaged, "untracked-empty", want{status: StatusUntracked, newMode: "100644"}, nil},
		{"untracked binary", unstaged, "untracked.bin", want{status: StatusUntracked, newMode: "100644", binary: true}, nil},
		{"untracked symlink", unstaged, "untracked-link", want{status: StatusUntracked, newMode: "120000", add: 1, hunks: 1, lastNoNewline: true}, nil},
		{"untracked executable", unstaged, "untracked-exec", want{status: StatusUntracked, newMode: "100755", add: 1, hunks: 1}, nil},
		{"staged rename with edit", staged, "renamed.txt", want{status: StatusRenamed, oldPath: "rename-me.txt", oldMode: "100644", newMode: "100644", add: 1, del: 1, hunks: 1, firstHeaderSuffix: " rename 11"}, func(t *testing.T, fd FileDiff) {
			if fd.Similarity < 50 {
				t.Errorf("similarity %d", fd.Similarity)
			}
		}},
		{"staged modification", staged, "staged-mod.txt", want{status: StatusModified, oldMode: "100644", newMode: "100644", add: 1, del: 1, hunks: 1}, nil},
		{"staged new file", staged, "staged-new.txt", want{status: StatusAdded, newMode: "100644", add: 2, hunks: 1}, nil},
		{"staged empty file", staged, "staged-empty", want{status: StatusAdded, newMode: "100644"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd := findDiff(t, tt.diffs, tt.path)
			w := tt.want
			if w.oldPath == "" {
				w.oldPath = tt.path
			}
			w.newPath = tt.path
			got := want{status: fd.Status, oldPath: fd.OldPath, newPath: fd.NewPath, oldMode: fd.OldMode, newMode: fd.NewMode,
				add: fd.Additions, del: fd.Deletions, hunks: len(fd.Hunks), binary: fd.Binary, typeChg: fd.TypeChanged}
			if n := len(fd.Hunks); n > 0 {
				last := fd.Hunks[n-1].Lines
				got.lastNoNewline = last[len(last)-1].NoNewline
				_, got.firstHeaderSuffix, _ = strings.Cut(strings.TrimPrefix(fd.Hunks[0].Header, "@@ "), " @@")
			}
			if got != w {
				t.Errorf("\n got %+v\nwant %+v", got, w)
			}
			if fd.Hunks == nil {
				t.Error("nil hunks")
			}
			if tt.extras != nil {
				tt.extras(t, fd)
			}
		})
	}
	for _, fd := range unstaged {
		if fd.Path == "renamed.txt" || fd.Path == "staged-new.txt" {
			t.Errorf("staged-only change %s in the unstaged diff", fd.Path)
		}
	}
}

func TestDiffFiles(t *testing.T) {
	r := diffRepo(t)
	ctx := context.Background()
	got, err := direct.diffFiles(ctx, r.dir, []string{"code.go", "untracked.txt", "./nonl.txt", "no-such-file"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, fd := range got {
		paths = append(paths, fd.Path)
	}
	if strings.Join(paths, ",") != "code.go,nonl.txt,untracked.txt" {
		t.Errorf("paths %v", paths)
	}
	none, err := direct.diffFiles(ctx, r.dir, []string{}, false)
	if err != nil || len(none) != 0 || none == nil {
		t.Errorf("empty files: %v %v", none, err)
	}
	for _, bad := range []string{"../outside", "/etc/passwd", "", "a/../../b", ".git/config"} {
		if _, err := direct.diffFiles(ctx, r.dir, []string{bad}, false); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Diff(%q): %v, want ErrInvalidPath", bad, err)
		}
	}
	// Glob characters are literal: "*.txt" names no file.
	glob, err := direct.diffFiles(ctx, r.dir, []string{"*.txt"}, false)
	if err != nil || len(glob) != 0 {
		t.Errorf("glob pathspec: %v %v", glob, err)
	}
}

// TestDiffSpecialNames checks names git quotes in its patch output.
func TestDiffSpecialNames(t *testing.T) {
	r := newRepo(t)
	names := []string{"tab\there", `quote"d`, "back\\slash", "ünïcödé.txt", "new\nline", "a b/c d.txt"}
	for _, n := range names {
		r.write(n, "old\n")
	}
	r.commitAll("names")
	for _, n := range names {
		r.write(n, "new\n")
	}
	r.git("mv", "ünïcödé.txt", "moved ü.txt")
	got, err := direct.diffFiles(context.Background(), r.dir, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	compareDiff(t, r, got, false)
	seen := make(map[string]bool)
	for _, fd := range got {
		seen[fd.Path] = true
		if fd.Additions != 1 || fd.Deletions != 1 || len(fd.Hunks) != 1 {
			t.Errorf("%q: %+v", fd.Path, fd)
		}
	}
	for _, n := range names {
		if n != "ünïcödé.txt" && !seen[n] {
			t.Errorf("%q missing from %v", n, seen)
		}
	}
	staged, err := direct.diffFiles(context.Background(), r.dir, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	compareDiff(t, r, staged, true)
	if len(staged) != 1 || staged[0].Path != "moved ü.txt" || staged[0].OldPath != "ünïcödé.txt" || staged[0].Status != StatusRenamed {
		t.Errorf("staged rename %+v", staged)
	}
	st, err := direct.Status(context.Background(), r.dir)
	if err != nil {
		t.Fatal(err)
	}
	compareChanges(t, st.Changes, oracleChanges(t, r))
}

func TestDiffConflict(t *testing.T) {
	r := conflictRepo(t)
	r.gitErr("merge", "other")
	ctx := context.Background()
	unstaged, err := direct.diffFiles(ctx, r.dir, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	compareDiff(t, r, unstaged, false)
	fd := findDiff(t, unstaged, "c.txt")
	if !fd.Conflicted || fd.Status != StatusModified || fd.Additions == 0 {
		t.Errorf("conflicted unstaged %+v", fd)
	}
	staged, err := direct.diffFiles(ctx, r.dir, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	compareDiff(t, r, staged, true)
	fd = findDiff(t, staged, "c.txt")
	if !fd.Conflicted || len(fd.Hunks) != 0 || fd.Hunks == nil {
		t.Errorf("conflicted staged %+v", fd)
	}
}

// TestDiffIgnoresUserConfig sets configuration that would change git's
// output and checks that Diff still gives git's defaults.
func TestDiffIgnoresUserConfig(t *testing.T) {
	r := diffRepo(t)
	ctx := context.Background()
	before, err := direct.diffFiles(ctx, r.dir, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"diff.noprefix", "true"}, {"diff.mnemonicPrefix", "true"}, {"diff.algorithm", "histogram"},
		{"diff.context", "7"}, {"diff.interHunkContext", "10"}, {"color.ui", "always"},
		{"diff.renames", "false"}, {"diff.suppressBlankEmpty", "true"}, {"diff.external", "false"},
		{"core.quotePath", "false"}, {"diff.relative", "true"}, {"status.renames", "false"},
		{"status.showUntrackedFiles", "no"}, {"status.aheadBehind", "false"}, {"diff.submodule", "log"},
		{"color.diff", "always"}, {"diff.indentHeuristic", "false"}, {"core.abbrev", "12"},
	} {
		r.git("config", kv[0], kv[1])
	}
	after, err := direct.diffFiles(ctx, r.dir, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(before)
	b, _ := json.Marshal(after)
	if string(a) != string(b) {
		t.Errorf("user config changed the diff:\n%s\n%s", a, b)
	}
}

// TestDiffShape checks what the app's parser requires of a diff, which
// the bridge sends field for field (wire.GitFileDiff): both paths, the
// status and both modes of a changed file, hunks and lines never nil, and
// lines without git's prefix.
func TestDiffShape(t *testing.T) {
	r := diffRepo(t)
	got, err := direct.diffFiles(context.Background(), r.dir, []string{"code.go", "mode.sh"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("no files")
	}
	for _, f := range got {
		for k, v := range map[string]string{"path": f.Path, "old_path": f.OldPath, "new_path": f.NewPath, "status": string(f.Status), "old_mode": f.OldMode, "new_mode": f.NewMode} {
			if v == "" {
				t.Errorf("%s: no %s in %+v", f.Path, k, f)
			}
		}
		if f.Hunks == nil {
			t.Errorf("%s: hunks nil", f.Path)
		}
		for _, h := range f.Hunks {
			if h.Header == "" || h.Lines == nil {
				t.Errorf("%s: hunk %+v", f.Path, h)
			}
			for _, l := range h.Lines {
				if l.Type == "" || strings.HasPrefix(l.Content, "+") || strings.HasPrefix(l.Content, "-") {
					t.Errorf("%s: line %+v", f.Path, l)
				}
			}
		}
	}
}
