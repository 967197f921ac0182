package pairing

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/store"
)

func newPairer(t *testing.T) (*Pairer, *time.Time) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return &Pairer{Store: st, TTL: 10 * time.Minute, Now: func() time.Time { return now }}, &now
}

func wantAuthFailed(t *testing.T, err error, reason string) {
	t.Helper()
	var af *ErrAuthFailed
	if !errors.As(err, &af) || !strings.Contains(af.Reason, reason) {
		t.Fatalf("err = %v, want auth failure %q", err, reason)
	}
}

func TestOneTimeCodeBecomesDeviceToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, now := newPairer(t)
	code, err := p.NewCode(ctx, store.CodeOnce)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(code.Secret), codePrefix) || len(code.Secret) < 40 {
		t.Fatalf("code %q is not a 256-bit secret", code.Secret)
	}
	res, err := p.Authenticate(ctx, " "+string(code.Secret)+"\n", Client{Platform: "ios", ClientVersion: "1.0.0", Addr: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.NewToken == "" || res.NewToken == code.Secret || !strings.HasPrefix(string(res.NewToken), tokenPrefix) {
		t.Fatalf("new token = %q", res.NewToken)
	}
	if res.Device.Platform != "ios" || !strings.HasPrefix(res.Device.Name, "ios ") {
		t.Fatalf("device = %+v", res.Device)
	}
	// The code is spent; the token works, again and again.
	_, err = p.Authenticate(ctx, string(code.Secret), Client{})
	wantAuthFailed(t, err, "already used")
	for range 2 {
		again, err := p.Authenticate(ctx, string(res.NewToken), Client{})
		if err != nil || again.Device.ID != res.Device.ID || again.NewToken != "" {
			t.Fatalf("token auth = %+v, %v", again, err)
		}
	}
	*now = now.Add(time.Hour)
	if err := p.Store.RevokeDevice(ctx, res.Device.ID, *now); err != nil {
		t.Fatal(err)
	}
	p.Forget(res.Device.ID)
	_, err = p.Authenticate(ctx, string(res.NewToken), Client{})
	wantAuthFailed(t, err, "revoked")
}

// TestAuthenticateRemembersUntilForget: a device that authenticated is
// remembered (its store row is not read again) until Forget, which every
// change of a device in the store is followed by.
func TestAuthenticateRemembersUntilForget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, now := newPairer(t)
	code, err := p.NewCode(ctx, store.CodeApp)
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.Authenticate(ctx, string(code.Secret), Client{Name: "phone"})
	if err != nil {
		t.Fatal(err)
	}
	tok, id := string(first.NewToken), first.Device.ID
	if _, err := p.Authenticate(ctx, tok, Client{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Store.RenameDevice(ctx, id, "tablet"); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Authenticate(ctx, tok, Client{}); err != nil || res.Device.Name != "phone" {
		t.Fatalf("before Forget: %+v, %v; want the remembered device", res.Device, err)
	}
	p.Forget(id)
	if res, err := p.Authenticate(ctx, tok, Client{}); err != nil || res.Device.Name != "tablet" {
		t.Fatalf("after Forget: %+v, %v; want the renamed device", res.Device, err)
	}
	if err := p.Store.RevokeDevice(ctx, id, *now); err != nil {
		t.Fatal(err)
	}
	p.Forget(id)
	for range 2 {
		_, err = p.Authenticate(ctx, tok, Client{})
		wantAuthFailed(t, err, "revoked")
	}
}

func TestCodeExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, now := newPairer(t)
	code, err := p.NewCode(ctx, store.CodeOnce)
	if err != nil {
		t.Fatal(err)
	}
	*now = now.Add(10*time.Minute + time.Second)
	_, err = p.Authenticate(ctx, string(code.Secret), Client{})
	wantAuthFailed(t, err, "expired")
}

func TestAppCodeIsKeptAsToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, now := newPairer(t)
	code, err := p.NewCode(ctx, store.CodeApp)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Authenticate(ctx, string(code.Secret), Client{Platform: "flutter"})
	if err != nil {
		t.Fatal(err)
	}
	if res.NewToken != code.Secret {
		t.Fatalf("app code: device token = %q, want the code itself", res.NewToken)
	}
	// Long after the code's lifetime it still authenticates the same device.
	*now = now.Add(30 * 24 * time.Hour)
	again, err := p.Authenticate(ctx, string(code.Secret), Client{})
	if err != nil || again.Device.ID != res.Device.ID {
		t.Fatalf("reuse = %+v, %v", again, err)
	}
}

func TestUnknownTokens(t *testing.T) {
	t.Parallel()
	p, _ := newPairer(t)
	for _, tok := range []string{"", "   ", "tdt_nothing", "tpc_nothing", "garbage"} {
		_, err := p.Authenticate(context.Background(), tok, Client{})
		var af *ErrAuthFailed
		if !errors.As(err, &af) {
			t.Errorf("Authenticate(%q) = %v, want ErrAuthFailed", tok, err)
		}
	}
}

func TestSecretLogValue(t *testing.T) {
	t.Parallel()
	if v := Secret("tdt_abc").LogValue().String(); strings.Contains(v, "abc") {
		t.Fatalf("LogValue leaks the secret: %q", v)
	}
}

func TestAttemptLimiter(t *testing.T) {
	t.Parallel()
	l := &AttemptLimiter{Every: time.Minute, Burst: 3}
	now := time.Now()
	a := netip.MustParseAddr("192.0.2.1")
	b := netip.MustParseAddr("192.0.2.2")
	v6a := netip.MustParseAddr("2001:db8::1")
	v6b := netip.MustParseAddr("2001:db8::ffff") // same /64
	for i := range 3 {
		if !l.Allowed(a, now) {
			t.Fatalf("attempt %d refused", i)
		}
		l.Failed(a, now)
		l.Failed(v6a, now)
	}
	if l.Allowed(a, now) {
		t.Fatal("fourth failure allowed")
	}
	if !l.Allowed(b, now) {
		t.Fatal("another address is limited too")
	}
	if l.Allowed(v6b, now) {
		t.Fatal("an address in the same IPv6 /64 is not limited")
	}
	if l.Allowed(netip.MustParseAddr("::ffff:192.0.2.1"), now) {
		t.Fatal("the IPv4-mapped form escapes the limit")
	}
	if !l.Allowed(a, now.Add(time.Minute)) {
		t.Fatal("not allowed again after the refill interval")
	}
}

func TestClassifyAddr(t *testing.T) {
	t.Parallel()
	tests := []struct{ addr, mode string }{
		{"127.0.0.1", ModeLocalOnly},
		{"127.3.4.5", ModeLocalOnly},
		{"::1", ModeLocalOnly},
		{"::ffff:127.0.0.1", ModeLocalOnly},
		{"10.1.2.3", ModePrivateNetwork},
		{"172.16.0.1", ModePrivateNetwork},
		{"172.31.255.255", ModePrivateNetwork},
		{"192.168.1.20", ModePrivateNetwork},
		{"::ffff:192.168.1.20", ModePrivateNetwork},
		{"fd12:3456::1", ModePrivateNetwork},
		{"fe80::1", ModePrivateNetwork},
		{"169.254.10.1", ModePrivateNetwork},
		{"172.32.0.1", ModeDirectPublic},
		{"100.64.0.1", ModeDirectPublic}, // CGNAT or tailnet: only tailscaled can tell
		{"8.8.8.8", ModeDirectPublic},
		{"2001:4860:4860::8888", ModeDirectPublic},
	}
	for _, tt := range tests {
		if got := ClassifyAddr(netip.MustParseAddr(tt.addr)); got.Mode != tt.mode || got.Description == "" {
			t.Errorf("ClassifyAddr(%s) = %+v, want %s", tt.addr, got, tt.mode)
		}
	}
}
