package bridge

import (
	"crypto/ecdh"
	"encoding/base64"
	"errors"
	"net/netip"
	"net/url"
	"strings"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// What a subscription may be.
const (
	maxPushEndpoint = 2048
	pushAuthSecret  = 16 // bytes of keys.auth
	badPushEndpoint = "endpoint must be an https URL of a push service, named by a host name"
	badPushKeys     = "keys.p256dh must be a P-256 public key and keys.auth 16 bytes, both base64url"
	noPushEndpoint  = "endpoint is required"
)

func (c *conn) pushConfig(env wire.Envelope) error {
	c.send(wire.TypePushConfigResponse, env.ID, wire.PushConfig{Enabled: c.s.VAPIDPublicKey != "", VAPIDPublicKey: c.s.VAPIDPublicKey})
	return nil
}

func (c *conn) pushSubscribe(env wire.Envelope) error {
	if c.s.VAPIDPublicKey == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "Web Push is off on this daemon (--web-push=false)")
	}
	var p wire.PushSubscription
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if err := c.s.checkPushSubscription(p); err != nil {
		return err
	}
	err := c.s.Store.SavePushSubscription(c.ctx, store.PushSubscription{
		DeviceID: c.deviceID(), Endpoint: p.Endpoint, P256dh: p.Keys.P256dh, Auth: p.Keys.Auth, CreatedAt: c.s.now(),
	})
	if errors.Is(err, store.ErrNotFound) {
		return wire.Errorf(wire.CodeAuthFailed, "this device is revoked")
	}
	if err != nil {
		return err
	}
	c.send(wire.TypePushSubscribeResp, env.ID, wire.PushSubscribed{Subscribed: true})
	return nil
}

func (c *conn) pushUnsubscribe(env wire.Envelope) error {
	var p wire.PushSubscription
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.Endpoint == "" {
		return wire.Errorf(wire.CodeInvalidMessage, noPushEndpoint)
	}
	// Only the device's own: a device cannot silence another's browser.
	if err := c.s.Store.DeletePushSubscription(c.ctx, p.Endpoint, c.deviceID()); err != nil {
		return err
	}
	c.send(wire.TypePushUnsubscribeResp, env.ID, wire.PushSubscribed{Subscribed: false})
	return nil
}

// checkPushSubscription refuses what is not a browser's subscription. The
// daemon will POST to the endpoint: it must be https and, unless
// PushEndpointAllowed says otherwise, name a host by a DNS name (every
// vendor's push service does), so that a paired device cannot aim the
// daemon at an address of its network (notify.NewPushClient checks the
// address a name resolves to).
func (s *Server) checkPushSubscription(p wire.PushSubscription) error {
	if p.Endpoint == "" {
		return wire.Errorf(wire.CodeInvalidMessage, noPushEndpoint)
	}
	u, err := url.Parse(p.Endpoint)
	if err != nil || len(p.Endpoint) > maxPushEndpoint || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return wire.Errorf(wire.CodeInvalidMessage, badPushEndpoint)
	}
	allowed := s.PushEndpointAllowed
	if allowed == nil {
		allowed = publicPushHost
	}
	if !allowed(u) {
		return wire.Errorf(wire.CodeInvalidMessage, badPushEndpoint)
	}
	key, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(p.Keys.P256dh, "="))
	if err != nil {
		return wire.Errorf(wire.CodeInvalidMessage, badPushKeys)
	}
	if _, err := ecdh.P256().NewPublicKey(key); err != nil {
		return wire.Errorf(wire.CodeInvalidMessage, badPushKeys)
	}
	auth, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(p.Keys.Auth, "="))
	if err != nil || len(auth) != pushAuthSecret {
		return wire.Errorf(wire.CodeInvalidMessage, badPushKeys)
	}
	return nil
}

// publicPushHost accepts a host named by a DNS name with a dot, not an IP
// address nor a name of this machine.
func publicPushHost(u *url.URL) bool {
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	return strings.Contains(host, ".") && !strings.HasSuffix(host, ".localhost") && !strings.HasSuffix(host, ".local")
}
