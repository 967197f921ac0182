package fileops

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// secret is written into every file outside the root; no reply may hold it.
const secret = "TOP-SECRET-OUTSIDE"

// fixture is a root directory full of traps, beside directories that must
// never be touched.
type fixture struct {
	base    string // holds root, outside, rootevil
	dir     string // the root directory
	root    *Root
	outside []string // directories outside the root that are watched
	hasDev  bool     // a character device "dev" exists in the root
}

func write(t testing.TB, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// newFixture builds the tree:
//
//	base/outside/secret.txt, base/outside/sub/deep.txt   (outside)
//	base/rootevil/secret.txt                             (outside, shares the root's name as a prefix)
//	base/root/...                                        (the root: files, dotfiles, a FIFO, links in and out)
//	base/rootlink -> root
func newFixture(t testing.TB) *fixture {
	t.Helper()
	base := t.TempDir()
	fx := &fixture{base: base, dir: filepath.Join(base, "root")}
	out := filepath.Join(base, "outside")
	evil := filepath.Join(base, "rootevil")
	write(t, filepath.Join(out, "secret.txt"), secret+"\n")
	write(t, filepath.Join(out, "sub", "deep.txt"), secret+"\n")
	write(t, filepath.Join(evil, "secret.txt"), secret+"\n")
	fx.outside = []string{out, filepath.Join(out, "sub"), evil}

	d := fx.dir
	write(t, filepath.Join(d, "a.txt"), "alpha\nbeta\n")
	write(t, filepath.Join(d, "dir", "b.txt"), "bee\n")
	write(t, filepath.Join(d, "dir", "sub", "c.txt"), "sea\n")
	write(t, filepath.Join(d, ".env"), "KEY=1\n")
	write(t, filepath.Join(d, ".git", "config"), "[core]\n")
	write(t, filepath.Join(d, "nested", "plain.txt"), "plain\n")
	if err := unix.Mkfifo(filepath.Join(d, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := unix.Mknod(filepath.Join(d, "dev"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
	fx.hasDev = err == nil

	links := []struct{ target, name string }{
		{filepath.Join(out, "secret.txt"), "abs-out"},
		{out, "abs-out-dir"},
		{"../outside/secret.txt", "rel-out"},
		{"../outside", "rel-out-dir"},
		{"../../outside/secret.txt", "dir/deep-out"},
		{"rel-out", "link-to-link-out"},
		{"chain2", "chain1"},
		{"chain3", "chain2"},
		{"../outside", "chain3"},
		{"/proc/self/root", "proc-root"},
		{"/proc/self/cwd", "proc-cwd"},
		{"/etc", "etc-link"},
		{"/", "slash-link"},
		{"..", "dotdot-link"},
		{"../..", "dir/up-link"},
		{"../../../outside", "dir/sub/up3"},
		{"dir/../../outside", "sneaky"},
		{"../rel-out-dir", "nested/inner"},
		{evil, "evil-prefix"},
		{"../rootevil/secret.txt", "rel-evil"},
		{"/tmp", "tmp-link"},
		{"/dev/zero", "dev-link"},
		{"loop2", "loop1"},
		{"loop1", "loop2"},
		{"self-loop", "self-loop"},
		{"does-not-exist", "dangling"},
		{"dir", "dirlink-in"},
		{filepath.Join(d, "dir", "b.txt"), "abs-in"},
		{filepath.Join(base, "rootlink", "dir"), "abs-in-alias"},
		{"../a.txt", "dir/back"},
		{"fifo", "fifo-link"},
		{"dir/up-link/outside/secret.txt", "through-up"},
	}
	for _, l := range links {
		symlink(t, l.target, filepath.Join(d, l.name))
	}
	symlink(t, "root", filepath.Join(base, "rootlink"))

	r, err := Open(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	fx.root = r
	return fx
}

// watcher reports any open or read of the directories outside the root, or
// of the files in them, through inotify.
type watcher struct {
	fd int
}

func newWatcher(t testing.TB, dirs []string) *watcher {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	for _, d := range dirs {
		if _, err := unix.InotifyAddWatch(fd, d, unix.IN_OPEN|unix.IN_ACCESS); err != nil {
			t.Fatalf("inotify watch %s: %v", d, err)
		}
	}
	return &watcher{fd: fd}
}

// events returns the number of events queued since the last call.
func (w *watcher) events(t testing.TB) int {
	t.Helper()
	var buf [4096]byte
	count := 0
	for {
		n, err := unix.Read(w.fd, buf[:])
		if errors.Is(err, unix.EAGAIN) {
			return count
		}
		if err != nil {
			t.Fatalf("inotify read: %v", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			// struct inotify_event: wd, mask, cookie, len (uint32 each), name.
			nameLen := binary.NativeEndian.Uint32(buf[off+12:])
			count++
			off += unix.SizeofInotifyEvent + int(nameLen)
		}
	}
}

// noSecret fails the test if v holds the secret.
func noSecret(t testing.TB, what string, v string) {
	t.Helper()
	if strings.Contains(v, secret) {
		t.Fatalf("%s holds content from outside the root: %q", what, v)
	}
}
