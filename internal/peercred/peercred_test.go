package peercred

import (
	"net"
	"path/filepath"
	"testing"
)

// TestSameUser: both ends of a socket made by this process are its user's;
// a connection that is not a Unix socket is refused. (Another user's peer
// needs a second user, which the tests do not have.)
func TestSameUser(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("no connection accepted")
	}
	defer server.Close()
	for _, end := range []net.Conn{c, server} {
		if err := SameUser(end); err != nil {
			t.Errorf("%v: %v", end.LocalAddr(), err)
		}
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if SameUser(a) == nil {
		t.Error("a connection that is not a Unix socket passed")
	}
}
