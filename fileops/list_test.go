package fileops

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWatcherSees checks that the watcher used to prove that nothing
// outside the root is read does see reads.
func TestWatcherSees(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	w := newWatcher(t, fx.outside)
	if _, err := os.ReadFile(filepath.Join(fx.outside[0], "secret.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(fx.outside[2]); err != nil {
		t.Fatal(err)
	}
	if n := w.events(t); n < 3 {
		t.Fatalf("watcher saw %d events, want at least 3", n)
	}
}

func TestListRoot(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	w := newWatcher(t, fx.outside)
	l, err := fx.root.List(".", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := w.events(t); n != 0 {
		t.Errorf("%d opens or reads outside the root", n)
	}
	if l.Path != "." || l.Parent != "" || l.Offset != 0 || l.Limit != DefaultListLimit || l.HasMore || l.Total != len(l.Entries) {
		t.Errorf("listing header %+v", l)
	}
	byName := map[string]Entry{}
	var names []string
	for _, e := range l.Entries {
		byName[e.Name] = e
		names = append(names, e.Name)
		if e.Path != e.Name {
			t.Errorf("%s: path %q", e.Name, e.Path)
		}
	}
	wantNames := []string{
		// directories, links to directories inside included
		"dir", "dirlink-in", "nested",
		// files and everything else
		"a.txt", "abs-in", "abs-in-alias", "abs-out", "abs-out-dir", "chain1", "chain2", "chain3",
		"dangling", "dev", "dev-link", "dotdot-link", "etc-link", "evil-prefix",
		"fifo", "fifo-link", "link-to-link-out", "loop1", "loop2", "proc-cwd",
		"proc-root", "rel-evil", "rel-out", "rel-out-dir", "self-loop",
		"slash-link", "sneaky", "through-up", "tmp-link",
	}
	if !fx.hasDev {
		wantNames = slices.DeleteFunc(wantNames, func(n string) bool { return n == "dev" })
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("names\n got %q\nwant %q", names, wantNames)
	}

	aInfo, err := os.Stat(filepath.Join(fx.dir, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	bInfo, err := os.Stat(filepath.Join(fx.dir, "dir", "b.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		typ     string
		size    int64
		symlink bool
		hasTime bool
	}{
		{"a.txt", TypeFile, aInfo.Size(), false, true},
		{"dir", TypeDirectory, 0, false, true},
		{"dirlink-in", TypeDirectory, 0, true, true},
		// The alias is a link outside the root: refused, though it leads back in.
		{"abs-in-alias", TypeFile, 0, true, false},
		{"abs-in", TypeFile, bInfo.Size(), true, true},
		{"fifo", TypeFile, 0, false, true},
		{"fifo-link", TypeFile, 0, true, true},
		{"abs-out", TypeFile, 0, true, false},
		{"abs-out-dir", TypeFile, 0, true, false},
		{"rel-out-dir", TypeFile, 0, true, false},
		{"proc-root", TypeFile, 0, true, false},
		{"dangling", TypeFile, 0, true, false},
		{"loop1", TypeFile, 0, true, false},
		{"dotdot-link", TypeFile, 0, true, false},
	}
	for _, tc := range tests {
		e := byName[tc.name]
		if e.Type != tc.typ || e.Size != tc.size || e.Symlink != tc.symlink || e.Modified.IsZero() == tc.hasTime {
			t.Errorf("%s: got %+v, want type %s size %d symlink %v time %v", tc.name, e, tc.typ, tc.size, tc.symlink, tc.hasTime)
		}
	}
	if got, want := byName["a.txt"].Modified, aInfo.ModTime().Truncate(time.Second).UTC(); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("a.txt modified %v, want %v", got, want)
	}
}

// TestListShape checks what a listing's page holds, which the bridge sends
// field for field (wire.FileListing): the directory, its parent, the
// total, and each entry's root-relative path, type, size and modification
// time (absent only for links without a target inside the root).
func TestListShape(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	l, err := fx.root.List("dir", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != "dir" || l.Parent != "." || l.Total != 5 {
		t.Fatalf("header of %+v", l)
	}
	for _, e := range l.Entries {
		if e.Path != "dir/"+e.Name {
			t.Errorf("entry %+v: path", e)
		}
		if e.Type != TypeFile && e.Type != TypeDirectory {
			t.Errorf("entry %+v: type", e)
		}
		if e.Modified.IsZero() && e.Name != "deep-out" && e.Name != "up-link" {
			t.Errorf("entry %+v: no modified", e)
		}
	}
	r, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l, err = r.List("", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != "." || l.Parent != "" || l.Entries == nil || len(l.Entries) != 0 || l.Total != 0 || l.Limit != 1000 || l.HasMore {
		t.Errorf("empty listing %+v", l)
	}
}

func TestListHidden(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	tests := []struct {
		opts     ListOptions
		env, git bool
	}{
		{ListOptions{}, false, false},
		{ListOptions{ShowHidden: true}, true, false},
		{ListOptions{ShowGit: true}, false, true},
		{ListOptions{ShowHidden: true, ShowGit: true}, true, true},
	}
	for _, tc := range tests {
		l, err := fx.root.List("/", tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var env, git bool
		for _, e := range l.Entries {
			env = env || e.Name == ".env"
			git = git || e.Name == ".git"
		}
		if env != tc.env || git != tc.git {
			t.Errorf("%+v: .env %v .git %v", tc.opts, env, git)
		}
	}
	l, err := fx.root.List(".git", ListOptions{})
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Path != ".git/config" {
		t.Errorf("List(.git) = %+v, %v", l, err)
	}
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 20 {
		write(t, filepath.Join(dir, fmt.Sprintf("f%02d", i)), "x")
	}
	for i := range 5 {
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("z%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bad\xffname"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tests := []struct {
		offset, limit int
		first, last   string
		n, wantLimit  int
		hasMore       bool
	}{
		{0, 0, "z0", "f19", 25, DefaultListLimit, false},
		{0, 10, "z0", "f04", 10, 10, true},
		{10, 10, "f05", "f14", 10, 10, true},
		{20, 10, "f15", "f19", 5, 10, false},
		{3, 4, "z3", "f01", 4, 4, true},
		{25, 10, "", "", 0, 10, false},
		{1000, 0, "", "", 0, DefaultListLimit, false},
		{24, MaxListLimit * 10, "f19", "f19", 1, MaxListLimit, false},
	}
	for _, tc := range tests {
		l, err := r.List(".", ListOptions{Offset: tc.offset, Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		if l.Total != 25 || len(l.Entries) != tc.n || l.HasMore != tc.hasMore || l.Limit != tc.wantLimit || l.Offset != tc.offset {
			t.Errorf("offset %d limit %d: %d entries, total %d, limit %d, has_more %v", tc.offset, tc.limit, len(l.Entries), l.Total, l.Limit, l.HasMore)
			continue
		}
		if tc.n > 0 && (l.Entries[0].Name != tc.first || l.Entries[tc.n-1].Name != tc.last) {
			t.Errorf("offset %d limit %d: %s … %s", tc.offset, tc.limit, l.Entries[0].Name, l.Entries[tc.n-1].Name)
		}
	}
	for _, o := range []ListOptions{{Offset: -1}, {Limit: -1}} {
		if _, err := r.List(".", o); Code(err) != CodeInvalidRange {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestListRoundTrip walks the tree the way the ReCursor app does: "."
// first, then each entry's path as received, then "/" and parents rebuilt
// without their leading "/"; every path it is given back must work.
func TestListRoundTrip(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	w := newWatcher(t, fx.outside)
	seen := map[string]bool{}
	queue := []string{"."}
	dirs := 0
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		l, err := fx.root.List(p, ListOptions{ShowHidden: true, ShowGit: true})
		if err != nil {
			t.Fatalf("List(%q): %v", p, err)
		}
		dirs++
		switch l.Parent {
		case "":
		case ".":
			if up, err := fx.root.List("/", ListOptions{}); err != nil || up.Path != "." {
				t.Errorf("List(/) = %+v, %v", up, err)
			}
		default:
			if up, err := fx.root.List(l.Parent, ListOptions{}); err != nil || up.Path != l.Parent {
				t.Errorf("List(parent %q) = %+v, %v", l.Parent, up, err)
			}
		}
		for _, e := range l.Entries {
			switch {
			case e.Type == TypeDirectory:
				if len(queue) < 200 {
					queue = append(queue, e.Path)
				}
			case e.Symlink && e.Modified.IsZero():
				if _, err := fx.root.Read(e.Path, ReadOptions{}); err == nil {
					t.Errorf("Read(%q) of a link without target succeeded", e.Path)
				}
			case e.Name == "fifo" || e.Name == "fifo-link" || e.Name == "dev":
			default:
				f, err := fx.root.Read(e.Path, ReadOptions{})
				if err != nil {
					t.Errorf("Read(%q): %v", e.Path, err)
					continue
				}
				noSecret(t, e.Path, f.Content)
				if f.Size != e.Size {
					t.Errorf("Read(%q) size %d, listed %d", e.Path, f.Size, e.Size)
				}
			}
		}
	}
	if dirs < 7 {
		t.Errorf("walked only %d directories", dirs)
	}
	if _, err := fx.root.List(fx.dir+"/dir/sub", ListOptions{}); err != nil {
		t.Errorf("absolute path as in the spec's example: %v", err)
	}
	if n := w.events(t); n != 0 {
		t.Errorf("%d opens or reads outside the root", n)
	}
}

// TestListLarge checks the order of a listing of hundreds of directories,
// files and links to files.
func TestListLarge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 523
	var want []string
	for i := range n {
		name := fmt.Sprintf("n%04d", i)
		switch i % 3 {
		case 0:
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
		case 1:
			write(t, filepath.Join(dir, name), "x")
		default:
			symlink(t, fmt.Sprintf("n%04d", i-1), filepath.Join(dir, name))
		}
	}
	// Directories, then files and links to files, each by name.
	for i := 0; i < n; i += 3 {
		want = append(want, fmt.Sprintf("n%04d", i))
	}
	for i := range n {
		if i%3 != 0 {
			want = append(want, fmt.Sprintf("n%04d", i))
		}
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l, err := r.List(".", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range l.Entries {
		got = append(got, e.Name)
		var i int
		fmt.Sscanf(e.Name, "n%d", &i)
		if e.Symlink != (i%3 == 2) || (e.Type == TypeDirectory) != (i%3 == 0) || (e.Type == TypeFile && e.Size != 1) {
			t.Errorf("entry %+v", e)
		}
	}
	if l.Total != n || !slices.Equal(got, want) {
		t.Fatalf("total %d\n got %q\nwant %q", l.Total, got, want)
	}
}

// TestListLargeBelowRoot lists a directory of hundreds of names below
// the root (their paths share one string), with files, directories and
// links of each kind, against what the kernel says of each name.
func TestListLargeBelowRoot(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "sub", "big")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 19, 0, 0, 0, time.UTC)
	for i := range 775 {
		p := filepath.Join(dir, fmt.Sprintf("n%04d", i))
		var err error
		switch i % 7 {
		case 0:
			err = os.Mkdir(p, 0o755)
		case 1:
			err = os.Symlink(fmt.Sprintf("n%04d", i-1), p) // to a directory
		case 2:
			err = os.Symlink(fmt.Sprintf("n%04d", i+1), p) // to a file
		case 3:
			err = os.Symlink("nowhere", p)
		default:
			err = os.WriteFile(p, make([]byte, i), 0o644)
		}
		if err == nil && (i%7 == 0 || i%7 > 3) { // not through a link
			err = os.Chtimes(p, at.Add(time.Duration(i)*time.Second), at.Add(time.Duration(i)*time.Second))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l, err := r.List("sub/big", ListOptions{Limit: MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 775 || len(l.Entries) != l.Total || l.Parent != "sub" {
		t.Fatalf("total %d, %d entries, parent %q", l.Total, len(l.Entries), l.Parent)
	}
	dirs := 0
	for k, e := range l.Entries {
		if e.Path != "sub/big/"+e.Name {
			t.Errorf("%s: path %q", e.Name, e.Path)
		}
		if e.Type == TypeDirectory {
			if dirs != k {
				t.Errorf("%s: a directory after a file", e.Name)
			}
			dirs++
		}
		lfi, err := os.Lstat(filepath.Join(dir, e.Name))
		if err != nil {
			t.Fatal(err)
		}
		want := Entry{Name: e.Name, Path: e.Path, Type: TypeFile, Symlink: lfi.Mode()&os.ModeSymlink != 0}
		if fi, err := os.Stat(filepath.Join(dir, e.Name)); err == nil {
			want.Modified = fi.ModTime().Truncate(time.Second).UTC()
			if fi.IsDir() {
				want.Type = TypeDirectory
			} else {
				want.Size = fi.Size()
			}
		}
		if e != want {
			t.Errorf("entry\n got %+v\nwant %+v", e, want)
		}
	}
	if dirs != 2*((775+6)/7) {
		t.Errorf("%d directories", dirs)
	}
}
