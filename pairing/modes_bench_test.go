package pairing

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// BenchmarkClassify measures the classification every /ws connection
// pays before its upgrade, without tailscaled's round trip (see the
// tailnet package's benchmarks for that).
func BenchmarkClassify(b *testing.B) {
	proxies := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.9.0.0/16")}
	for _, bc := range []struct {
		name   string
		remote string
		xff    string
		c      *Classifier
	}{
		{"address", "192.168.1.20:5000", "", &Classifier{}},
		{"tailnet peer (fake)", "100.64.0.2:40000", "", &Classifier{Tailnet: &fakeTailnet{peers: nil}}},
		{"trusted proxy chain", "127.0.0.1:5000", "127.0.0.1, 203.0.113.7, 10.9.3.3", &Classifier{TrustedProxies: proxies}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/ws", nil)
			r.RemoteAddr, r.TLS = bc.remote, &tls.ConnectionState{}
			if bc.xff != "" {
				r.Header.Set("X-Forwarded-For", bc.xff)
				r.Header.Set("X-Forwarded-Proto", "https")
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if cl := bc.c.Classify(ctx, r); cl.Refused != nil {
					b.Fatal(cl.Refused)
				}
			}
		})
	}
}
