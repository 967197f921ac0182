package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tetherdev/tether/internal/pushtest"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// pushFixture is a store with paired devices and a WebPush channel on it,
// whose subscriptions live on the test's push service; with a Dispatcher
// sending to it from the event log, when made by newPushFixture.
type pushFixture struct {
	st  *store.Store
	log *session.EventLog
	svc *pushtest.Service
	wp  *WebPush
}

// newPushChannel is a pushFixture without an event log: its tests call
// the channel's Send.
func newPushChannel(t *testing.T, devices ...string) *pushFixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	for _, id := range devices {
		code := []byte(fmt.Sprintf("%-32s", id))
		st.CreatePairingCode(ctx, store.PairingCode{Hash: code, Kind: store.CodeOnce, CreatedAt: now, ExpiresAt: now.Add(time.Minute)})
		if _, err := st.ClaimPairingCode(ctx, code, now, store.Device{ID: id, Name: id, TokenHash: []byte("tok-" + id)}); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := LoadVAPIDKeys(filepath.Join(t.TempDir(), "vapid.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := &pushFixture{st: st, svc: pushtest.New(t)}
	f.wp = &WebPush{Subscriptions: st, Keys: keys, Subscriber: DefaultContact, Client: f.svc.Client()}
	return f
}

func newPushFixture(t *testing.T, devices ...string) *pushFixture {
	t.Helper()
	f := newPushChannel(t, devices...)
	ctx, cancel := context.WithCancel(context.Background())
	l, err := session.NewEventLog(ctx, f.st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f.log = l
	d := &Dispatcher{Events: l, Channels: []Channel{f.wp}, WebURL: "https://devbox:7420/"}
	logged, sent := make(chan struct{}), make(chan struct{})
	go func() { l.Run(ctx); close(logged) }()
	go func() { d.Run(ctx); close(sent) }()
	// Cleanups run last first: the store closes after these.
	t.Cleanup(func() { cancel(); <-sent; <-logged })
	f.waitLive(t, devices[0])
	return f
}

// waitLive appends probe notifications until one reaches a subscription of
// device: the dispatcher then follows the log. The probe's subscription
// goes; a probe still queued is skipped by next.
func (f *pushFixture) waitLive(t *testing.T, device string) {
	t.Helper()
	probe := f.subscribe(t, device)
	for i := 0; ; i++ {
		f.log.Append(probeNote(i))
		select {
		case p := <-f.svc.Pushes():
			if p.Endpoint != probe.Endpoint {
				t.Fatalf("a push to %s before any subscription", p.Endpoint)
			}
			if err := f.st.DeletePushSubscription(context.Background(), probe.Endpoint, ""); err != nil {
				t.Fatal(err)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if i > 200 {
			t.Fatal("the dispatcher never went live")
		}
	}
}

// next returns the next push that is not a probe.
func (f *pushFixture) next(t *testing.T) pushtest.Push {
	t.Helper()
	for {
		p := f.svc.Next(10 * time.Second)
		if !strings.HasSuffix(decodePush(t, p).URL, "session=probe") {
			return p
		}
	}
}

func (f *pushFixture) subscribe(t *testing.T, device string) *pushtest.Subscription {
	t.Helper()
	sub := f.svc.Subscribe()
	if err := f.st.SavePushSubscription(context.Background(), store.PushSubscription{
		DeviceID: device, Endpoint: sub.Endpoint, P256dh: sub.Keys.P256dh, Auth: sub.Keys.Auth, CreatedAt: time.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	return sub
}

func decodePush(t *testing.T, p pushtest.Push) wire.PushMessage {
	t.Helper()
	var out wire.PushMessage
	if err := json.Unmarshal(p.Payload, &out); err != nil {
		t.Fatalf("push payload %q: %v", p.Payload, err)
	}
	return out
}

// TestWebPushApprovalAndItsWithdrawal: an approval's notification reaches
// every subscribed browser encrypted to its keys and signed by the
// daemon's VAPID key, says nothing of the command, and opens the approval;
// answering it sends a close under the same topic, so a phone that was off
// gets the close in place of the question, with a quiet notice of the
// answer (a push must show something); so does a question withdrawn.
func TestWebPushApprovalAndItsWithdrawal(t *testing.T) {
	t.Parallel()
	f := newPushFixture(t, "phone", "tablet")
	subs := map[string]bool{f.subscribe(t, "phone").Endpoint: true, f.subscribe(t, "tablet").Endpoint: true}
	f.log.Append(note("n1", "approval_required", "Approval needed: Bash", "Run rm -rf build", map[string]any{"tool_call_id": "toolu_1"}))

	var tag string
	for range 2 {
		p := f.next(t)
		if !subs[p.Endpoint] {
			t.Fatalf("push to %s, which nobody subscribed", p.Endpoint)
		}
		delete(subs, p.Endpoint)
		got := decodePush(t, p)
		if got.Title != "Approval needed: Bash" || got.Body == "" || got.Close || got.URL != "https://devbox:7420/#approval=toolu_1&session=s1" {
			t.Fatalf("approval push = %+v", got)
		}
		if strings.Contains(string(p.Payload), "rm -rf") {
			t.Fatalf("the push carries the command: %s", p.Payload)
		}
		if p.Topic != got.Tag || p.Urgency != "high" || p.TTL != "3600" || p.Subscriber != DefaultContact {
			t.Fatalf("push headers: topic %q tag %q urgency %q ttl %q sub %q", p.Topic, got.Tag, p.Urgency, p.TTL, p.Subscriber)
		}
		tag = got.Tag
	}

	f.log.Append(session.Entry{SessionID: "s1", Type: wire.TypeApprovalResolved, Payload: wire.ApprovalResolved{SessionID: "s1", ToolCallID: "toolu_1", Decision: "approved"}})
	for range 2 {
		p := f.next(t)
		got := decodePush(t, p)
		want := wire.PushMessage{Title: "Approval answered", Body: "Approved.", Tag: tag, URL: "https://devbox:7420/#session=s1", Close: true}
		if got != want || p.Topic != tag || p.TTL != "3600" {
			t.Fatalf("withdrawal push = %+v (topic %q, TTL %s), want %+v", got, p.Topic, p.TTL, want)
		}
	}
	f.log.Append(session.Entry{SessionID: "s1", Type: wire.TypeApprovalCancelled, Payload: wire.ApprovalCancelled{SessionID: "s1", ToolCallID: "toolu_2", Reason: "timeout"}})
	for range 2 {
		if got := decodePush(t, f.next(t)); !got.Close || got.Title != "Approval withdrawn" || got.Tag == tag {
			t.Fatalf("a cancelled question's push = %+v", got)
		}
	}
}

// TestWebPushGoneAndRevoked: a subscription the push service says is gone
// (410) is removed; a revoked device's browsers get nothing.
func TestWebPushGoneAndRevoked(t *testing.T) {
	t.Parallel()
	f := newPushFixture(t, "phone", "tablet", "laptop")
	gone := f.subscribe(t, "phone")
	f.svc.Answer(gone, http.StatusGone)
	kept := f.subscribe(t, "tablet")
	f.log.Append(note("n1", "error", "Session failed", "boom", nil))
	if p := f.next(t); p.Endpoint != kept.Endpoint {
		t.Fatalf("push to %s", p.Endpoint)
	}
	ctx := context.Background()
	waitFor(t, func() bool {
		subs, _ := f.st.PushSubscriptions(ctx)
		return len(subs) == 1 && subs[0].Endpoint == kept.Endpoint
	})

	if err := f.st.RevokeDevice(ctx, "tablet", time.Now()); err != nil {
		t.Fatal(err)
	}
	// Each notification goes to every subscription before the next is
	// taken: of the two pushes n2 and n3 make first, a push of n2 to the
	// revoked tablet would be one.
	laptop := f.subscribe(t, "laptop")
	f.log.Append(note("n2", "error", "Session failed", "boom", nil))
	f.log.Append(note("n3", "error", "Session failed", "boom", nil))
	for range 2 {
		if p := f.next(t); p.Endpoint != laptop.Endpoint {
			t.Fatalf("a push to %s after its device was revoked", p.Endpoint)
		}
	}
}

// waitFor polls cond (the store, written by the dispatcher's goroutine)
// until it holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("condition not met within 10 s")
		}
	}
}

// TestWebPushFitsEveryMessage: every message is padded to the same 2048
// bytes, which every vendor's push service takes (Firefox for Android's
// refuses 4096), and a body longer than that (--push-detail full) is
// shortened, not lost.
func TestWebPushFitsEveryMessage(t *testing.T) {
	t.Parallel()
	f := newPushChannel(t, "phone")
	f.subscribe(t, "phone")
	wp := f.wp

	// Escaped in JSON, each "<" takes six bytes; "é" is two bytes.
	long := strings.Repeat("<é", 3000)
	for _, m := range []Message{
		{Kind: "error", Title: "Session failed", Body: "Open tether to see why.", Tag: "s-1"},
		{Kind: "approval_required", Title: "Approval needed: Bash", Body: "Run " + long, Tag: "a-1", URL: "https://devbox:7420/#session=s1"},
		{Kind: "turn_complete", Title: long, Body: long, Tag: "s-1"},
		{Tag: "a-1", Withdraw: true},
	} {
		if err := wp.Send(context.Background(), m); err != nil {
			t.Fatalf("sending %.40q: %v", m.Body, err)
		}
		p := f.svc.Next(10 * time.Second)
		got := decodePush(t, p)
		if p.Size != 2048 {
			t.Errorf("a message of %d bytes, want 2048", p.Size)
		}
		if !utf8.ValidString(got.Title) || !utf8.ValidString(got.Body) || !strings.HasPrefix(m.Body, strings.TrimSuffix(got.Body, "…")) {
			t.Errorf("body %.40q… sent as %.40q…", m.Body, got.Body)
		}
		if m.Body == long && (got.Title == "" || got.Body != "") {
			t.Errorf("a long title and body: title %d bytes, body %d: the body goes first", len(got.Title), len(got.Body))
		}
		if strings.HasPrefix(m.Body, "Run ") && (!strings.HasSuffix(got.Body, "…") || len(p.Payload) < 1900 || got.URL != m.URL) {
			t.Errorf("a long body sent as %d bytes of payload %.20q…, url %q", len(p.Payload), got.Body, got.URL)
		}
	}
}

// TestPushContact: --push-contact takes what Apple's push service takes
// as a VAPID subject, and a mailto: contact reaches the service as one.
func TestPushContact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ops@example.com":                  "mailto:ops@example.com",
		"mailto:ops@example.com":           "mailto:ops@example.com",
		"https://tether.example.org/ops":   "https://tether.example.org/ops",
		"https://github.com/tetherdev":     "https://github.com/tetherdev",
		"mailto:me@devbox.local":           "",
		"mailto:me@localhost":              "",
		"Ops <ops@example.com>":            "",
		"https://192.168.1.20:7420/":       "",
		"https://devbox:7420/":             "",
		"https://devbox.tail1234.ts.net/":  "https://devbox.tail1234.ts.net/",
		"https://devbox.tail1234.invalid/": "",
		"http://tether.example.org/":       "",
		"https://user@tether.example.org/": "",
		"mailto:mailto:ops@example.com":    "",
		"":                                 "",
	} {
		got, err := ParseContact(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("ParseContact(%q) = %q, %v; want %q", in, got, err, want)
		}
	}

	f := newPushChannel(t, "phone")
	f.subscribe(t, "phone")
	f.wp.Subscriber, _ = ParseContact("ops@example.com")
	if err := f.wp.Send(context.Background(), Message{Kind: "error", Title: "Session failed", Tag: "s-1"}); err != nil {
		t.Fatal(err)
	}
	if p := f.svc.Next(10 * time.Second); p.Subscriber != "mailto:ops@example.com" {
		t.Fatalf("sub %q", p.Subscriber)
	}
}

// TestPushClientReachesNoPrivateAddress: whatever a push endpoint's name
// resolves to, the daemon's client connects to no address of this machine
// or of a private network.
func TestPushClientReachesNoPrivateAddress(t *testing.T) {
	t.Parallel()
	if p, _ := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: "https", Host: "push.example.com"}}); p != nil {
		t.Skip("behind a proxy, the proxy connects")
	}
	// A connection is refused before it is made: nothing needs to listen.
	client := NewPushClient()
	for _, host := range []string{"127.0.0.1", "::1", "10.1.2.3", "192.168.1.20", "100.101.102.103", "169.254.169.254", "fd7a:115c:a1e0::1"} {
		resp, err := client.Post("https://"+net.JoinHostPort(host, "443")+"/push/x", "application/octet-stream", nil)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: %s", host, resp.Status)
		} else if !strings.Contains(err.Error(), "not a public address") {
			t.Errorf("%s: %v", host, err)
		}
	}
	for _, public := range []string{"203.0.113.1:443", "[2001:4860::1]:443"} {
		if err := publicAddress("tcp", public, nil); err != nil {
			t.Errorf("%s: %v", public, err)
		}
	}
}

func TestLoadVAPIDKeysKeepsThePair(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "vapid.json")
	first, err := LoadVAPIDKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadVAPIDKeys(path)
	if err != nil || again != first || first.Public == "" {
		t.Fatalf("second load %+v, %v; first %+v", again, err, first)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", fi.Mode(), err)
	}
	os.WriteFile(path, []byte("{}"), 0o600)
	if _, err := LoadVAPIDKeys(path); err == nil {
		t.Fatal("an empty key file was taken")
	}
}
