package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeSource issues a certificate valid from the clock's now for 90 days,
// or fails while err is set.
type fakeSource struct {
	t     *testing.T
	mu    sync.Mutex
	now   time.Time
	err   error
	names []string
}

func (f *fakeSource) Certificate(_ context.Context, name string) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names = append(f.names, name)
	if f.err != nil {
		return nil, f.err
	}
	certPEM, keyPEM, err := generate([]string{name}, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	c.Leaf = nil // as tailscaled's PEM pair arrives: the leaf is parsed by Renewing
	return &c, err
}

func (f *fakeSource) set(now time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now, f.err = now, err
}

func TestRenewing(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src := &fakeSource{t: t, now: start}
	var mu sync.Mutex
	clock := start
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }

	r, err := NewRenewing(context.Background(), src, "devbox.tail1234.ts.net", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	first := r.Leaf()
	if first.DNSNames[0] != "devbox.tail1234.ts.net" || r.Name() != "devbox.tail1234.ts.net" {
		t.Fatalf("leaf %v", first.DNSNames)
	}
	serve := func() {
		t.Helper()
		c, err := r.GetCertificate(&tls.ClientHelloInfo{ServerName: "devbox.tail1234.ts.net"})
		if err != nil || c.Leaf != r.Leaf() {
			t.Fatalf("GetCertificate: %v", err)
		}
		r.Wait()
	}

	// Early in its life the certificate is served without asking again.
	advance(24 * time.Hour)
	serve()
	if len(src.names) != 1 || r.Leaf() != first {
		t.Fatalf("fetched %d times", len(src.names))
	}

	// Past two thirds of its life (397 days from generate), a failing
	// source keeps the old one and is not asked again within a minute.
	advance(300 * 24 * time.Hour)
	src.set(clock, errors.New("tailscaled unreachable"))
	serve()
	serve()
	if len(src.names) != 2 || r.Leaf() != first {
		t.Fatalf("after a failed renewal: fetched %d times, leaf replaced %v", len(src.names), r.Leaf() != first)
	}

	// A minute later the next try succeeds and the new certificate is served.
	advance(2 * time.Minute)
	src.set(now(), nil)
	serve()
	if len(src.names) != 3 || r.Leaf() == first || !r.Leaf().NotAfter.After(first.NotAfter) {
		t.Fatalf("after renewal: fetched %d times, leaf ends %v", len(src.names), r.Leaf().NotAfter)
	}
}

func TestRenewingFirstFetchFails(t *testing.T) {
	src := &fakeSource{t: t, err: errors.New("no certificate")}
	if _, err := NewRenewing(context.Background(), src, "x.ts.net", nil, nil); err == nil {
		t.Fatal("NewRenewing succeeded without a certificate")
	}
}
