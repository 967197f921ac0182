package gitops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// direct runs git on this machine: the tests' repositories are their own.
var direct Git

// TestMain isolates every git process, the tests' and the package's, from
// the machine's git configuration and identity.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "gitops-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") || name == "EMAIL" {
			os.Unsetenv(name)
		}
	}
	os.Setenv("HOME", home)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Setenv("LC_ALL", "C")
	code := m.Run()
	os.RemoveAll(home)
	removeBenchRepo()
	os.Exit(code)
}

// testRepo is a real repository in a temporary directory.
type testRepo struct {
	t   testing.TB
	dir string
}

// newRepo makes an empty repository on branch main with a local identity.
func newRepo(t testing.TB) *testRepo {
	t.Helper()
	r := &testRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.git("config", "user.name", "Test User")
	r.git("config", "user.email", "test@example.com")
	r.git("config", "core.autocrlf", "false")
	return r
}

// git runs git in the repository and fails the test if it fails.
func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	out, err := r.gitErr(args...)
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// gitErr runs git in the repository and returns its combined output.
func (r *testRepo) gitErr(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// gitOut runs git and returns only its standard output, accepting exit
// code 1 (git diff --no-index reports differences that way).
func (r *testRepo) gitOut(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && exitCode(err) != 1 {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func (r *testRepo) path(name string) string { return filepath.Join(r.dir, filepath.FromSlash(name)) }

func (r *testRepo) write(name, content string) {
	r.t.Helper()
	p := r.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *testRepo) remove(name string) {
	r.t.Helper()
	if err := os.Remove(r.path(name)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *testRepo) symlink(target, name string) {
	r.t.Helper()
	if err := os.Symlink(target, r.path(name)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *testRepo) commitAll(msg string) {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
}

// lines returns n numbered lines, each ending in a newline.
func lines(prefix string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s %d\n", prefix, i)
	}
	return b.String()
}

// snapshot captures everything Commit promises to leave alone on error:
// index entries and flags, refs, HEAD, and the working tree's files.
func (r *testRepo) snapshot() string {
	r.t.Helper()
	var b strings.Builder
	b.WriteString(r.git("ls-files", "-s", "--debug"))
	b.WriteString(r.git("ls-files", "-t", "-v"))
	b.WriteString(r.git("status", "--porcelain=v2", "-uall", "--branch"))
	b.WriteString(r.git("for-each-ref"))
	headOut, _ := r.gitErr("rev-parse", "HEAD")
	b.WriteString(headOut)
	_ = filepath.WalkDir(r.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.dir, p)
		if d.IsDir() && rel == ".git" {
			return filepath.SkipDir
		}
		info, _ := os.Lstat(p)
		fmt.Fprintf(&b, "%s %v", rel, info.Mode())
		if info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteString("\n")
		return nil
	})
	return b.String()
}

// oracleChanges computes the expected changes from git's porcelain v1
// output and its plain numstat, independently of the package's parsers.
func oracleChanges(t testing.TB, r *testRepo) []Change {
	t.Helper()
	wt := oracleNumstat(t, r.gitOut("diff", "--numstat", "-M", "-2"))
	staged := oracleNumstat(t, r.gitOut("diff", "--numstat", "-M", "--cached"))
	var out []Change
	recs := strings.Split(r.gitOut("status", "--porcelain=v1", "-z", "-uall"), "\x00")
	kinds := map[byte]Change{
		'M': {Status: StatusModified}, 'T': {Status: StatusModified, TypeChanged: true},
		'A': {Status: StatusAdded}, 'D': {Status: StatusDeleted}, 'R': {Status: StatusRenamed},
	}
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if len(rec) < 4 {
			continue
		}
		x, y, path := rec[0], rec[1], rec[3:]
		var orig string
		if x == 'R' || y == 'R' {
			i++
			orig = recs[i]
		}
		switch {
		case x == '?':
			n := oracleNumstat(t, r.gitOut("diff", "--no-index", "--numstat", "/dev/null", path))
			c := Change{Path: path, Status: StatusUntracked}
			for _, v := range n {
				c.Additions, c.Deletions, c.Binary = v.additions, v.deletions, v.binary
			}
			out = append(out, c)
			continue
		case x == 'U' || y == 'U' || (x == 'A' && y == 'A') || (x == 'D' && y == 'D'):
			n := wt[path]
			out = append(out, Change{Path: path, Status: StatusModified, Conflicted: true,
				Additions: n.additions, Deletions: n.deletions, Binary: n.binary})
			continue
		}
		for side, code := range []byte{x, y} {
			if code == ' ' {
				continue
			}
			c := kinds[code]
			c.Path, c.Staged = path, side == 0
			if code == 'R' {
				c.OldPath = orig
			}
			n := wt[path]
			if c.Staged {
				n = staged[path]
			}
			c.Additions, c.Deletions, c.Binary = n.additions, n.deletions, n.binary
			out = append(out, c)
		}
	}
	sortChanges(out)
	return out
}

// oracleNumstat parses plain (not -z) numstat output; renames appear as
// "old => new" and are keyed by the new name.
func oracleNumstat(t testing.TB, out string) map[string]numstat {
	t.Helper()
	m := make(map[string]numstat)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("numstat line %q", line)
		}
		var n numstat
		if f[0] == "-" {
			n.binary = true
		} else {
			n.additions, _ = strconv.Atoi(f[0])
			n.deletions, _ = strconv.Atoi(f[1])
		}
		path := f[2]
		if strings.Contains(path, " => ") {
			path = renameTarget(path)
		}
		path = oracleUnquote(t, path)
		m[path] = n
	}
	return m
}

// renameTarget expands numstat's "dir/{a => b}/f" or "a => b" to the new
// path.
func renameTarget(s string) string {
	if open := strings.Index(s, "{"); open >= 0 {
		closing := strings.Index(s, "}")
		inner := s[open+1 : closing]
		_, to, _ := strings.Cut(inner, " => ")
		return strings.ReplaceAll(s[:open]+to+s[closing+1:], "//", "/")
	}
	_, to, _ := strings.Cut(s, " => ")
	return to
}

func sortChanges(cs []Change) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Path != cs[j].Path {
			return cs[i].Path < cs[j].Path
		}
		return cs[i].Staged && !cs[j].Staged
	})
}

// compareChanges fails the test unless got and want hold the same changes.
func compareChanges(t testing.TB, got, want []Change) {
	t.Helper()
	g := append([]Change(nil), got...)
	sortChanges(g)
	if len(g) != len(want) {
		t.Fatalf("changes:\n got %+v\nwant %+v", g, want)
	}
	for i := range g {
		if g[i] != want[i] {
			t.Errorf("change %d:\n got %+v\nwant %+v", i, g[i], want[i])
		}
	}
}

// oracleHunks splits real `git diff` output into each file's hunk text
// (header line through its last line, "\ No newline" markers included),
// keyed by the file's new path. A path with two sections (a type change)
// gets both sections' hunks in order.
func oracleHunks(t testing.TB, out string) map[string][]string {
	t.Helper()
	res := make(map[string][]string)
	var cur string
	var hunk *strings.Builder
	flush := func() {
		if hunk != nil {
			res[cur] = append(res[cur], hunk.String())
			hunk = nil
		}
	}
	inHunk := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "diff --git ") || strings.HasPrefix(line, "* Unmerged path "):
			flush()
			inHunk = false
			if strings.HasPrefix(line, "diff --git ") {
				_, b, ok := parseGitHeaderNames(strings.TrimPrefix(line, "diff --git "))
				cur = b
				if !ok {
					cur = ""
				}
				if _, present := res[cur]; !present && ok {
					res[cur] = []string{}
				}
			}
		case !inHunk && strings.HasPrefix(line, "rename to "):
			cur = oracleUnquote(t, strings.TrimPrefix(line, "rename to "))
			res[cur] = []string{}
		case !inHunk && strings.HasPrefix(line, "+++ ") && line != "+++ /dev/null":
			name := oracleUnquote(t, strings.TrimSuffix(strings.TrimPrefix(line, "+++ "), "\t"))
			cur = strings.TrimPrefix(name, "b/")
			if _, present := res[cur]; !present {
				res[cur] = []string{}
			}
		case strings.HasPrefix(line, "@@ "):
			flush()
			inHunk = true
			hunk = &strings.Builder{}
			hunk.WriteString(line + "\n")
		case inHunk && line != "":
			hunk.WriteString(line + "\n")
		case inHunk && line == "":
			// Only the split's last element; git writes " " for blank lines.
		}
	}
	flush()
	return res
}

// oracleUnquote undoes git's C-style quoting with Go's own unquoting,
// which agrees with it for the escapes git uses.
func oracleUnquote(t testing.TB, s string) string {
	t.Helper()
	if !strings.HasPrefix(s, `"`) {
		return s
	}
	u, err := strconv.Unquote(s)
	if err != nil {
		t.Fatalf("unquote %q: %v", s, err)
	}
	return u
}

// renderHunk writes a Hunk back in git's text form.
func renderHunk(h Hunk) string {
	var b strings.Builder
	b.WriteString(h.Header + "\n")
	for _, l := range h.Lines {
		switch l.Type {
		case LineContext:
			b.WriteString(" ")
		case LineAdded:
			b.WriteString("+")
		case LineRemoved:
			b.WriteString("-")
		}
		b.WriteString(l.Content + "\n")
		if l.NoNewline {
			b.WriteString("\\ No newline at end of file\n")
		}
	}
	return b.String()
}

// checkLineNumbers verifies a hunk's line numbers and counts against its
// header.
func checkLineNumbers(t testing.TB, path string, h Hunk) {
	t.Helper()
	oldNo, newNo, oldN, newN := h.OldStart, h.NewStart, 0, 0
	for _, l := range h.Lines {
		switch l.Type {
		case LineContext:
			if l.OldLineNumber != oldNo || l.NewLineNumber != newNo {
				t.Errorf("%s %s: context line %+v, want old %d new %d", path, h.Header, l, oldNo, newNo)
			}
			oldNo, newNo, oldN, newN = oldNo+1, newNo+1, oldN+1, newN+1
		case LineRemoved:
			if l.OldLineNumber != oldNo || l.NewLineNumber != 0 {
				t.Errorf("%s %s: removed line %+v, want old %d", path, h.Header, l, oldNo)
			}
			oldNo, oldN = oldNo+1, oldN+1
		case LineAdded:
			if l.NewLineNumber != newNo || l.OldLineNumber != 0 {
				t.Errorf("%s %s: added line %+v, want new %d", path, h.Header, l, newNo)
			}
			newNo, newN = newNo+1, newN+1
		default:
			t.Errorf("%s: line type %q", path, l.Type)
		}
	}
	if oldN != h.OldLines || newN != h.NewLines {
		t.Errorf("%s %s: %d old and %d new lines", path, h.Header, oldN, newN)
	}
}

// compareDiff checks Diff's result against the git CLI: the same files,
// the same hunks line for line, the numstat counts, and sound line numbers.
// Untracked files are compared with `git diff --no-index /dev/null FILE`.
func compareDiff(t testing.TB, r *testRepo, got []FileDiff, cached bool) {
	t.Helper()
	args := []string{"diff", "--cached"}
	numArgs := []string{"diff", "--numstat", "-M", "--cached"}
	if !cached {
		args = []string{"diff", "-2"}
		numArgs = []string{"diff", "--numstat", "-M", "-2"}
	}
	want := oracleHunks(t, r.gitOut(args...))
	counts := oracleNumstat(t, r.gitOut(numArgs...))
	if !cached {
		for _, p := range strings.Split(r.gitOut("ls-files", "-z", "--others", "--exclude-standard"), "\x00") {
			if p == "" {
				continue
			}
			for k, v := range oracleHunks(t, r.gitOut("diff", "--no-index", "/dev/null", p)) {
				want[k] = v
			}
			for k, v := range oracleNumstat(t, r.gitOut("diff", "--no-index", "--numstat", "/dev/null", p)) {
				counts[k] = v
			}
		}
	}
	seen := make(map[string]bool)
	for _, fd := range got {
		if seen[fd.Path] {
			t.Errorf("%s listed twice", fd.Path)
		}
		seen[fd.Path] = true
		wantHunks, ok := want[fd.Path]
		if !ok && !fd.Conflicted {
			t.Errorf("%s: not in git's diff", fd.Path)
			continue
		}
		var gotHunks []string
		for _, h := range fd.Hunks {
			gotHunks = append(gotHunks, renderHunk(h))
			checkLineNumbers(t, fd.Path, h)
		}
		if strings.Join(gotHunks, "") != strings.Join(wantHunks, "") {
			t.Errorf("%s hunks:\n got %q\nwant %q", fd.Path, gotHunks, wantHunks)
		}
		if n, ok := counts[fd.Path]; ok {
			if fd.Additions != n.additions || fd.Deletions != n.deletions || fd.Binary != n.binary {
				t.Errorf("%s counts: got +%d -%d binary %v, want %+v", fd.Path, fd.Additions, fd.Deletions, fd.Binary, n)
			}
		} else if !fd.Conflicted {
			t.Errorf("%s: no numstat from git", fd.Path)
		}
		if !validStatus(fd.Status) {
			t.Errorf("%s: status %q", fd.Path, fd.Status)
		}
	}
	for p := range want {
		if !seen[p] {
			t.Errorf("%s: in git's diff, missing from Diff", p)
		}
	}
}

func validStatus(s ChangeStatus) bool {
	switch s {
	case StatusModified, StatusAdded, StatusDeleted, StatusUntracked, StatusRenamed:
		return true
	}
	return false
}

// findDiff returns the FileDiff for path.
func findDiff(t testing.TB, diffs []FileDiff, path string) FileDiff {
	t.Helper()
	for _, fd := range diffs {
		if fd.Path == path {
			return fd
		}
	}
	t.Fatalf("no diff for %s in %+v", path, diffs)
	return FileDiff{}
}

// diffFiles is Diff's files, for tests that compare them with git's.
func (g Git) diffFiles(ctx context.Context, dir string, files []string, cached bool) ([]FileDiff, error) {
	res, err := g.Diff(ctx, dir, files, cached)
	if err != nil {
		return nil, err
	}
	if res.Truncated {
		return res.Files, fmt.Errorf("diff of %s truncated", dir)
	}
	return res.Files, nil
}
