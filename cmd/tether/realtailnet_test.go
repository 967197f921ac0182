package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/eventually"
	"github.com/tetherdev/tether/internal/netnstest"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/tailnet"
	"github.com/tetherdev/tether/wire"
)

// Versions of the real tailnet; scripts/install-deps builds them into the
// cache directory.
const (
	realTailscaleVersion = "v1.102.5"
	realHeadscaleVersion = "v0.29.3"
)

// realTailnetBins finds the binaries scripts/install-deps built, or skips.
func realTailnetBins(t *testing.T) (tailscaled, tailscale, headscale string) {
	t.Helper()
	cache := os.Getenv("TETHER_TAILNET_CACHE")
	if cache == "" {
		cache = "/var/cache/tether-tailnet"
	}
	tailscaled = filepath.Join(cache, "tailscale-"+realTailscaleVersion, "tailscaled")
	tailscale = filepath.Join(cache, "tailscale-"+realTailscaleVersion, "tailscale")
	headscale = filepath.Join(cache, "headscale-"+realHeadscaleVersion, "headscale")
	for _, bin := range []string{tailscaled, tailscale, headscale} {
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("skipped: %s is missing; scripts/install-deps builds the real tailnet's binaries", bin)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("skipped: the tailnet nodes need /dev/net/tun")
	}
	return tailscaled, tailscale, headscale
}

// bgProcess starts a long-running process in a namespace; it is killed
// when the test ends, and its output is shown if the test failed.
func bgProcess(t *testing.T, ns *netnstest.NS, env []string, name string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), lastLines(out.String(), 40))
		}
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// nsRun runs a command to completion in a namespace and returns its
// standard output.
func nsRun(t *testing.T, ns *netnstest.NS, timeout time.Duration, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

const headscaleConfig = `server_url: http://10.99.1.1:8080
listen_addr: 0.0.0.0:8080
metrics_listen_addr: 127.0.0.1:9090
grpc_listen_addr: 127.0.0.1:50443
grpc_allow_insecure: false
noise:
  private_key_path: %[1]s/noise_private.key
prefixes:
  v4: 100.64.0.0/10
  v6: fd7a:115c:a1e0::/48
  allocation: sequential
derp:
  server:
    enabled: true
    region_id: 999
    region_code: test
    region_name: test
    stun_listen_addr: 10.99.1.1:3478
    private_key_path: %[1]s/derp_server_private.key
    automatically_add_embedded_derp_region: true
    ipv4: 10.99.1.1
  urls: []
  paths: []
  auto_update_enabled: false
disable_check_updates: true
database:
  type: sqlite
  sqlite:
    path: %[1]s/db.sqlite
log:
  level: info
policy:
  mode: file
  path: ""
dns:
  magic_dns: true
  base_domain: tailnet.test
  override_local_dns: false
  nameservers:
    global: []
unix_socket: %[1]s/headscale.sock
unix_socket_permission: "0770"
logtail:
  enabled: false
`

// TestRealTailnet runs tether on node A of a real tailnet (Headscale and
// two tailscaled in namespaces of their own, routed through the
// control server's namespace): node B's client reaching A's tailnet
// address is secure_remote, named by WhoIs; the same client reaching A's
// plain address is not.
func TestRealTailnet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a real tailnet: not with -short")
	}
	tailscaled, tailscale, headscale := realTailnetBins(t)
	ctl, a, b := netnstest.New(t), netnstest.New(t), netnstest.New(t)
	netnstest.Link(t, ctl, []string{"10.99.1.1/24"}, a, []string{"10.99.1.2/24"})
	netnstest.Link(t, ctl, []string{"10.99.2.1/24"}, b, []string{"10.99.2.2/24"})
	a.IP(t, "route", "add", "10.99.2.0/24", "via", "10.99.1.1")
	b.IP(t, "route", "add", "10.99.1.0/24", "via", "10.99.2.1")
	nsRun(t, ctl, 10*time.Second, "sysctl", "-qw", "net.ipv4.ip_forward=1")

	dir := t.TempDir()
	hsDir := filepath.Join(dir, "headscale")
	os.MkdirAll(hsDir, 0o700)
	cfg := filepath.Join(hsDir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, headscaleConfig, hsDir), 0o600); err != nil {
		t.Fatal(err)
	}
	bgProcess(t, ctl, nil, headscale, "-c", cfg, "serve")
	healthy := &http.Client{Transport: &http.Transport{DialContext: ctl.DialContext}, Timeout: time.Second}
	waitFor(t, 30*time.Second, "headscale to answer", func() bool {
		resp, err := healthy.Get("http://10.99.1.1:8080/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	var user struct{ ID json.Number }
	json.Unmarshal(nsRun(t, ctl, 30*time.Second, headscale, "-c", cfg, "users", "create", "tether", "-o", "json"), &user)
	var key struct{ Key string }
	json.Unmarshal(nsRun(t, ctl, 30*time.Second, headscale, "-c", cfg, "preauthkeys", "create", "-u", user.ID.String(), "--reusable", "-e", "1h", "-o", "json"), &key)
	if key.Key == "" {
		t.Fatal("headscale made no pre-auth key")
	}

	// Nodes come up one after the other, so that A gets 100.64.0.1.
	sockets := map[*netnstest.NS]string{}
	for _, node := range []struct {
		ns   *netnstest.NS
		name string
	}{{a, "node-a"}, {b, "node-b"}} {
		nodeDir := filepath.Join(dir, node.name)
		os.MkdirAll(nodeDir, 0o700)
		sock := filepath.Join(nodeDir, "tailscaled.sock")
		sockets[node.ns] = sock
		bgProcess(t, node.ns, []string{"TS_DEBUG_USE_DERP_HTTP=1", "TS_DISABLE_PORTMAPPER=1"}, tailscaled,
			"--tun=tailscale0", "--state="+filepath.Join(nodeDir, "tailscaled.state"), "--statedir="+nodeDir,
			"--socket="+sock, "--no-logs-no-support")
		waitFor(t, 20*time.Second, node.name+"'s tailscaled socket", func() bool { _, err := os.Stat(sock); return err == nil })
		nsRun(t, node.ns, 60*time.Second, tailscale, "--socket="+sock, "up", "--login-server=http://10.99.1.1:8080",
			"--authkey="+key.Key, "--hostname="+node.name, "--accept-dns=false", "--timeout=50s")
	}
	st, err := tailnet.New(sockets[a]).State(context.Background())
	if err != nil || len(st.Addrs) == 0 || st.Addrs[0].String() != "100.64.0.1" {
		t.Fatalf("node A: %+v, %v", st, err)
	}

	d := startNSDaemon(t, a, "--listen", "[::]:0", "--tls", "self-signed", "--tailscale-socket", sockets[a])
	d.pair("127.0.0.1")
	connect := func(host string) wire.ConnectionAck {
		t.Helper()
		dialer := wstest.PinnedDialer(d.info.Fingerprint)
		dialer.NetDialContext = b.DialContext
		u := "wss://" + net.JoinHostPort(host, d.port) + "/ws"
		// The first packets wait for WireGuard's handshake.
		waitFor(t, 30*time.Second, "a connection to "+u, func() bool {
			ws, _, err := dialer.Dial(u, nil)
			if err == nil {
				ws.Close()
			}
			return err == nil
		})
		c := wstest.Dial(t, dialer, u, nil)
		env := c.Auth(d.token, nil)
		var ack wire.ConnectionAck
		if env.Type != wire.TypeConnectionAck {
			t.Fatalf("auth over %s: %s %s", u, env.Type, env.Payload)
		}
		wstest.Decode(t, env, &ack)
		t.Logf("%s: %s (%s)", u, ack.ConnectionMode, ack.ConnectionModeDescription)
		return ack
	}
	if ack := connect("100.64.0.1"); ack.ConnectionMode != pairing.ModeSecureRemote || !strings.Contains(ack.ConnectionModeDescription, "node-b") {
		t.Errorf("node B over the tailnet: %s (%s)", ack.ConnectionMode, ack.ConnectionModeDescription)
	}
	if ack := connect("10.99.1.2"); ack.ConnectionMode != pairing.ModePrivateNetwork {
		t.Errorf("node B from its plain address: %s (%s)", ack.ConnectionMode, ack.ConnectionModeDescription)
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	// Checks run programs (tailscale, a container's systemctl): ten a
	// second would slow what they wait for.
	if !eventually.Within(limit, 100*time.Millisecond, ok) {
		t.Fatalf("waited %v for %s", limit, what)
	}
}
