package egress

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// benchGet fetches target b.N times with client, a new connection each
// time (the proxy forwards one plain request a connection, and a tunnel
// is a connection).
func benchGet(b *testing.B, client *http.Client, target string) {
	for b.Loop() {
		resp, err := client.Get(target)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkRequest measures a GET on a new connection to a loopback
// server, directly and through the proxy: plain HTTP (absolute URI) and
// HTTPS (a CONNECT tunnel, TLS inside it).
func BenchmarkRequest(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	plain := httptest.NewServer(handler)
	defer plain.Close()
	tls := httptest.NewTLSServer(handler)
	defer tls.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	p := &Proxy{Allow: []string{strings.TrimPrefix(plain.URL, "http://"), strings.TrimPrefix(tls.URL, "https://")}}
	go p.Serve(ln)
	proxyURL := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	client := func(proxied bool) *http.Client {
		tr := tls.Client().Transport.(*http.Transport).Clone()
		tr.DisableKeepAlives = true
		if proxied {
			tr.Proxy = http.ProxyURL(proxyURL)
		}
		return &http.Client{Transport: tr}
	}
	b.Run("http/direct", func(b *testing.B) { benchGet(b, client(false), plain.URL) })
	b.Run("http/proxy", func(b *testing.B) { benchGet(b, client(true), plain.URL) })
	b.Run("https/direct", func(b *testing.B) { benchGet(b, client(false), tls.URL) })
	b.Run("https/proxy", func(b *testing.B) { benchGet(b, client(true), tls.URL) })
}
