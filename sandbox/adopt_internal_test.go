package sandbox

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// listenNamed listens on path and answers each connection with name.
func listenNamed(t *testing.T, path, name string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(name + "\n"))
			c.Close()
		}
	}()
}

// privateDir is a new directory of mode 0700, as a socket directory is.
func privateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// answer is the name the listener c reached answers with.
func answer(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line[:len(line)-1]
}

// The socket Adopt checks is the socket it connects to: swapped after the
// checks for another socket of the daemon's user (the agent of a sandbox
// an earlier tether spawned could write in its socket directory), by a
// rename or by a link, the connection still reaches the bridge's, where a
// dial by path reaches the other.
func TestOpenSocketConnectsToWhatItChecked(t *testing.T) {
	t.Parallel()
	for _, swap := range []string{"rename", "link"} {
		t.Run(swap, func(t *testing.T) {
			t.Parallel()
			top, elsewhere := privateDir(t), t.TempDir()
			if err := os.Mkdir(filepath.Join(top, "s1"), 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(top, "s1", "tether-s1.sock")
			listenNamed(t, path, "bridge")
			sock, err := openSocket(top, "s1")
			if err != nil {
				t.Fatal(err)
			}
			defer sock.Close()
			if err := os.Rename(path, filepath.Join(top, "s1", "moved")); err != nil {
				t.Fatal(err)
			}
			if swap == "rename" {
				listenNamed(t, path, "other")
			} else {
				other := filepath.Join(elsewhere, "other.sock")
				listenNamed(t, other, "other")
				if err := os.Symlink(other, path); err != nil {
					t.Fatal(err)
				}
			}
			byPath, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			if got := answer(t, byPath); got != "other" {
				t.Fatalf("by path: %q, want the other socket (the swap did not happen)", got)
			}
			conn, err := dialSocket(context.Background(), sock)
			if err != nil {
				t.Fatal(err)
			}
			if got := answer(t, conn); got != "bridge" {
				t.Fatalf("through the checked descriptor: %q, want the bridge", got)
			}
		})
	}
}

// What openSocket refuses: a link where the socket is, a socket directory
// that is a link or open to others; a socket in order it opens.
func TestOpenSocketRefuses(t *testing.T) {
	t.Parallel()
	top, elsewhere := privateDir(t), privateDir(t)
	listenNamed(t, filepath.Join(elsewhere, "tether-s2.sock"), "other")
	if err := os.Symlink(elsewhere, filepath.Join(top, "s2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(top, "s3"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "tether-s2.sock"), filepath.Join(top, "s3", "tether-s3.sock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(top, "s4"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(top, "s4"), 0o755); err != nil {
		t.Fatal(err)
	}
	listenNamed(t, filepath.Join(top, "s4", "tether-s4.sock"), "open")
	if err := os.Mkdir(filepath.Join(top, "s5"), 0o700); err != nil {
		t.Fatal(err)
	}
	listenNamed(t, filepath.Join(top, "s5", "tether-s5.sock"), "bridge")
	if f, err := openSocket(top, "s5"); err != nil {
		t.Fatalf("openSocket of a socket in order: %v", err)
	} else {
		f.Close()
	}
	for _, id := range []string{"s2", "s3", "s4"} {
		if f, err := openSocket(top, id); err == nil {
			f.Close()
			t.Errorf("openSocket(%s) succeeded", id)
		}
	}
}
