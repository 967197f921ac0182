package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/SherClockHolmes/webpush-go"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// WebPush sends notifications to the browsers that subscribed (the web
// client's "Notify me"), through their vendors' push services: RFC 8030
// messages, encrypted to each subscription's keys (RFC 8291, aes128gcm),
// signed with the daemon's VAPID key (RFC 8292). github.com/SherClockHolmes/
// webpush-go does the encryption and the signing; it is the Go library
// most Web Push servers use, small, and pinned in go.mod.
type WebPush struct {
	// Subscriptions holds the devices' subscriptions (revoked devices have
	// none).
	Subscriptions *store.Store
	Keys          VAPIDKeys
	// Subscriber is the VAPID "sub" claim, as ParseContact gives it: where
	// a push service's operator can reach the sender's.
	Subscriber string
	// Client sends to the push services; http.DefaultClient when nil.
	Client *http.Client
}

// VAPIDKeys are the daemon's VAPID key pair, base64url (the public key is
// the uncompressed P-256 point browsers take as applicationServerKey).
type VAPIDKeys struct {
	Public  string `json:"public"`
	Private string `json:"private"`
}

// LoadVAPIDKeys reads the key pair kept at path, making and keeping one
// (0600) the first time. A browser's subscriptions are bound to the public
// key, so it never changes by itself.
func LoadVAPIDKeys(path string) (VAPIDKeys, error) {
	var k VAPIDKeys
	b, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(b, &k); err != nil || k.Public == "" || k.Private == "" {
			return VAPIDKeys{}, fmt.Errorf("%s holds no VAPID key pair; remove it to make a new one (browsers then subscribe again)", path)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return VAPIDKeys{}, err
	}
	if k.Private, k.Public, err = webpush.GenerateVAPIDKeys(); err != nil {
		return VAPIDKeys{}, err
	}
	b, _ = json.Marshal(k)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".vapid-*")
	if err != nil {
		return VAPIDKeys{}, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return VAPIDKeys{}, err
	}
	if err := tmp.Close(); err != nil {
		return VAPIDKeys{}, err
	}
	return k, os.Rename(tmp.Name(), path)
}

// DefaultContact is the VAPID "sub" claim without --push-contact: the
// project's address. The daemon's own URL would not do: Apple's push
// service refuses a subject it cannot resolve (an address, localhost, a
// .local name: 403 BadJwtToken), and the URL would tell every browser
// vendor the machine's name on its network or tailnet.
const DefaultContact = "https://github.com/tetherdev/tether"

// ParseContact checks a VAPID contact (--push-contact): a mailto: address
// or an https URL, at a public DNS name, as Apple's push service insists.
// A bare e-mail address is taken as mailto:.
func ParseContact(s string) (string, error) {
	bad := fmt.Errorf("%q is not a contact a push service accepts: a mailto: address or an https URL at a public DNS name", s)
	if rest, ok := strings.CutPrefix(s, "https://"); ok {
		u, err := url.Parse(s)
		if err != nil || rest == "" || u.User != nil || !publicName(u.Hostname()) {
			return "", bad
		}
		return s, nil
	}
	addr, err := mail.ParseAddress(strings.TrimPrefix(s, "mailto:"))
	if err != nil || addr.Name != "" {
		return "", bad
	}
	_, domain, _ := strings.Cut(addr.Address, "@")
	if !publicName(domain) {
		return "", bad
	}
	return "mailto:" + addr.Address, nil
}

// publicName says whether host is a DNS name that may resolve publicly:
// not an address, with a dot, not under a name reserved for local or
// invalid use.
func publicName(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil || !strings.Contains(host, ".") {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, local := range []string{".localhost", ".local", ".invalid", ".test", ".example", ".internal", ".home.arpa"} {
		if strings.HasSuffix(host, local) {
			return false
		}
	}
	return true
}

// Name identifies the channel in logs.
func (w *WebPush) Name() string { return "web push" }

// recordSize is the size of every message sent: webpush-go pads each
// payload to it, so the push service cannot tell one kind from another by
// its length. Its default, 4096 bytes, is refused (413) by Firefox for
// Android's push service, which carries messages over FCM and takes about
// 3 KB (less for some messages, as reported); 2048 bytes is under every
// vendor's limit with room to spare.
const recordSize = 2048

// maxPayload is the most a payload may hold in a message of recordSize:
// its header (salt, record size, key id length, the 65-byte key) and the
// AES-GCM tag take 102 bytes and the padding delimiter one.
const maxPayload = recordSize - 16 - (16 + 4 + 1 + 65) - 1

// fit encodes p with as much of its body (then of its title) as a message
// holds: with --push-detail full a body may hold a whole command. What is
// cut is marked with an ellipsis.
func fit(p wire.PushMessage) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil || len(b) <= maxPayload {
		return b, err
	}
	for _, field := range []*string{&p.Body, &p.Title} {
		full := *field
		*field = ""
		if b, err = json.Marshal(p); err != nil || len(b) > maxPayload {
			continue
		}
		// The longest cut that fits, by bisection: lo bytes fit, hi do
		// not.
		lo, hi := 0, len(full)
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			*field = cut(full, mid)
			if b, err = json.Marshal(p); err == nil && len(b) <= maxPayload {
				lo = mid
			} else {
				hi = mid
			}
		}
		*field = cut(full, lo)
		return json.Marshal(p)
	}
	return nil, fmt.Errorf("a push payload of %d bytes, over %d", len(b), maxPayload)
}

// cut is s's first n bytes, back to a character boundary, and an
// ellipsis; nothing when that leaves no character.
func cut(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n == 0 {
		return ""
	}
	return s[:n] + "…"
}

// How long a push service keeps a message for a phone that is off, by
// kind: a question is moot after an hour, a failure still worth a look
// after a day.
const (
	ttlApproval = 60 * 60
	ttlOther    = 24 * 60 * 60
)

// Send pushes m to every subscription. A subscription the push service
// says is gone (404, 410) is removed; other failures are returned
// together, after every subscription was tried.
func (w *WebPush) Send(ctx context.Context, m Message) error {
	subs, err := w.Subscriptions.PushSubscriptions(ctx)
	if err != nil || len(subs) == 0 {
		return err
	}
	p := wire.PushMessage{Title: m.Title, Body: m.Body, Tag: m.Tag, URL: m.URL, Close: m.Withdraw}
	payload, err := fit(p)
	if err != nil {
		return err
	}
	var client webpush.HTTPClient = http.DefaultClient
	if w.Client != nil {
		client = w.Client
	}
	opts := &webpush.Options{
		HTTPClient: client,
		// webpush-go makes "mailto:" of anything that is not an https URL.
		Subscriber:      strings.TrimPrefix(w.Subscriber, "mailto:"),
		VAPIDPublicKey:  w.Keys.Public,
		VAPIDPrivateKey: w.Keys.Private,
		// The same topic replaces a message not yet delivered: an answered
		// question's withdrawal overtakes the question.
		Topic:      m.Tag,
		TTL:        ttlOther,
		Urgency:    webpush.UrgencyNormal,
		RecordSize: recordSize,
	}
	if m.Kind == "approval_required" || m.Withdraw {
		opts.TTL = ttlApproval
	}
	if m.Priority == "high" {
		opts.Urgency = webpush.UrgencyHigh
	}
	var errs []error
	for _, s := range subs {
		resp, err := webpush.SendNotificationWithContext(ctx, payload, &webpush.Subscription{
			Endpoint: s.Endpoint, Keys: webpush.Keys{P256dh: s.P256dh, Auth: s.Auth},
		}, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("device %s: %w", s.DeviceID, err))
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // drained so the connection is reused; the status says what happened
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
			// The browser unsubscribed, or its subscription expired.
			if err := w.Subscriptions.DeletePushSubscription(ctx, s.Endpoint, ""); err != nil {
				errs = append(errs, err)
			}
		case resp.StatusCode >= 300:
			errs = append(errs, fmt.Errorf("device %s: push service answered %s", s.DeviceID, resp.Status))
		}
	}
	return errors.Join(errs...)
}

// pushTimeout bounds one push service's answer.
const pushTimeout = 10 * time.Second

// NewPushClient is the HTTP client for push services: a bounded wait, no
// redirects (a push service answers where it was asked), and no
// connection to an address of this machine or of a private network,
// tailnets included. A paired device names the endpoint, and a DNS name
// may resolve to any address: the check is on the address connected to.
// Behind a proxy (HTTPS_PROXY) the proxy connects, and the check is its.
func NewPushClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	probe := &http.Request{Method: http.MethodPost, URL: &url.URL{Scheme: "https", Host: "push.example.com"}}
	if proxy, err := t.Proxy(probe); err == nil && proxy == nil {
		d := &net.Dialer{Timeout: pushTimeout, KeepAlive: 30 * time.Second, Control: publicAddress}
		t.DialContext = d.DialContext
	}
	return &http.Client{
		Transport:     t,
		Timeout:       pushTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// sharedAddressSpace is RFC 6598's 100.64.0.0/10, where tailnets number
// their machines.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// publicAddress refuses a connection to an address that is not public
// unicast: loopback, link-local, private, shared (CGNAT) or multicast.
func publicAddress(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	a := ap.Addr().Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() || sharedAddressSpace.Contains(a) {
		return fmt.Errorf("a push endpoint at %s, not a public address", a)
	}
	return nil
}
