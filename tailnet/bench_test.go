package tailnet

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
)

// BenchmarkWhoIs measures what the classifier adds to every connection:
// a LocalAPI round trip over the unix socket (answered by a minimal
// LocalAPI, so this is the floor, not tailscaled's own cost), and the
// failed dial when tailscaled is not running.
func BenchmarkWhoIs(b *testing.B) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /localapi/v0/whois", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"Node":{"Name":"phone.tail1234.ts.net."},"UserProfile":{"LoginName":"alice@example.com"}}`))
	})
	for _, bc := range []struct {
		name   string
		socket func(*testing.B) string
		err    bool
	}{
		{"known peer", func(b *testing.B) string { return localAPI(b, mux) }, false},
		{"no tailscaled", func(b *testing.B) string { return filepath.Join(b.TempDir(), "none.sock") }, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := New(bc.socket(b))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.WhoIs(ctx, "100.64.0.2:40000"); (err != nil) != bc.err {
					b.Fatal(err)
				}
			}
		})
	}
}
