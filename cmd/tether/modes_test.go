package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/internal/netnstest"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/wire"
)

// nsTopology is two namespaces: the daemon's and a client's, joined by a
// veth pair with private, public-looking and IPv6 addresses on both ends.
type nsTopology struct {
	server, client *netnstest.NS
}

func newTopology(t *testing.T) nsTopology {
	t.Helper()
	server, client := netnstest.New(t), netnstest.New(t)
	netnstest.Link(t,
		server, []string{"10.77.1.1/24", "203.0.113.1/24", "fd77::1/64", "2001:db8:77::1/64"},
		client, []string{"10.77.1.2/24", "203.0.113.2/24", "fd77::2/64", "2001:db8:77::2/64"})
	return nsTopology{server, client}
}

// nsDaemon is a `tether serve` whose sockets live in a namespace.
type nsDaemon struct {
	t     *testing.T
	ns    *netnstest.NS
	env   []string
	info  runtimeInfo
	port  string
	token string // a paired device's token
}

// startNSDaemon runs `tether serve args…` inside ns, with no tailscaled
// (a socket path that does not exist), and pairs a device from the
// namespace's loopback.
func startNSDaemon(t *testing.T, ns *netnstest.NS, args ...string) *nsDaemon {
	t.Helper()
	root := t.TempDir()
	env := []string{"TETHER_DATA=" + filepath.Join(root, "data"), "HOME=" + root, "TETHER_ROOT=" + root, "PATH=" + os.Getenv("PATH")}
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	args = append([]string{"serve", "--tailscale-socket", filepath.Join(root, "no-tailscaled.sock")}, args...)
	go func() {
		if err := ns.Do(func() { done <- run(ctx, args, env, stdout, stderr) }); err != nil {
			t.Errorf("entering the namespace: %v", err)
			done <- -1
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d: %s", code, stderr)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop within 15 s")
		}
	})
	d := &nsDaemon{t: t, ns: ns, env: env}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		info, err := readRuntimeInfo(dataDirOf(env))
		if err == nil && strings.Contains(stdout.String(), "`tether pair`") {
			d.info = info
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("daemon did not start: %s", stderr)
		}
	}
	_, d.port, _ = net.SplitHostPort(d.info.Listen)
	return d
}

// pair pairs a device over the namespace's loopback (where the daemon
// listens on it) and keeps its token.
func (d *nsDaemon) pair(host string) {
	d.t.Helper()
	_, out, _ := runCmd(d.t, d.env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	c := d.dial(d.ns, host, nil)
	var ack wire.ConnectionAck
	if env := c.Auth(p.Token, nil); env.Type != wire.TypeConnectionAck {
		d.t.Fatalf("pairing over loopback: %s %s", env.Type, env.Payload)
	} else {
		wstest.Decode(d.t, env, &ack)
	}
	if ack.ConnectionMode != pairing.ModeLocalOnly {
		d.t.Fatalf("loopback connection is %s", ack.ConnectionMode)
	}
	d.token = ack.DeviceToken
	c.WS.Close()
}

// dial opens wss to host (an IP) at the daemon's port from inside ns.
func (d *nsDaemon) dial(ns *netnstest.NS, host string, header http.Header) *wstest.Client {
	d.t.Helper()
	dialer := wstest.PinnedDialer(d.info.Fingerprint)
	dialer.NetDialContext = ns.DialContext
	return wstest.Dial(d.t, dialer, "wss://"+net.JoinHostPort(host, d.port)+"/ws", header)
}

func TestConnectionModesFromOtherAddresses(t *testing.T) {
	topo := newTopology(t)
	d := startNSDaemon(t, topo.server, "--listen", "[::]:0")
	d.pair("127.0.0.1")

	tests := []struct {
		name   string
		host   string
		header http.Header
		mode   string
	}{
		{"IPv4 private", "10.77.1.1", nil, pairing.ModePrivateNetwork},
		{"IPv6 unique local", "fd77::1", nil, pairing.ModePrivateNetwork},
		{"spoofed X-Forwarded-For", "10.77.1.1", http.Header{"X-Forwarded-For": {"127.0.0.1"}, "X-Forwarded-Proto": {"https"}}, pairing.ModePrivateNetwork},
		{"IPv4 public-looking", "203.0.113.1", nil, pairing.ModeDirectPublic},
		{"IPv6 public-looking", "2001:db8:77::1", nil, pairing.ModeDirectPublic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := d.dial(topo.client, tt.host, tt.header)
			env := c.Auth(d.token, nil)
			var ack wire.ConnectionAck
			if env.Type != wire.TypeConnectionAck {
				t.Fatalf("auth: %s %s", env.Type, env.Payload)
			}
			wstest.Decode(t, env, &ack)
			if ack.ConnectionMode != tt.mode || ack.ConnectionModeDescription == "" {
				t.Fatalf("mode %s (%s), want %s", ack.ConnectionMode, ack.ConnectionModeDescription, tt.mode)
			}
			if ack.RequiresHealthVerification != (tt.mode == pairing.ModeDirectPublic) {
				t.Errorf("requires_health_verification %v for %s", ack.RequiresHealthVerification, tt.mode)
			}
		})
	}

	t.Run("direct public acknowledgment", func(t *testing.T) {
		c := d.dial(topo.client, "203.0.113.1", nil)
		c.Auth(d.token, nil)
		request := func(id string) wire.ErrorPayload {
			c.Send(wire.TypeGitStatusRequest, id, map[string]any{"session_id": "no-such-session"})
			var e wire.ErrorPayload
			c.WaitFor(wire.TypeError, &e, func(env wire.Envelope) bool { return env.ID == id })
			return e
		}
		if e := request("before"); e.Code != wire.CodeAcknowledgmentRequired {
			t.Fatalf("request before the acknowledgment: %+v", e)
		}
		c.Send(wire.TypeHealthCheck, "h1", map[string]any{"client_timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
		var hs wire.HealthStatus
		c.WaitFor(wire.TypeHealthStatus, &hs, nil)
		if hs.ConnectionMode != pairing.ModeDirectPublic || hs.Ready || !hs.RequiresAcknowledgment || !contains(hs.Warnings, "DIRECT_PUBLIC_CONNECTION") {
			t.Fatalf("health_status %+v", hs)
		}
		c.Send(wire.TypeAcknowledgeWarning, "ack", map[string]any{"warning_code": "DIRECT_PUBLIC_CONNECTION", "acknowledged": true})
		var aa wire.AcknowledgmentAccepted
		c.WaitFor(wire.TypeAcknowledgmentAccepted, &aa, nil)
		if !aa.Ready || aa.SessionTimeout == "" {
			t.Fatalf("acknowledgment_accepted %+v", aa)
		}
		if e := request("after"); e.Code == wire.CodeAcknowledgmentRequired {
			t.Fatalf("request after the acknowledgment: %+v", e)
		}
	})

	t.Run("plain ws refused", func(t *testing.T) {
		dialer := &websocket.Dialer{NetDialContext: topo.client.DialContext, HandshakeTimeout: wstest.Timeout}
		ws, resp, err := dialer.Dial("ws://"+net.JoinHostPort("10.77.1.1", d.port)+"/ws", nil)
		if err == nil {
			ws.Close()
			t.Fatal("plain ws to the TLS port connected")
		}
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain ws: %v, response %v; want the TLS server's 400", err, resp)
		}
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestAllowModesRefusesFromOtherAddresses(t *testing.T) {
	topo := newTopology(t)
	d := startNSDaemon(t, topo.server, "--listen", "0.0.0.0:0", "--allow-modes", "local_only,secure_remote")
	d.pair("127.0.0.1")
	for _, host := range []string{"10.77.1.1", "203.0.113.1"} {
		c := d.dial(topo.client, host, nil)
		var ce wire.ConnectionError
		c.Expect(wire.TypeConnectionError, &ce)
		if ce.Code != wire.CodeMisconfigured || strings.Contains(ce.Message, host) {
			t.Errorf("from %s: %+v", host, ce)
		}
		if code := c.ExpectClose(); code != websocket.ClosePolicyViolation {
			t.Errorf("from %s: close %d", host, code)
		}
	}
}

// TestTrustedProxy puts a real reverse proxy in front of a loopback daemon
// without TLS: the proxy names the client, and whether it used TLS.
func TestTrustedProxy(t *testing.T) {
	topo := newTopology(t)
	d := startNSDaemon(t, topo.server, "--listen", "127.0.0.1:0", "--tls", "off", "--trusted-proxy", "127.0.0.1/32")
	target, _ := url.Parse("http://127.0.0.1:" + d.port)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		Transport: &http.Transport{DialContext: topo.server.DialContext},
	}
	plain := httptest.NewUnstartedServer(proxy)
	plain.Listener = topo.server.Listen(t, "tcp", "10.77.1.1:0")
	plain.Start()
	t.Cleanup(plain.Close)
	secure := httptest.NewUnstartedServer(proxy)
	secure.Listener = topo.server.Listen(t, "tcp", "203.0.113.1:0")
	secure.StartTLS()
	t.Cleanup(secure.Close)

	// The device pairs from the daemon's own machine, over plain ws.
	_, out, _ := runCmd(t, d.env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	local := wstest.Dial(t, &websocket.Dialer{NetDialContext: topo.server.DialContext}, "ws://127.0.0.1:"+d.port+"/ws", nil)
	var ack wire.ConnectionAck
	wstest.Decode(t, local.Auth(p.Token, nil), &ack)
	if ack.ConnectionMode != pairing.ModeLocalOnly || ack.DeviceToken == "" {
		t.Fatalf("local ack %+v", ack)
	}
	token := ack.DeviceToken

	t.Run("plain http through the proxy", func(t *testing.T) {
		c := wstest.Dial(t, &websocket.Dialer{NetDialContext: topo.client.DialContext}, "ws://"+plain.Listener.Addr().String()+"/ws", nil)
		var ce wire.ConnectionError
		c.Expect(wire.TypeConnectionError, &ce)
		if ce.Code != wire.CodeInsecureTransport {
			t.Fatalf("connection_error %+v", ce)
		}
		c.ExpectClose()
	})
	t.Run("https through the proxy", func(t *testing.T) {
		sum := sha256.Sum256(secure.Certificate().Raw)
		dialer := wstest.PinnedDialer("sha256:" + hex.EncodeToString(sum[:]))
		dialer.NetDialContext = topo.client.DialContext
		c := wstest.Dial(t, dialer, "wss://"+secure.Listener.Addr().String()+"/ws", nil)
		env := c.Auth(token, nil)
		var ack wire.ConnectionAck
		if env.Type != wire.TypeConnectionAck {
			t.Fatalf("auth through the proxy: %s %s", env.Type, env.Payload)
		}
		wstest.Decode(t, env, &ack)
		if ack.ConnectionMode != pairing.ModeDirectPublic || !strings.Contains(ack.ConnectionModeDescription, "203.0.113.2") {
			t.Fatalf("through the proxy: %s (%s)", ack.ConnectionMode, ack.ConnectionModeDescription)
		}
	})
	t.Run("browser origin of the proxy's host", func(t *testing.T) {
		sum := sha256.Sum256(secure.Certificate().Raw)
		dialer := wstest.PinnedDialer("sha256:" + hex.EncodeToString(sum[:]))
		dialer.NetDialContext = topo.client.DialContext
		u := "wss://" + secure.Listener.Addr().String() + "/ws"
		for origin, ok := range map[string]bool{"https://" + secure.Listener.Addr().String(): true, "https://evil.example": false} {
			ws, resp, err := dialer.Dial(u, http.Header{"Origin": {origin}})
			if ok && err != nil {
				t.Errorf("origin %s refused: %v", origin, err)
			}
			if !ok && (err == nil || resp == nil || resp.StatusCode != http.StatusForbidden) {
				t.Errorf("origin %s: %v, %v; want 403", origin, err, resp)
			}
			if ws != nil {
				ws.Close()
			}
		}
	})
	t.Run("pairing page not served through the proxy", func(t *testing.T) {
		client := &http.Client{Transport: &http.Transport{DialContext: topo.client.DialContext}}
		// With the right key: the proxy alone is the reason to refuse.
		page, _ := url.Parse(d.info.PairPage)
		req, _ := http.NewRequest("GET", "http://"+plain.Listener.Addr().String()+page.RequestURI(), nil)
		req.Host = "127.0.0.1:" + d.port
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("/pair through the proxy: %d", resp.StatusCode)
		}
	})
}

// TestUntrustedLocalProxyRefused: a proxy on this machine that is not in
// --trusted-proxy would make every client look local, so a loopback
// connection carrying forwarding headers is refused.
func TestUntrustedLocalProxyRefused(t *testing.T) {
	root := t.TempDir()
	env := []string{"TETHER_DATA=" + filepath.Join(root, "data"), "HOME=" + root, "TETHER_ROOT=" + root, "TETHER_TAILSCALE_SOCKET=" + filepath.Join(root, "none.sock")}
	info, _, _ := startDaemon(t, env)
	for _, h := range []http.Header{{"X-Forwarded-For": {"203.0.113.7"}}, {"Forwarded": {"for=203.0.113.7"}}} {
		c := wstest.Dial(t, wstest.PinnedDialer(info.Fingerprint), info.URL, h)
		var ce wire.ConnectionError
		c.Expect(wire.TypeConnectionError, &ce)
		if ce.Code != wire.CodeMisconfigured || !strings.Contains(ce.Remediation, "--trusted-proxy") {
			t.Errorf("with %v: %+v", h, ce)
		}
		if code := c.ExpectClose(); code != websocket.ClosePolicyViolation {
			t.Errorf("with %v: close %d", h, code)
		}
	}
}
