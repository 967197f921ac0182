package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLocalCA(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ca")
	now := time.Now()
	hosts := []string{"localhost", "127.0.0.1", "::1", "devbox", "192.168.1.20", "100.64.0.7", "203.0.113.5"}
	ca, err := LoadLocalCA(dir, hosts, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca-key.pem", "key.pem"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want 0600", f, fi.Mode(), err)
		}
	}
	if !ca.CA.IsCA || !ca.CA.MaxPathLenZero || len(ca.CA.PermittedIPRanges) == 0 || !ca.CA.PermittedDNSDomainsCritical {
		t.Fatalf("CA not constrained: %+v", ca.CA)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.CA)
	for _, h := range hosts {
		if _, err := ca.Serving.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: h, CurrentTime: now}); err != nil {
			t.Errorf("serving certificate for %s: %v", h, err)
		}
	}
	if len(ca.Serving.TLS.Certificate) != 2 {
		t.Errorf("served chain has %d certificates, want leaf and CA", len(ca.Serving.TLS.Certificate))
	}

	// A certificate the CA's key signs for a name or address outside the
	// machine's is refused by the constraints: a leaked key cannot vouch
	// for a public site or another LAN's public address.
	caPair, err := LoadFiles(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	for _, foreign := range []string{"bank.example", "devbox.evil.example", "198.51.100.9", "8.8.8.8"} {
		tmpl, _ := template([]string{foreign}, now, now.Add(time.Hour))
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.CA, &key.PublicKey, caPair.TLS.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(der)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: foreign, CurrentTime: now}); err == nil || !strings.Contains(err.Error(), "constraint") {
			t.Errorf("a certificate for %s verified: %v", foreign, err)
		}
	}

	// The next start keeps both; a new LAN address (DHCP) gets a new
	// serving certificate from the same CA, which the phone already trusts.
	again, err := LoadLocalCA(dir, hosts, now)
	if err != nil || !again.CA.Equal(ca.CA) || !again.Serving.Leaf.Equal(ca.Serving.Leaf) {
		t.Fatalf("second load changed something: %v", err)
	}
	moved := append(hosts[:len(hosts):len(hosts)], "192.168.7.7")
	next, err := LoadLocalCA(dir, moved, now)
	if err != nil || !next.CA.Equal(ca.CA) || next.Serving.Leaf.Equal(ca.Serving.Leaf) {
		t.Fatalf("after an address change: %v", err)
	}
	if _, err := next.Serving.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "192.168.7.7", CurrentTime: now}); err != nil {
		t.Errorf("the new address: %v", err)
	}
	if fp := Fingerprint(ca.CA); len(fp) != 32*3-1 || strings.ToUpper(fp) != fp {
		t.Errorf("fingerprint %q", fp)
	}
}
