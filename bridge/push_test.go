package bridge

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/tetherdev/tether/internal/pushtest"
	"github.com/tetherdev/tether/wire"
)

func TestPushSubscribe(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *Server) { s.VAPIDPublicKey = "BPublicKey" })
	_, c, ack := h.paired()
	svc := pushtest.New(t)
	sub := svc.Subscribe()

	c.Send(wire.TypePushConfig, "cfg", nil)
	var cfg wire.PushConfig
	if c.Expect(wire.TypePushConfigResponse, &cfg); !cfg.Enabled || cfg.VAPIDPublicKey != "BPublicKey" {
		t.Fatalf("push_config = %+v", cfg)
	}
	// The default rule: a push service named by a DNS name, over https.
	good := map[string]any{"endpoint": "https://fcm.googleapis.com/fcm/send/abc", "keys": map[string]any{"p256dh": sub.Keys.P256dh, "auth": sub.Keys.Auth}}
	c.Send(wire.TypePushSubscribe, "sub", good)
	c.Expect(wire.TypePushSubscribeResp, nil)
	subs, _ := h.st.PushSubscriptions(context.Background())
	if len(subs) != 1 || subs[0].DeviceID != ack.DeviceID || subs[0].Endpoint != good["endpoint"] {
		t.Fatalf("stored %+v", subs)
	}

	keys := good["keys"]
	for _, bad := range []struct {
		name    string
		payload map[string]any
	}{
		{"no endpoint", map[string]any{"keys": keys}},
		{"plain http", map[string]any{"endpoint": "http://push.example.com/x", "keys": keys}},
		{"an address of the network", map[string]any{"endpoint": "https://10.0.0.1/x", "keys": keys}},
		{"loopback", map[string]any{"endpoint": sub.Endpoint, "keys": keys}},
		{"a name of this machine", map[string]any{"endpoint": "https://localhost/x", "keys": keys}},
		{"credentials in the URL", map[string]any{"endpoint": "https://u:p@push.example.com/x", "keys": keys}},
		{"p256dh not a point", map[string]any{"endpoint": "https://push.example.com/x", "keys": map[string]any{"p256dh": "AAAA", "auth": sub.Keys.Auth}}},
		{"auth too short", map[string]any{"endpoint": "https://push.example.com/x", "keys": map[string]any{"p256dh": sub.Keys.P256dh, "auth": "AAAA"}}},
		{"keys not an object", map[string]any{"endpoint": "https://push.example.com/x", "keys": "x"}},
	} {
		c.Send(wire.TypePushSubscribe, "bad", bad.payload)
		var ep wire.ErrorPayload
		if env := c.Expect(wire.TypeError, &ep); env.ID != "bad" || ep.Code != wire.CodeInvalidMessage {
			t.Errorf("%s: %s %+v", bad.name, env.ID, ep)
		}
	}

	// Another device cannot take this one's subscription away.
	_, other, _ := h.paired()
	other.Send(wire.TypePushUnsubscribe, "u", map[string]any{"endpoint": good["endpoint"]})
	other.Expect(wire.TypePushUnsubscribeResp, nil)
	if subs, _ := h.st.PushSubscriptions(context.Background()); len(subs) != 1 {
		t.Fatalf("another device unsubscribed this one: %+v", subs)
	}
	c.Send(wire.TypePushUnsubscribe, "u", map[string]any{"endpoint": good["endpoint"]})
	c.Expect(wire.TypePushUnsubscribeResp, nil)
	if subs, _ := h.st.PushSubscriptions(context.Background()); len(subs) != 0 {
		t.Fatalf("after unsubscribing: %+v", subs)
	}
}

func TestPushEndpointRuleAndDisabled(t *testing.T) {
	t.Parallel()
	// A daemon told to allow a self-hosted push service on loopback.
	h := newHarness(t, func(s *Server) {
		s.VAPIDPublicKey = "BPublicKey"
		s.PushEndpointAllowed = func(u *url.URL) bool { return u.Hostname() == "127.0.0.1" }
	})
	_, c, _ := h.paired()
	sub := pushtest.New(t).Subscribe()
	c.Send(wire.TypePushSubscribe, "sub", sub)
	c.Expect(wire.TypePushSubscribeResp, nil)

	off := newHarness(t, nil)
	_, c2, _ := off.paired()
	c2.Send(wire.TypePushConfig, "cfg", nil)
	var cfg wire.PushConfig
	if c2.Expect(wire.TypePushConfigResponse, &cfg); cfg.Enabled || cfg.VAPIDPublicKey != "" {
		t.Fatalf("push_config without Web Push = %+v", cfg)
	}
	c2.Send(wire.TypePushSubscribe, "sub", sub)
	var ep wire.ErrorPayload
	if env := c2.Expect(wire.TypeError, &ep); env.ID != "sub" || ep.Code != wire.CodeInvalidMessage {
		t.Fatalf("subscribing without Web Push: %+v", ep)
	}
}

// FuzzPushSubscription: whatever a device sends as a subscription, the
// check answers INVALID_MESSAGE or accepts it; it never panics.
func FuzzPushSubscription(f *testing.F) {
	f.Add(`{"endpoint":"https://fcm.googleapis.com/fcm/send/abc","keys":{"p256dh":"BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM","auth":"tBHItJI5svbpez7KI4CCXg"}}`)
	f.Add(`{"endpoint":"https://[::1]:8443/x","keys":{}}`)
	f.Add(`{"endpoint":"https://%zz","keys":{"p256dh":"=","auth":"=="}}`)
	s := &Server{}
	f.Fuzz(func(t *testing.T, payload string) {
		var p wire.PushSubscription
		err := wire.DecodePayload(wire.Envelope{Type: wire.TypePushSubscribe, Payload: []byte(payload)}, &p)
		if err == nil {
			err = s.checkPushSubscription(p)
		}
		var we *wire.Error
		if err != nil && (!errors.As(err, &we) || we.Code != wire.CodeInvalidMessage) {
			t.Fatalf("%q: %v", payload, err)
		}
	})
}
