package sandbox_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
)

// loopbackService listens on the host's loopback, as a database or a dev
// server would, answers name and counts its requests.
func loopbackService(t *testing.T, name string) (addr string, hits *atomic.Int32) {
	t.Helper()
	hits = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(name + "-answered"))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), hits
}

// TestSandboxEgressOnlyToAllowList: a sandbox allowed one service on the
// host's loopback reaches it through its proxy, and nothing else: not a
// second service on the same loopback through the proxy (403), not the
// allowed one around the proxy (no route).
func TestSandboxEgressOnlyToAllowList(t *testing.T) {
	t.Parallel()
	needSeccomp(t)
	allowed, allowedHits := loopbackService(t, "allowed")
	other, otherHits := loopbackService(t, "other")
	spec := newFakeHome(t).spec(t, t.TempDir())
	spec.Egress = []string{allowed}
	sb := spawn(t, spec)
	if !sb.Layers.Network || len(sb.Layers.Egress) != 1 || sb.Layers.Egress[0] != allowed {
		t.Fatalf("layers %+v, want egress only to %s", sb.Layers, allowed)
	}
	out := runApproved(t, sb, "echo proxy=$HTTPS_PROXY; curl -s --max-time 3 http://"+allowed+"/; echo; curl -s --max-time 3 http://"+other+"/; echo; curl -s --noproxy '*' --max-time 3 http://"+allowed+"/; echo rc=$?")
	if !strings.Contains(out, "proxy=http://"+sandbox.ProxyAddr) || !strings.Contains(out, "allowed-answered") ||
		!strings.Contains(out, "may not reach "+other) || strings.Contains(out, "other-answered") || !strings.Contains(out, "rc=7") {
		t.Fatalf("output %q", out)
	}
	if allowedHits.Load() != 1 || otherHits.Load() != 0 {
		t.Fatalf("hits: allowed %d (want 1, through the proxy only), other %d", allowedHits.Load(), otherHits.Load())
	}
}

// TestSandboxWithoutEgressHasNoProxy: a sandbox without egress has no
// proxy in its environment and nothing listening where the proxy would.
func TestSandboxWithoutEgressHasNoProxy(t *testing.T) {
	t.Parallel()
	needSeccomp(t)
	sb := spawn(t, newFakeHome(t).spec(t, t.TempDir()))
	if len(sb.Layers.Egress) != 0 || sb.Layers.Network {
		t.Fatalf("layers %+v claim a network", sb.Layers)
	}
	out := runApproved(t, sb, "env | grep -i '_proxy='; echo end; curl -s --noproxy '*' --max-time 3 http://"+sandbox.ProxyAddr+"/; echo rc=$?")
	if !strings.HasPrefix(out, "end\n") || !strings.Contains(out, "rc=7") {
		t.Fatalf("output %q: a proxy is named or listening", out)
	}
}

// TestSandboxEgressClosesWithSandbox: a tunnel a sandbox's process holds
// open through the proxy to a host service ends when the sandbox is
// closed: the destination sees its connection close.
func TestSandboxEgressClosesWithSandbox(t *testing.T) {
	t.Parallel()
	needSeccomp(t)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := up.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	dest := up.Addr().String()
	spec := newFakeHome(t).spec(t, t.TempDir())
	spec.Egress = []string{dest}
	sb, err := sandbox.Spawn(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	host, port, _ := net.SplitHostPort(sandbox.ProxyAddr)
	out := runApproved(t, sb, "bash -c 'exec 3<>/dev/tcp/"+host+"/"+port+"; printf \"CONNECT "+dest+" HTTP/1.1\\r\\nHost: "+dest+"\\r\\n\\r\\n\" >&3; exec sleep 600 <&3' >/dev/null 2>&1 </dev/null & echo started")
	if !strings.Contains(out, "started") {
		t.Fatalf("output %q", out)
	}
	var c net.Conn
	select {
	case c = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel never reached the destination")
	}
	defer c.Close()
	sb.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errorsIsTimeout(err) {
		t.Fatalf("the tunnel outlived the sandbox: read %d, %v", n, err)
	}
}

func errorsIsTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
