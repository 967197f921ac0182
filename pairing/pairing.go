// Package pairing pairs devices with the daemon and authenticates them:
// one-time pairing codes shown as QR codes, per-device tokens, the QR
// payload, a limiter for failed attempts, and the classification of a
// connection's peer into the protocol's connection modes.
//
// Secrets (codes and tokens) are 256 random bits, base64url-encoded, stored
// only as SHA-256 hashes and compared in constant time. With 2^256 possible
// codes, a code cannot be guessed within its lifetime even without the rate
// limit; see README for the arithmetic.
package pairing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/store"
)

// Prefixes make a leaked secret recognisable for what it is.
const (
	codePrefix  = "tpc_"
	tokenPrefix = "tdt_"
)

// DefaultTTL is how long a pairing code can be claimed.
const DefaultTTL = 10 * time.Minute

// ErrAuthFailed is returned for any token that does not authenticate a
// device: unknown, expired, already used or revoked. Reason says which, for
// the daemon's log only.
type ErrAuthFailed struct{ Reason string }

func (e *ErrAuthFailed) Error() string { return "authentication failed: " + e.Reason }

// Secret is a pairing code or device token. Its LogValue hides it.
type Secret string

// LogValue keeps secrets out of logs.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

func newSecret(prefix string) (Secret, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pairing: random: %w", err)
	}
	return Secret(prefix + base64.RawURLEncoding.EncodeToString(b[:])), nil
}

// Hash is the stored form of a secret.
func Hash(s string) []byte {
	h := sha256.Sum256([]byte(strings.TrimSpace(s)))
	return h[:]
}

// NewDeviceID returns a fresh, short, non-secret device id.
func NewDeviceID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pairing: random: %w", err)
	}
	return "dev_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])), nil
}

// Pairer issues pairing codes and authenticates devices against the store.
type Pairer struct {
	// Store holds devices and codes.
	Store *store.Store
	// TTL is how long a new code can be claimed; DefaultTTL when zero.
	TTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// known holds the devices that authenticated since the daemon
	// started, by token hash, so that a phone's reconnection reads
	// nothing from the store. The daemon changes devices only through
	// Forget's callers; gen, bumped by Forget, keeps a lookup that raced
	// a change from caching what it read before.
	mu    sync.Mutex
	known map[string]store.Device
	gen   uint64
}

// Forget drops what Authenticate remembers of device id: call it whenever
// the device changes in the store (revoked, renamed), before anyone is
// told of the change.
func (p *Pairer) Forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	for h, d := range p.known {
		if d.ID == id {
			delete(p.known, h)
		}
	}
}

// lookup returns the device whose token hashes to h, remembered or read
// from the store.
func (p *Pairer) lookup(ctx context.Context, h []byte) (store.Device, error) {
	p.mu.Lock()
	dev, ok := p.known[string(h)]
	gen := p.gen
	p.mu.Unlock()
	if ok {
		return dev, nil
	}
	dev, err := p.Store.DeviceByTokenHash(ctx, h)
	if err != nil || dev.RevokedAt != nil {
		return dev, err
	}
	p.mu.Lock()
	if p.gen == gen {
		if p.known == nil {
			p.known = make(map[string]store.Device)
		}
		p.known[string(h)] = dev
	}
	p.mu.Unlock()
	return dev, nil
}

func (p *Pairer) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Code is a freshly issued pairing code.
type Code struct {
	Secret  Secret
	Kind    string
	Expires time.Time
}

// NewCode issues a pairing code of kind store.CodeOnce or store.CodeApp.
func (p *Pairer) NewCode(ctx context.Context, kind string) (Code, error) {
	if kind != store.CodeOnce && kind != store.CodeApp {
		return Code{}, fmt.Errorf("pairing: unknown code kind %q", kind)
	}
	secret, err := newSecret(codePrefix)
	if err != nil {
		return Code{}, err
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	now := p.now()
	c := Code{Secret: secret, Kind: kind, Expires: now.Add(ttl).Truncate(time.Second)}
	if err := p.Store.CreatePairingCode(ctx, store.PairingCode{
		Hash: Hash(string(secret)), Kind: kind, CreatedAt: now, ExpiresAt: c.Expires,
	}); err != nil {
		return Code{}, err
	}
	return c, nil
}

// Client describes who is authenticating.
type Client struct {
	Name          string
	Platform      string
	ClientVersion string
	Addr          string
}

// Result is a successful authentication.
type Result struct {
	Device store.Device
	// NewToken is set when this authentication paired a new device: the
	// token the device must use from now on.
	NewToken Secret
}

// Authenticate checks token, a device token or a pairing code. A device
// token of a device that is not revoked authenticates that device; a valid
// pairing code creates a new device. Everything else is *ErrAuthFailed.
func (p *Pairer) Authenticate(ctx context.Context, token string, c Client) (Result, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return Result{}, &ErrAuthFailed{Reason: "empty token"}
	}
	h := Hash(token)
	dev, err := p.lookup(ctx, h)
	switch {
	case err == nil:
		if subtle.ConstantTimeCompare(dev.TokenHash, h) != 1 {
			return Result{}, &ErrAuthFailed{Reason: "token mismatch"}
		}
		if dev.RevokedAt != nil {
			return Result{}, &ErrAuthFailed{Reason: "device revoked"}
		}
		return Result{Device: dev}, nil
	case !errors.Is(err, store.ErrNotFound):
		return Result{}, err
	}
	if !strings.HasPrefix(token, codePrefix) {
		return Result{}, &ErrAuthFailed{Reason: "unknown token"}
	}
	id, err := NewDeviceID()
	if err != nil {
		return Result{}, err
	}
	newTok, err := newSecret(tokenPrefix)
	if err != nil {
		return Result{}, err
	}
	name := strings.TrimSpace(c.Name)
	if name == "" {
		name = defaultDeviceName(c.Platform, id)
	}
	dev, err = p.Store.ClaimPairingCode(ctx, h, p.now(), store.Device{
		ID: id, Name: name, Platform: c.Platform, ClientVersion: c.ClientVersion,
		LastAddr: c.Addr, TokenHash: Hash(string(newTok)),
	})
	switch {
	case errors.Is(err, store.ErrCodeUnknown):
		return Result{}, &ErrAuthFailed{Reason: "unknown pairing code"}
	case errors.Is(err, store.ErrCodeExpired):
		return Result{}, &ErrAuthFailed{Reason: "pairing code expired"}
	case errors.Is(err, store.ErrCodeUsed):
		return Result{}, &ErrAuthFailed{Reason: "pairing code already used"}
	case err != nil:
		return Result{}, err
	}
	if subtle.ConstantTimeCompare(dev.TokenHash, h) == 1 {
		// An app code: the code itself is the device's token from now on.
		newTok = Secret(token)
	}
	return Result{Device: dev, NewToken: newTok}, nil
}

func defaultDeviceName(platform, id string) string {
	short := strings.TrimPrefix(id, "dev_")
	if len(short) > 4 {
		short = short[:4]
	}
	if platform == "" {
		return "device " + short
	}
	return platform + " " + short
}
