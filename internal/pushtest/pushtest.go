// Package pushtest is a Web Push service for tests, standing in for the
// browser vendors' (FCM, Mozilla's, Apple's), which tests cannot reach. It
// takes messages as RFC 8030 says, checks each one's VAPID signature (RFC
// 8292) against the public key the request names, and decrypts it (RFC
// 8291, aes128gcm) with the keys of a subscription made the way a browser
// makes one, so that a test sees exactly what a phone's service worker
// would receive.
package pushtest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Service is a running push service; it closes when the test ends.
type Service struct {
	*httptest.Server
	t testing.TB

	mu     sync.Mutex
	subs   map[string]*Subscription // by endpoint path
	status map[string]int           // answers other than 201, by endpoint path
	got    chan Push
}

// Subscription is a browser's: its endpoint and keys, as PushSubscription
// toJSON() gives them, and the private key only the browser holds.
type Subscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`

	private *ecdh.PrivateKey
	auth    []byte
}

// Push is one message the service took, decrypted.
type Push struct {
	Endpoint string
	// Payload is the plaintext the service worker would get.
	Payload []byte
	// Topic, TTL and Urgency are the request's headers.
	Topic, TTL, Urgency string
	// Subscriber is the VAPID token's "sub" claim.
	Subscriber string
	// Size is the encrypted message's, in bytes.
	Size int
}

// New starts a push service on loopback over TLS.
func New(t testing.TB) *Service {
	s := &Service{t: t, subs: map[string]*Subscription{}, status: map[string]int{}, got: make(chan Push, 100)}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Subscribe makes a subscription as a browser does: a fresh P-256 key pair
// and a 16-byte authentication secret.
func (s *Service) Subscribe() *Subscription {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		s.t.Fatal(err)
	}
	sub := &Subscription{private: priv, auth: make([]byte, 16)}
	rand.Read(sub.auth)
	path := "/push/" + rand.Text()
	sub.Endpoint = s.URL + path
	sub.Keys.P256dh = base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes())
	sub.Keys.Auth = base64.RawURLEncoding.EncodeToString(sub.auth)
	s.mu.Lock()
	s.subs[path] = sub
	s.mu.Unlock()
	return sub
}

// Answer makes the service answer pushes to sub with status (410: the
// browser unsubscribed).
func (s *Service) Answer(sub *Subscription, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[strings.TrimPrefix(sub.Endpoint, s.URL)] = status
}

// Next returns the next push taken, failing the test after wait.
func (s *Service) Next(wait time.Duration) Push {
	s.t.Helper()
	select {
	case p := <-s.got:
		return p
	case <-time.After(wait):
		s.t.Fatalf("no push within %v", wait)
		return Push{}
	}
}

// Pushes is where the service hands over each push it takes.
func (s *Service) Pushes() <-chan Push { return s.got }

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sub := s.subs[r.URL.Path]
	status := s.status[r.URL.Path]
	s.mu.Unlock()
	if r.Method != http.MethodPost || sub == nil {
		http.NotFound(w, r)
		return
	}
	claims, err := verifyVAPID(r.Header.Get("Authorization"), s.URL)
	if err != nil {
		s.t.Errorf("push to %s: %v", r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	// RFC 8030 has push services take 4096 bytes of message at least;
	// the vendors' take no more.
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<10))
	if len(body) > 4096 {
		s.t.Errorf("push to %s: a message of %d bytes", r.URL.Path, len(body))
		http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
		return
	}
	if r.Header.Get("Content-Encoding") != "aes128gcm" {
		s.t.Errorf("push to %s: Content-Encoding %q", r.URL.Path, r.Header.Get("Content-Encoding"))
	}
	plain, err := sub.decrypt(body)
	if err != nil {
		s.t.Errorf("push to %s: %v", r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if status != 0 {
		w.WriteHeader(status)
		return
	}
	s.got <- Push{Endpoint: sub.Endpoint, Payload: plain, Topic: r.Header.Get("Topic"), TTL: r.Header.Get("TTL"),
		Urgency: r.Header.Get("Urgency"), Subscriber: claims.Sub, Size: len(body)}
	w.WriteHeader(http.StatusCreated)
}

type vapidClaims struct {
	Aud string `json:"aud"`
	Exp int64  `json:"exp"`
	Sub string `json:"sub"`
}

// verifyVAPID checks "vapid t=JWT, k=KEY": an ES256 JWT signed by KEY, for
// this service's origin, not expired nor valid for more than a day, with a
// sub to contact.
func verifyVAPID(header, origin string) (vapidClaims, error) {
	var c vapidClaims
	rest, ok := strings.CutPrefix(header, "vapid ")
	if !ok {
		return c, fmt.Errorf("authorization %q is not VAPID", header)
	}
	var token, key string
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			token = v
		case "k":
			key = v
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return c, fmt.Errorf("VAPID key: %w", err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		return c, fmt.Errorf("VAPID key is not a P-256 point: %w", err)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return c, errors.New("VAPID token is not a JWT")
	}
	head, _ := base64.RawURLEncoding.DecodeString(parts[0])
	var h struct{ Alg, Typ string }
	if json.Unmarshal(head, &h) != nil || h.Alg != "ES256" {
		return c, fmt.Errorf("JWT header %s, want ES256", head)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return c, errors.New("JWT signature is not 64 bytes")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return c, errors.New("the VAPID signature does not verify with its key")
	}
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(body, &c); err != nil {
		return c, fmt.Errorf("JWT claims: %w", err)
	}
	now := time.Now().Unix()
	switch {
	case c.Aud != origin:
		return c, fmt.Errorf("aud %q, want %q", c.Aud, origin)
	case c.Exp <= now || c.Exp > now+24*3600:
		return c, fmt.Errorf("exp %d is not within the next 24 hours", c.Exp)
	case !reachable(c.Sub):
		return c, fmt.Errorf("sub %q is neither a mailto: address nor an https URL at a public DNS name", c.Sub)
	}
	return c, nil
}

// reachable says whether sub is a contact Apple's push service takes: it
// refuses one at a name it cannot resolve (localhost, .local, .invalid).
// Here an address, or a name without a dot, is refused too.
func reachable(sub string) bool {
	var host string
	if rest, ok := strings.CutPrefix(sub, "mailto:"); ok {
		a, err := mail.ParseAddress(rest)
		if err != nil || a.Address != rest {
			return false
		}
		_, host, _ = strings.Cut(rest, "@")
	} else if u, err := url.Parse(sub); err == nil && u.Scheme == "https" {
		host = u.Hostname()
	}
	if _, err := netip.ParseAddr(host); err == nil || !strings.Contains(host, ".") {
		return false
	}
	for _, local := range []string{".localhost", ".local", ".invalid"} {
		if strings.HasSuffix(host, local) {
			return false
		}
	}
	return true
}

// decrypt opens an aes128gcm message (RFC 8188 framing, RFC 8291 keys) as
// the browser does.
func (sub *Subscription) decrypt(body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("message shorter than its header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if len(body) < 21+idlen || idlen != 65 {
		return nil, fmt.Errorf("key id of %d bytes, want the server's 65-byte public key", idlen)
	}
	serverKey, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	record := body[21+idlen:]
	if uint32(len(record)) > rs {
		return nil, fmt.Errorf("record of %d bytes over the record size %d", len(record), rs)
	}
	shared, err := sub.private.ECDH(serverKey)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), sub.private.PublicKey().Bytes()...), serverKey.Bytes()...)
	ikm, err := hkdf.Key(sha256.New, shared, sub.auth, string(info), 32)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(block)
	plain, err := gcm.Open(nil, nonce, record, nil)
	if err != nil {
		return nil, fmt.Errorf("decrypting: %w", err)
	}
	// The last record ends with the delimiter 2, then padding zeros.
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 2 {
		return nil, errors.New("no last-record delimiter")
	}
	return plain[:len(plain)-1], nil
}
