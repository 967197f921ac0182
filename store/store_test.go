package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tether.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestOpenCreatesPrivateFileAndMigratesOnce(t *testing.T) {
	s, path := openTest(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("database mode = %v, want 0600", fi.Mode().Perm())
	}
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != len(names) || v < 2 {
		t.Fatalf("user_version = %d, %v; want %d", v, err, len(names))
	}
	var mode string
	if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
	// FULL (2): a commit is on disk before Open's caller publishes it.
	var sync int
	if err := s.db.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous = %d, %v; want 2 (FULL)", sync, err)
	}
	s.Close()
	// Reopening applies nothing twice.
	s2, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	s2.Close()
}

func TestClaimPairingCode(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	once := []byte("once-hash-0123456789012345678901")
	app := []byte("app-hash-01234567890123456789012")
	old := []byte("old-hash-01234567890123456789012")
	for _, c := range []PairingCode{
		{Hash: once, Kind: CodeOnce, CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{Hash: app, Kind: CodeApp, CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{Hash: old, Kind: CodeOnce, CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Second)},
	} {
		if err := s.CreatePairingCode(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	dev, err := s.ClaimPairingCode(ctx, once, now, Device{ID: "d1", Name: "phone", TokenHash: []byte("tok1")})
	if err != nil {
		t.Fatal(err)
	}
	if string(dev.TokenHash) != "tok1" {
		t.Errorf("once code: token hash = %q, want the new token's", dev.TokenHash)
	}
	if _, err := s.ClaimPairingCode(ctx, once, now, Device{ID: "d2", Name: "x", TokenHash: []byte("tok2")}); !errors.Is(err, ErrCodeUsed) {
		t.Errorf("second claim: %v, want ErrCodeUsed", err)
	}
	if _, err := s.ClaimPairingCode(ctx, old, now, Device{ID: "d3", Name: "x", TokenHash: []byte("tok3")}); !errors.Is(err, ErrCodeExpired) {
		t.Errorf("expired claim: %v, want ErrCodeExpired", err)
	}
	if _, err := s.ClaimPairingCode(ctx, []byte("nope"), now, Device{ID: "d4", Name: "x", TokenHash: []byte("tok4")}); !errors.Is(err, ErrCodeUnknown) {
		t.Errorf("unknown claim: %v, want ErrCodeUnknown", err)
	}
	appDev, err := s.ClaimPairingCode(ctx, app, now, Device{ID: "d5", Name: "app", TokenHash: []byte("tok5")})
	if err != nil {
		t.Fatal(err)
	}
	if string(appDev.TokenHash) != string(app) {
		t.Errorf("app code: token hash = %q, want the code's own hash", appDev.TokenHash)
	}
	got, err := s.DeviceByTokenHash(ctx, app)
	if err != nil || got.ID != "d5" {
		t.Fatalf("DeviceByTokenHash(app) = %+v, %v", got, err)
	}
	// A failed claim created no device.
	devs, err := s.Devices(ctx)
	if err != nil || len(devs) != 2 {
		t.Fatalf("Devices = %d, %v; want 2", len(devs), err)
	}
}

func TestDeviceLifecycle(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now().Truncate(time.Millisecond)
	h := []byte("code-hash-0123456789012345678901")
	if err := s.CreatePairingCode(ctx, PairingCode{Hash: h, Kind: CodeOnce, CreatedAt: now, ExpiresAt: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimPairingCode(ctx, h, now, Device{ID: "d1", Name: "phone", Platform: "ios", TokenHash: []byte("t")}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour)
	// Sightings in one batch: the last of a device wins; an unknown
	// device (revoked and deleted meanwhile) is skipped.
	if err := s.TouchDevices(ctx, []Sighting{
		{Device: "d1", At: now.Add(time.Minute), Addr: "10.0.0.1", ClientVersion: "1.1.0"},
		{Device: "gone", At: later, Addr: "10.0.0.9"},
		{Device: "d1", At: later, Addr: "10.0.0.2", ClientVersion: "1.2.0"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchDevices(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.RenameDevice(ctx, "d1", "work phone"); err != nil {
		t.Fatal(err)
	}
	d, err := s.Device(ctx, "d1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "work phone" || d.Platform != "ios" || d.ClientVersion != "1.2.0" || d.LastAddr != "10.0.0.2" || !d.LastSeen.Equal(later) || !d.PairedAt.Equal(now) {
		t.Fatalf("device = %+v", d)
	}
	if n, _ := s.CountActiveDevices(ctx); n != 1 {
		t.Fatalf("active devices = %d", n)
	}
	if err := s.RevokeDevice(ctx, "d1", later); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeDevice(ctx, "d1", later.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	d, _ = s.Device(ctx, "d1")
	if d.RevokedAt == nil || !d.RevokedAt.Equal(later) {
		t.Fatalf("revoked_at = %v, want the first revocation %v", d.RevokedAt, later)
	}
	if rev, _ := s.RevokedDevices(ctx); !rev["d1"] {
		t.Fatalf("RevokedDevices = %v", rev)
	}
	if n, _ := s.CountActiveDevices(ctx); n != 0 {
		t.Fatalf("active devices after revoke = %d", n)
	}
	for _, err := range []error{s.RevokeDevice(ctx, "nope", now), s.RenameDevice(ctx, "nope", "x")} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown device: %v, want ErrNotFound", err)
		}
	}
	if _, err := s.Device(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Device(nope) = %v", err)
	}
}

// BenchmarkQuickRead measures a short read (the live sessions, as an
// auth's connection_ack lists them) with a context that can be cancelled
// and with one that cannot: database/sql and the SQLite driver each start
// a goroutine to watch a cancellable context.
func BenchmarkQuickRead(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"cancellable", cancellable}, {"without-cancel", context.WithoutCancel(cancellable)}} {
		b.Run("ctx="+c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.LiveSessions(c.ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
