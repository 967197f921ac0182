package netnstest

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

func TestLinkedNamespaces(t *testing.T) {
	a, b := New(t), New(t)
	Link(t, a, []string{"10.99.0.1/24", "fd99::1/64"}, b, []string{"10.99.0.2/24", "fd99::2/64"})
	for _, tt := range []struct{ listen, from string }{
		{"10.99.0.1:0", "10.99.0.2"},
		{"[fd99::1]:0", "fd99::2"},
	} {
		ln := a.Listen(t, "tcp", tt.listen)
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}()
		c, err := b.DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("dial %s from the other namespace: %v", ln.Addr(), err)
		}
		defer c.Close()
		s, ok := <-accepted
		if !ok {
			t.Fatal("accept failed")
		}
		defer s.Close()
		if got := netip.MustParseAddrPort(s.RemoteAddr().String()).Addr(); got.String() != tt.from {
			t.Errorf("peer %s, want %s", got, tt.from)
		}
	}
	// The namespace's addresses are not the host's.
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ad := range addrs {
		if n, ok := ad.(*net.IPNet); ok && (n.IP.String() == "10.99.0.1" || n.IP.String() == "10.99.0.2") {
			t.Errorf("the host has the test namespace's address %s", n.IP)
		}
	}
}
