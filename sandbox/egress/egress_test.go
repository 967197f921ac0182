package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serve starts a proxy allowing allow and returns its address.
func serve(t *testing.T, allow ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Allow: allow}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ln) }()
	t.Cleanup(func() {
		ln.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// roundTrip sends raw to the proxy and returns the status line and the rest.
func roundTrip(t *testing.T, proxy, raw string) (string, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, raw)
	br := bufio.NewReader(c)
	status, _ := br.ReadString('\n')
	rest, _ := io.ReadAll(br)
	return strings.TrimSpace(status), string(rest)
}

func TestProxyForwardsOnlyTheAllowList(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream says hi to "+r.URL.Path)
	}))
	defer up.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the other server was reached") }))
	defer other.Close()
	upAddr := strings.TrimPrefix(up.URL, "http://")
	proxy := serve(t, upAddr, "API.example.com:443")

	// An allowed CONNECT tunnel carries a request.
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "CONNECT "+upAddr+" HTTP/1.1\r\nHost: "+upAddr+"\r\n\r\nGET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	body, _ := io.ReadAll(c)
	c.Close()
	if !strings.HasPrefix(string(body), "HTTP/1.1 200 Connection established") || !strings.Contains(string(body), "upstream says hi to /tunnel") {
		t.Fatalf("tunnel: %q", body)
	}
	// An allowed plain HTTP request.
	if status, rest := roundTrip(t, proxy, "GET http://"+upAddr+"/plain HTTP/1.1\r\nHost: "+upAddr+"\r\n\r\n"); !strings.Contains(status, "200") || !strings.Contains(rest, "hi to /plain") {
		t.Fatalf("plain: %s %q", status, rest)
	}
	otherAddr := strings.TrimPrefix(other.URL, "http://")
	for name, tt := range map[string]struct{ raw, want string }{
		"CONNECT elsewhere":       {"CONNECT " + otherAddr + " HTTP/1.1\r\n\r\n", "403"},
		"plain HTTP elsewhere":    {"GET http://" + otherAddr + "/ HTTP/1.1\r\nHost: x\r\n\r\n", "403"},
		"the right host, a port":  {"CONNECT api.example.com:80 HTTP/1.1\r\n\r\n", "403"},
		"origin-form request":     {"GET / HTTP/1.1\r\nHost: " + upAddr + "\r\n\r\n", "400"},
		"CONNECT without port":    {"CONNECT api.example.com HTTP/1.1\r\n\r\n", "400"},
		"garbage":                 {"\x16\x03\x01\x02\x00\r\n\r\n", "400"},
		"headers beyond 16 KiB":   {"CONNECT " + upAddr + " HTTP/1.1\r\nX: " + strings.Repeat("a", 20<<10) + "\r\n\r\n", "431"},
		"loopback of the machine": {"CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n", "403"},
	} {
		if status, _ := roundTrip(t, proxy, tt.raw); !strings.Contains(status, tt.want) {
			t.Errorf("%s: %q, want %s", name, status, tt.want)
		}
	}
}

func TestAllowedIsExact(t *testing.T) {
	t.Parallel()
	p := &Proxy{Allow: []string{"api.anthropic.com:443", "[::1]:8080"}}
	for addr, want := range map[string]bool{
		"api.anthropic.com:443": true, "API.Anthropic.com:443": true, "[::1]:8080": true,
		"api.anthropic.com:80": false, "evil.api.anthropic.com:443": false, "api.anthropic.com.evil:443": false,
		"api.anthropic.com": false, ":443": false, "": false,
	} {
		if got := p.Allowed(addr); got != want {
			t.Errorf("Allowed(%q) = %v", addr, got)
		}
	}
}

func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		"CONNECT a:443 HTTP/1.1\r\n\r\n", "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", "GET / HTTP/1.0\r\n\r\n",
		"CONNECT [::1]:1 HTTP/1.1\r\n\r\n", "\x00\xff", "GET http://[::1/ HTTP/1.1\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		req, dest, err := Request(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return
		}
		host, port, err := net.SplitHostPort(dest)
		if err != nil || host == "" || port == "" || req == nil {
			t.Fatalf("%q: destination %q (%v)", raw, dest, err)
		}
	})
}

// TestProxyLimits: past MaxConns open connections the next is refused
// with 503, and an allowed destination that does not answer is a 502.
func TestProxyLimits(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := closed.Addr().String()
	closed.Close()
	proxy := serve(t, dead)
	if status, _ := roundTrip(t, proxy, "CONNECT "+dead+" HTTP/1.1\r\n\r\n"); !strings.Contains(status, "502") {
		t.Fatalf("unreachable destination: %q, want 502", status)
	}
	for range MaxConns {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if status, rest := roundTrip(t, proxy, "CONNECT "+dead+" HTTP/1.1\r\n\r\n"); !strings.Contains(status, "503") || !strings.Contains(rest, "too many connections") {
		t.Fatalf("connection %d: %q %q, want 503", MaxConns+1, status, rest)
	}
}
