package main

import (
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/bridge/wire"
	"github.com/tetherdev/tether/internal/wstest"
)

// TestDefaultListenReachesAPhone starts the daemon with the default
// --listen (auto, here on port 0) and no tailnet: it listens on every
// address, the QR code and `tether pair` name the address of the default
// route's interface, never loopback, and a phone connecting to that
// address (not to loopback) pairs.
func TestDefaultListenReachesAPhone(t *testing.T) {
	t.Parallel()
	lan, ok := routeAddr()
	if !ok {
		t.Skip("this machine has no default route: no address a phone could use")
	}
	root := t.TempDir()
	env := []string{"TETHER_DATA=" + filepath.Join(t.TempDir(), "data"), "HOME=" + root, "TETHER_ROOT=" + root}
	info, stdout, _ := startDaemon(t, env, "--listen", "auto:0")
	u, err := url.Parse(info.URL)
	if err != nil {
		t.Fatal(err)
	}
	if host, _ := netip.ParseAddr(u.Hostname()); host != lan {
		t.Fatalf("advertised %s, want the default route's address %s", info.URL, lan)
	}
	if strings.Contains(stdout.String(), "loopback address: a phone cannot reach it") {
		t.Fatalf("the banner calls a LAN URL unreachable:\n%s", stdout)
	}
	code, out, _ := runCmd(t, env, "pair")
	if code != 0 || !strings.Contains(out, "https://"+u.Host+"/#pair=tpc_") || strings.Contains(out, "127.0.0.1") {
		t.Fatalf("tether pair:\n%s", out)
	}
	// A phone on the LAN: it dials the advertised address, which is not loopback.
	_, port, _ := net.SplitHostPort(u.Host)
	_, out, _ = runCmd(t, env, "pair", "--json")
	token := out[strings.Index(out, `"token":"`)+len(`"token":"`):]
	token = token[:strings.IndexByte(token, '"')]
	c := wstest.Dial(t, wstest.PinnedDialer(info.Fingerprint), "wss://"+net.JoinHostPort(lan.String(), port)+"/ws", nil)
	c.Send(wire.TypeAuth, "auth", map[string]any{"token": token, "client_version": "1.0.0", "platform": "test"})
	var ack wire.ConnectionAck
	c.Expect(wire.TypeConnectionAck, &ack)
	if ack.ConnectionMode == "local_only" || ack.DeviceToken == "" {
		t.Fatalf("connection_ack from %s: %+v", lan, ack)
	}
}

// TestLoopbackOnlySaysPhonesCannotReachIt: with --listen on loopback, the
// banner and `tether pair` say plainly that a phone cannot open the URL.
func TestLoopbackOnlySaysPhonesCannotReachIt(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	code, out, _ := runCmd(t, d.env, "pair")
	if code != 0 || !strings.Contains(out, "loopback address: a phone cannot reach it") || !strings.Contains(out, "without --listen") {
		t.Fatalf("tether pair on loopback:\n%s", out)
	}
}
