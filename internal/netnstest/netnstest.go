// Package netnstest gives tests network namespaces of their own, wired by
// veth pairs, so that real sockets can connect from addresses other than
// loopback (private, public-looking) without touching the host's network.
// It needs root and iproute2; without them a test is skipped with the
// reason.
package netnstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// NS is a network namespace the test created; it is deleted when the test
// ends.
type NS struct {
	Name string
	fd   int
}

// Available reports why namespaces cannot be made here, or "" when they
// can.
func Available() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "network namespaces need the ip command (iproute2)"
	}
	return ""
}

// New creates a namespace with its loopback up, or skips the test when
// namespaces cannot be made here.
func New(t testing.TB) *NS {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip("skipped: " + why)
	}
	name := "tt-" + randomHex(4)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("skipped: cannot create a network namespace here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("opening namespace %s: %v", name, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	n := &NS{Name: name, fd: fd}
	n.IP(t, "link", "set", "lo", "up")
	return n
}

// IP runs `ip -n NAME args…`, failing the test on error.
func (n *NS) IP(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", n.Name}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", n.Name, strings.Join(args, " "), err, out)
	}
}

// Link joins a and b with a veth pair and gives each end its addresses
// (CIDR notation; IPv6 addresses skip duplicate address detection).
func Link(t testing.TB, a *NS, aAddrs []string, b *NS, bAddrs []string) {
	t.Helper()
	ifA, ifB := "v"+randomHex(4), "v"+randomHex(4)
	if out, err := exec.Command("ip", "link", "add", ifA, "netns", a.Name, "type", "veth", "peer", "name", ifB, "netns", b.Name).CombinedOutput(); err != nil {
		t.Fatalf("creating a veth pair: %v: %s", err, out)
	}
	for _, end := range []struct {
		ns    *NS
		iface string
		addrs []string
	}{{a, ifA, aAddrs}, {b, ifB, bAddrs}} {
		for _, addr := range end.addrs {
			args := []string{"addr", "add", addr, "dev", end.iface}
			if strings.Contains(addr, ":") {
				args = append(args, "nodad")
			}
			end.ns.IP(t, args...)
		}
		end.ns.IP(t, "link", "set", end.iface, "up")
	}
}

// Do runs f on an OS thread that has entered the namespace, so the sockets
// f creates belong to it. The thread is never returned to the scheduler:
// it ends with f, and no other goroutine ever runs in the namespace.
// Goroutines f starts run outside it, but sockets keep their namespace.
func (n *NS) Do(f func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netnstest: entering %s: %w", n.Name, err)
			return
		}
		f()
		errc <- nil
	}()
	return <-errc
}

// DialContext connects from inside the namespace; it fits
// websocket.Dialer.NetDialContext and http.Transport.DialContext.
func (n *NS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	if nerr := n.Do(func() { c, err = (&net.Dialer{}).DialContext(ctx, network, addr) }); nerr != nil {
		return nil, nerr
	}
	return c, err
}

// Listen listens inside the namespace.
func (n *NS) Listen(t testing.TB, network, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	if nerr := n.Do(func() { ln, err = net.Listen(network, addr) }); nerr != nil {
		t.Fatal(nerr)
	}
	if err != nil {
		t.Fatalf("listening on %s in %s: %v", addr, n.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
