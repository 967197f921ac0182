package tailnet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"testing"
	"time"
)

// localAPI serves the parts of tailscaled's LocalAPI the client uses, on a
// real unix socket, and returns the socket's path.
func localAPI(t testing.TB, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "tailscaled.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func TestWhoIs(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /localapi/v0/whois", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("addr") {
		case "100.64.0.2:4000":
			writeJSON(w, map[string]any{
				"Node":        map[string]any{"Name": "phone.tail1234.ts.net.", "ComputedName": "phone", "Addresses": []string{"fd7a:115c:a1e0::2/128", "100.64.0.2/32"}},
				"UserProfile": map[string]any{"LoginName": "alice@example.com"},
			})
		case "100.64.0.3":
			writeJSON(w, map[string]any{
				"Node":        map[string]any{"Name": "", "ComputedName": "ci", "Tags": []string{"tag:ci"}},
				"UserProfile": map[string]any{"LoginName": "tagged-devices"},
			})
		case "100.64.0.4":
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			http.Error(w, "no match for IP:port", http.StatusNotFound)
		}
	})
	c := New(localAPI(t, mux))
	tests := []struct {
		addr string
		want Peer
		err  error
	}{
		{"100.64.0.2:4000", Peer{User: "alice@example.com", Node: "phone.tail1234.ts.net", Addr: netip.MustParseAddr("100.64.0.2")}, nil},
		{"100.64.0.3", Peer{User: "tag:ci", Node: "ci"}, nil},
		{"100.64.0.9:1", Peer{}, ErrUnknownPeer},
	}
	for _, tt := range tests {
		got, err := c.WhoIs(context.Background(), tt.addr)
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("WhoIs(%s) = %+v, %v; want %+v, %v", tt.addr, got, err, tt.want, tt.err)
		}
	}
	if _, err := c.WhoIs(context.Background(), "100.64.0.4"); err == nil || errors.Is(err, ErrUnknownPeer) {
		t.Errorf("WhoIs with a failing tailscaled: %v, want an error other than ErrUnknownPeer", err)
	}
}

func TestNoTailscaled(t *testing.T) {
	t.Parallel()
	c := New(filepath.Join(t.TempDir(), "missing.sock"))
	if _, err := c.WhoIs(context.Background(), "100.64.0.2"); err == nil || errors.Is(err, ErrUnknownPeer) {
		t.Errorf("WhoIs without tailscaled: %v", err)
	}
	if _, err := c.State(context.Background()); err == nil || errors.Is(err, ErrNotRunning) {
		t.Errorf("State without tailscaled: %v", err)
	}
}

func TestState(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		status   map[string]any
		err      error
		certName string
	}{
		{"running with certificates", map[string]any{
			"BackendState": "Running", "TUN": true, "TailscaleIPs": []string{"100.64.0.1", "fd7a:115c:a1e0::1"},
			"Self":           map[string]any{"DNSName": "devbox.tail1234.ts.net."},
			"CurrentTailnet": map[string]any{"Name": "alice@example.com", "MagicDNSSuffix": "tail1234.ts.net"},
			"CertDomains":    []string{"devbox.tail1234.ts.net"},
		}, nil, "devbox.tail1234.ts.net"},
		{"running without certificates", map[string]any{
			"BackendState": "Running", "TailscaleIPs": []string{"100.64.0.1"},
			"Self": map[string]any{"DNSName": "devbox.tail1234.ts.net."},
		}, nil, ""},
		{"logged out", map[string]any{"BackendState": "NeedsLogin"}, ErrNotRunning, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /localapi/v0/status", func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("peers") != "false" {
					t.Errorf("status asked with peers: %s", r.URL)
				}
				writeJSON(w, tt.status)
			})
			st, err := New(localAPI(t, mux)).State(context.Background())
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("State: %v, want %v", err, tt.err)
			}
			if st.Backend != tt.status["BackendState"] || st.CertName() != tt.certName {
				t.Errorf("state %+v, cert name %q; want %q", st, st.CertName(), tt.certName)
			}
			if tt.err == nil && (st.DNSName != "devbox.tail1234.ts.net" || len(st.Addrs) == 0 || st.Addrs[0].String() != "100.64.0.1") {
				t.Errorf("state %+v", st)
			}
		})
	}
}

func TestCertificate(t *testing.T) {
	t.Parallel()
	certPEM, keyPEM := testCert(t, "devbox.tail1234.ts.net")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /localapi/v0/cert/{domain}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("domain") != "devbox.tail1234.ts.net" || r.URL.Query().Get("type") != "pair" {
			http.Error(w, "no cert for that name", http.StatusBadRequest)
			return
		}
		w.Write(append(append([]byte{}, keyPEM...), certPEM...))
	})
	c := New(localAPI(t, mux))
	cert, err := c.Certificate(context.Background(), "devbox.tail1234.ts.net")
	if err != nil {
		t.Fatal(err)
	}
	if cert.Leaf == nil || cert.Leaf.DNSNames[0] != "devbox.tail1234.ts.net" {
		t.Errorf("leaf %+v", cert.Leaf)
	}
	if _, err := c.Certificate(context.Background(), "other.tail1234.ts.net"); err == nil {
		t.Error("a certificate for a name tailscaled refused")
	}
	if _, err := c.Certificate(context.Background(), ""); !errors.Is(err, ErrNoCertificate) {
		t.Errorf("no name: %v", err)
	}
}

func testCert(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
