package fileops

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// op says which operations a hostile case is tried with.
type op int

const (
	opBoth op = iota
	opList
	opRead
)

func TestHostilePaths(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	base := fx.base
	cases := []struct {
		path string
		op   op
		code string
	}{
		// Lexical escapes.
		{"..", opBoth, CodeOutsideRoot},
		{"../", opBoth, CodeOutsideRoot},
		{"../outside/secret.txt", opBoth, CodeOutsideRoot},
		{"dir/../../outside/secret.txt", opBoth, CodeOutsideRoot},
		{"dir/sub/../../../outside", opBoth, CodeOutsideRoot},
		{"./../outside", opBoth, CodeOutsideRoot},
		{"nope/x/../../../outside", opBoth, CodeOutsideRoot},
		{"a.txt/../../outside/secret.txt", opBoth, CodeOutsideRoot},
		{"dirlink-in/../../outside/secret.txt", opBoth, CodeOutsideRoot},
		{"../root/a.txt", opBoth, CodeOutsideRoot},
		// Absolute paths elsewhere.
		{"/etc/passwd", opBoth, CodeOutsideRoot},
		{"/etc", opBoth, CodeOutsideRoot},
		{"/proc/self/root/etc/passwd", opBoth, CodeOutsideRoot},
		{"/..", opBoth, CodeOutsideRoot},
		{"/../etc/passwd", opBoth, CodeOutsideRoot},
		{"//etc/passwd", opBoth, CodeOutsideRoot},
		{base + "/outside/secret.txt", opBoth, CodeOutsideRoot},
		{base + "/outside", opBoth, CodeOutsideRoot},
		{base + "/root/../outside/secret.txt", opBoth, CodeOutsideRoot},
		{base + "/rootevil/secret.txt", opBoth, CodeOutsideRoot},
		{base + "/root/../rootevil/secret.txt", opBoth, CodeOutsideRoot},
		{base + "/root/dir/../../outside", opBoth, CodeOutsideRoot},
		{base, opBoth, CodeOutsideRoot},
		// Links out, absolute and relative, at any depth.
		{"abs-out", opBoth, CodeOutsideRoot},
		{"abs-out-dir", opBoth, CodeOutsideRoot},
		{"abs-out-dir/secret.txt", opBoth, CodeOutsideRoot},
		{"abs-out-dir/sub/deep.txt", opBoth, CodeOutsideRoot},
		{"rel-out", opBoth, CodeOutsideRoot},
		{"rel-out-dir", opBoth, CodeOutsideRoot},
		{"rel-out-dir/secret.txt", opBoth, CodeOutsideRoot},
		{"rel-out-dir/sub/deep.txt", opBoth, CodeOutsideRoot},
		{"dir/deep-out", opBoth, CodeOutsideRoot},
		{"link-to-link-out", opBoth, CodeOutsideRoot},
		{"chain1", opBoth, CodeOutsideRoot},
		{"chain1/secret.txt", opBoth, CodeOutsideRoot},
		{"chain2/sub", opBoth, CodeOutsideRoot},
		{"proc-root", opBoth, CodeOutsideRoot},
		{"proc-root/etc/passwd", opBoth, CodeOutsideRoot},
		{"proc-cwd", opBoth, CodeOutsideRoot},
		{"etc-link/passwd", opBoth, CodeOutsideRoot},
		{"slash-link", opBoth, CodeOutsideRoot},
		{"slash-link/etc/passwd", opBoth, CodeOutsideRoot},
		{"dotdot-link", opBoth, CodeOutsideRoot},
		{"dotdot-link/outside/secret.txt", opBoth, CodeOutsideRoot},
		{"dir/up-link", opBoth, CodeOutsideRoot},
		{"dir/up-link/outside", opBoth, CodeOutsideRoot},
		{"dir/sub/up3", opBoth, CodeOutsideRoot},
		{"dir/sub/up3/secret.txt", opBoth, CodeOutsideRoot},
		{"sneaky", opBoth, CodeOutsideRoot},
		{"nested/inner", opBoth, CodeOutsideRoot},
		{"nested/inner/secret.txt", opBoth, CodeOutsideRoot},
		{"evil-prefix", opBoth, CodeOutsideRoot},
		{"evil-prefix/secret.txt", opBoth, CodeOutsideRoot},
		{"rel-evil", opBoth, CodeOutsideRoot},
		{"tmp-link", opBoth, CodeOutsideRoot},
		{"dev-link", opBoth, CodeOutsideRoot},
		{"through-up", opBoth, CodeOutsideRoot},
		{base + "/root/rel-out", opBoth, CodeOutsideRoot},
		{base + "/rootlink/abs-out-dir/secret.txt", opBoth, CodeOutsideRoot},
		// Malformed.
		{"loop1", opBoth, CodeInvalidPath},
		{"loop2/x", opBoth, CodeInvalidPath},
		{"self-loop", opBoth, CodeInvalidPath},
		{"a\x00b", opBoth, CodeInvalidPath},
		{"\x00", opBoth, CodeInvalidPath},
		{"a.txt\x00.png", opBoth, CodeInvalidPath},
		{"../\x00", opBoth, CodeInvalidPath},
		{"\xff\xfe", opBoth, CodeInvalidPath},
		{"dir/\xc0\xaf", opBoth, CodeInvalidPath},
		{"\xed\xa0\x80", opBoth, CodeInvalidPath},
		{strings.Repeat("a", 256), opBoth, CodeInvalidPath},
		{"dir/" + strings.Repeat("é", 128), opBoth, CodeInvalidPath},
		{strings.Repeat("a/", 2049), opBoth, CodeInvalidPath},
		{"/" + strings.Repeat("x", 5000), opBoth, CodeInvalidPath},
		// Names that only look like escapes, and things that are not there.
		{"dangling", opBoth, CodeNotFound},
		{`..\..\etc\passwd`, opBoth, CodeNotFound},
		{"%2e%2e/outside/secret.txt", opBoth, CodeNotFound},
		{"..%2foutside", opBoth, CodeNotFound},
		{"~/.ssh/id_rsa", opBoth, CodeNotFound},
		{`C:\Windows\system.ini`, opBoth, CodeNotFound},
		{"．．/outside/secret.txt", opBoth, CodeNotFound},
		{"file:///etc/passwd", opBoth, CodeNotFound},
		{" /etc/passwd", opBoth, CodeNotFound},
		{"...", opBoth, CodeNotFound},
		{"dir/nope/b.txt", opBoth, CodeNotFound},
		// Wrong kinds.
		{"a.txt/x", opBoth, CodeNotDirectory},
		{"a.txt", opList, CodeNotDirectory},
		{"fifo", opList, CodeNotDirectory},
		{"dir", opRead, CodeNotFile},
		{".", opRead, CodeNotFile},
		{"/", opRead, CodeNotFile},
		{"dirlink-in", opRead, CodeNotFile},
		{"fifo", opRead, CodeNotFile},
		{"fifo-link", opRead, CodeNotFile},
		{"dev", opRead, CodeNotFile},
	}
	if len(cases) < 50 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	w := newWatcher(t, fx.outside)
	for _, tc := range cases {
		if tc.path == "dev" && !fx.hasDev {
			continue
		}
		name := tc.path
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			if tc.op != opRead {
				l, err := within(t, func() (*Listing, error) { return fx.root.List(tc.path, ListOptions{ShowHidden: true, ShowGit: true}) })
				if got := Code(err); got != tc.code {
					t.Errorf("List: code %q (err %v), want %q", got, err, tc.code)
				}
				if l != nil {
					t.Errorf("List: got a listing %+v", l)
				}
				checkMessage(t, err)
			}
			if tc.op != opList {
				f, err := within(t, func() (*File, error) { return fx.root.Read(tc.path, ReadOptions{}) })
				if got := Code(err); got != tc.code {
					t.Errorf("Read: code %q (err %v), want %q", got, err, tc.code)
				}
				if f != nil {
					noSecret(t, "Read", f.Content)
					t.Errorf("Read: got a file %+v", f)
				}
				checkMessage(t, err)
			}
			if n := w.events(t); n != 0 {
				t.Errorf("%d opens or reads outside the root", n)
			}
		})
	}
}

// within runs f and fails the test if it takes more than five seconds (a
// FIFO or device opened for reading would block).
func within[T any](t *testing.T, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(5 * time.Second):
		t.Fatal("blocked")
		panic("unreachable")
	}
}

// checkMessage checks that the client-facing message holds no path.
func checkMessage(t *testing.T, err error) {
	t.Helper()
	m := Message(err)
	if m == "" || strings.Contains(m, "/") {
		t.Errorf("Message(%v) = %q", err, m)
	}
}

func TestRel(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	abs := fx.dir
	alias := filepath.Join(fx.base, "rootlink")
	aliased, err := Open(alias)
	if err != nil {
		t.Fatal(err)
	}
	defer aliased.Close()
	tests := []struct {
		root *Root
		in   string
		want string
	}{
		{fx.root, "", "."},
		{fx.root, ".", "."},
		{fx.root, "./", "."},
		{fx.root, "/", "."},
		{fx.root, "//", "."},
		{fx.root, "dir", "dir"},
		{fx.root, "dir/", "dir"},
		{fx.root, "./dir//sub/./c.txt", "dir/sub/c.txt"},
		{fx.root, "dir/sub/..", "dir"},
		{fx.root, "dir/..", "."},
		{fx.root, abs, "."},
		{fx.root, abs + "/", "."},
		{fx.root, abs + "/dir/sub", "dir/sub"},
		{fx.root, abs + "/dir/../a.txt", "a.txt"},
		{fx.root, `a\b`, `a\b`},
		{aliased, alias + "/dir", "dir"},
		{aliased, abs + "/dir", "dir"},
		{aliased, alias, "."},
	}
	for _, tc := range tests {
		got, err := tc.root.Rel(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Rel(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestEscapeError checks that the os package's refusal to leave a root is
// recognised: the swap race depends on it.
func TestEscapeError(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	if fx.root.Dir() != fx.dir {
		t.Errorf("Dir() = %q, want %q", fx.root.Dir(), fx.dir)
	}
	if errPathEscapes == nil {
		t.Fatal("os.Root's escape error was not captured")
	}
	_, err := fx.root.root.Open("rel-out")
	if got := Code(classify(err)); got != CodeOutsideRoot {
		t.Errorf("os.Root refusal %v has code %q", err, got)
	}
}

func TestOpenMissing(t *testing.T) {
	t.Parallel()
	_, err := Open(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a missing directory: %v", err)
	}
}

// TestSwapRace swaps a directory inside the root for a link to outside
// while it is being read and listed: the reads must see the directory or
// fail, never the outside.
func TestSwapRace(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	w := newWatcher(t, fx.outside)
	swap := filepath.Join(fx.dir, "swap")
	real := filepath.Join(fx.dir, "swap-real")
	write(t, filepath.Join(real, "secret.txt"), "inside\n")
	write(t, filepath.Join(real, "sub", "deep.txt"), "inside\n")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := swap + ".tmp"
			os.Remove(tmp)
			if i%2 == 0 {
				os.Symlink("swap-real", tmp)
			} else {
				os.Symlink(filepath.Join(fx.base, "outside"), tmp)
			}
			os.Rename(tmp, swap)
		}
	})
	deadline := time.Now().Add(time.Second)
	okReads := 0
	for time.Now().Before(deadline) {
		for _, p := range []string{"swap/secret.txt", "swap/sub/deep.txt"} {
			f, err := fx.root.Read(p, ReadOptions{})
			if err == nil {
				okReads++
				noSecret(t, "Read", f.Content)
			} else if c := Code(err); c != CodeOutsideRoot && c != CodeNotFound {
				t.Errorf("Read(%q): %v", p, err)
			}
		}
		l, err := fx.root.List("swap", ListOptions{})
		if c := Code(err); err != nil && c != CodeOutsideRoot && c != CodeNotFound {
			t.Errorf("List(swap): %v", err)
		}
		if err == nil {
			for _, e := range l.Entries {
				if e.Name != "secret.txt" && e.Name != "sub" {
					t.Errorf("List(swap) shows %q", e.Name)
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	if okReads == 0 {
		t.Error("no read succeeded; the race was not exercised")
	}
	if n := w.events(t); n != 0 {
		t.Errorf("%d opens or reads outside the root", n)
	}
}
