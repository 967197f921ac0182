package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

func TestPairThenReconnectWithDeviceToken(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, nil)
		code := h.code(store.CodeOnce)
		c := h.dial(nil)
		env := c.Auth(code, map[string]any{"device_name": "Ana's phone"})
		if env.Type != wire.TypeConnectionAck || env.ID != "auth-1" {
			t.Fatalf("got %s id=%q %s", env.Type, env.ID, env.Payload)
		}
		// Every field the spec lists, with its JSON type.
		var raw map[string]any
		json.Unmarshal(env.Payload, &raw)
		for field, kind := range map[string]string{
			"server_version": "string", "protocol_version": "string", "supported_agents": "array",
			"connection_mode": "string", "connection_mode_description": "string", "bridge_url": "string",
			"requires_health_verification": "bool", "active_sessions": "array", "device_id": "string",
			"device_token": "string", "device_name": "string",
		} {
			if got := jsonKind(raw[field]); got != kind {
				t.Errorf("connection_ack.%s is %s, want %s", field, got, kind)
			}
		}
		var ack wire.ConnectionAck
		json.Unmarshal(env.Payload, &ack)
		if ack.ConnectionMode != pairing.ModeLocalOnly || ack.BridgeURL != h.wsURL || ack.ProtocolVersion != wire.ProtocolVersion ||
			ack.DeviceName != "Ana's phone" || ack.RequiresHealthVerification {
			t.Fatalf("ack = %+v", ack)
		}
		c.Close()

		c2 := h.dial(nil)
		env = c2.Auth(ack.DeviceToken, nil)
		var ack2 wire.ConnectionAck
		if env.Type != wire.TypeConnectionAck || json.Unmarshal(env.Payload, &ack2) != nil {
			t.Fatalf("reconnect: %s %s", env.Type, env.Payload)
		}
		if ack2.DeviceID != ack.DeviceID || ack2.DeviceToken != "" {
			t.Fatalf("reconnect ack: device %q token %q, want device %q and no new token", ack2.DeviceID, ack2.DeviceToken, ack.DeviceID)
		}
		dev, err := h.st.Device(context.Background(), ack.DeviceID)
		if err != nil || dev.ClientVersion != "1.0.0" || dev.Platform != "test" || dev.LastAddr != "127.0.0.1" {
			t.Fatalf("device record = %+v, %v", dev, err)
		}

		// The code worked once.
		c3 := h.dial(nil)
		var ce wire.ConnectionError
		c3.Send(wire.TypeAuth, "auth-3", map[string]any{"token": code})
		if env := c3.Expect(wire.TypeConnectionError, &ce); ce.Code != wire.CodeAuthFailed || env.ID != "auth-3" {
			t.Fatalf("reused code: %+v id=%q", ce, env.ID)
		}
		if code := c3.ExpectClose(); code != websocket.ClosePolicyViolation {
			t.Fatalf("close code = %d", code)
		}
	})
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case nil:
		return "missing"
	}
	return "?"
}

func TestAppCodeReusedAsToken(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, nil)
		code := h.code(store.CodeApp)
		var ack wire.ConnectionAck
		h.dial(nil).Auth(code, nil)
		c := h.dial(nil)
		if env := c.Auth(code, nil); env.Type != wire.TypeConnectionAck || json.Unmarshal(env.Payload, &ack) != nil {
			t.Fatalf("second use of an app code: %s %s", env.Type, env.Payload)
		}
		if ack.DeviceToken != "" {
			t.Fatalf("reconnect with the app code issued a token")
		}
	})
}

func TestExpiredCodeRefused(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, nil)
		code := h.code(store.CodeOnce)
		h.clock.advance(pairing.DefaultTTL + time.Second)
		c := h.dial(nil)
		var ce wire.ConnectionError
		c.Send(wire.TypeAuth, "", map[string]any{"token": code})
		c.Expect(wire.TypeConnectionError, &ce)
		if ce.Code != wire.CodeAuthFailed {
			t.Fatalf("expired code: %+v", ce)
		}
	})
}

func TestDeviceChangedClosesRevokedDevice(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, nil)
		token, c, ack := h.paired()
		_, other, _ := h.paired()
		// Revoke as `tether devices revoke` does: in the database, then
		// the daemon is told through its control socket.
		if err := h.st.RevokeDevice(context.Background(), ack.DeviceID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := h.srv.DeviceChanged(context.Background(), ack.DeviceID); err != nil {
			t.Fatal(err)
		}
		var ce wire.ConnectionError
		c.Expect(wire.TypeConnectionError, &ce)
		if code := c.ExpectClose(); code != websocket.ClosePolicyViolation {
			t.Fatalf("close code %d", code)
		}
		if ce.Code != wire.CodeAuthFailed || !strings.Contains(ce.Message, "revoked") {
			t.Fatalf("revocation error = %+v", ce)
		}
		c2 := h.dial(nil)
		if env := c2.Auth(token, nil); env.Type != wire.TypeConnectionError {
			t.Fatalf("revoked token accepted: %s", env.Type)
		}
		// The other device stays connected.
		other.Send(wire.TypeHeartbeatPing, "p", map[string]any{})
		other.Expect(wire.TypeHeartbeatPong, nil)
		// A change that is not a revocation closes nothing; an unknown id
		// is an error.
		if err := h.srv.DeviceChanged(context.Background(), "dev_nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown device: %v", err)
		}
	})
}

// TestFailedAuthIsRateLimited: failures from an address are answered
// RATE_LIMITED after the burst, but a valid token or code from the same
// address still gets in: the token is checked first, and only failures
// count (ten bad tokens from a shared NAT must not lock the user out).
func TestFailedAuthIsRateLimited(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, func(s *Server) { s.Limiter = &pairing.AttemptLimiter{Burst: 3, Every: time.Hour} })
		bad := func() string {
			var ce wire.ConnectionError
			c := h.dial(nil)
			c.Send(wire.TypeAuth, "", map[string]any{"token": "tpc_wrong"})
			c.Expect(wire.TypeConnectionError, &ce)
			return ce.Code
		}
		for i := range 3 {
			if code := bad(); code != wire.CodeAuthFailed {
				t.Fatalf("attempt %d: %s", i, code)
			}
		}
		if code := bad(); code != wire.CodeRateLimited {
			t.Fatalf("after the burst: %s, want RATE_LIMITED", code)
		}
		// A valid code and then the device's token still get in, and cost
		// nothing: the next bad one is still limited, not a fresh burst.
		env := h.dial(nil).Auth(h.code(store.CodeOnce), nil)
		var ack wire.ConnectionAck
		if env.Type != wire.TypeConnectionAck || wire.DecodePayload(env, &ack) != nil {
			t.Fatalf("valid code while limited: %s %s", env.Type, env.Payload)
		}
		for range 5 {
			if env := h.dial(nil).Auth(ack.DeviceToken, nil); env.Type != wire.TypeConnectionAck {
				t.Fatalf("valid token while limited: %s %s", env.Type, env.Payload)
			}
		}
		if code := bad(); code != wire.CodeRateLimited {
			t.Fatalf("bad token after good ones: %s, want RATE_LIMITED", code)
		}
	})
}

func TestBeforeAuth(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		tests := []struct {
			name  string
			frame string
			code  string
		}{
			{"other type first", `{"type":"heartbeat_ping","id":"p"}`, wire.CodeAuthFailed},
			{"malformed JSON first", `{"type":`, wire.CodeAuthFailed},
			{"no type", `{"payload":{"token":"x"}}`, wire.CodeAuthFailed},
			{"auth with a wrong payload", `{"type":"auth","payload":{"token":7}}`, wire.CodeAuthFailed},
			{"newer major protocol", `{"type":"auth","payload":{"token":"x","protocol_version":"2.0"}}`, wire.CodeVersionIncompatible},
			{"unreadable protocol", `{"type":"auth","payload":{"token":"x","protocol_version":"one"}}`, wire.CodeVersionIncompatible},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarnessOver(t, transport, nil)
				c := h.dial(nil)
				c.SendRaw(tt.frame)
				var ce wire.ConnectionError
				c.Expect(wire.TypeConnectionError, &ce)
				if ce.Code != tt.code || ce.Message == "" {
					t.Fatalf("got %+v, want %s", ce, tt.code)
				}
				if code := c.ExpectClose(); code != websocket.ClosePolicyViolation {
					t.Fatalf("close code %d", code)
				}
			})
		}
	})
}

func TestAuthTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *Server) { s.AuthTimeout = 200 * time.Millisecond })
	c := h.dial(nil)
	var ce wire.ConnectionError
	c.Expect(wire.TypeConnectionError, &ce)
	if ce.Code != wire.CodeAuthFailed || !strings.Contains(ce.Message, "No auth") {
		t.Fatalf("got %+v", ce)
	}
	c.ExpectClose()
}

func TestRecursorAuthShapeAccepted(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, nil)
		c := h.dial(nil)
		// Exactly what the ReCursor app sends: a zone-less timestamp, purpose,
		// no protocol_version, keys in its own order.
		c.SendRaw(`{"type":"auth","payload":{"token":"` + h.code(store.CodeOnce) + `","client_version":"0.1.0","platform":"flutter","purpose":"probe"},"timestamp":"2026-03-21T05:34:46.123456","id":"test-1"}`)
		if env := c.Read(); env.Type != wire.TypeConnectionAck || env.ID != "test-1" {
			t.Fatalf("got %s %q", env.Type, env.ID)
		}
		// heartbeat_ping without an id, payload {}.
		c.SendRaw(`{"type":"heartbeat_ping","timestamp":"2026-03-21T05:34:46.123456Z","payload":{}}`)
		if env := c.Expect(wire.TypeHeartbeatPong, nil); env.ID != "" || env.Timestamp == "" {
			t.Fatalf("pong = %+v", env)
		}
	})
}

func TestMalformedInputAfterAuth(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, nil)
		_, c, _ := h.paired()
		tests := []struct {
			name, frame, code, id string
		}{
			{"not JSON", `hello`, wire.CodeInvalidMessage, ""},
			{"truncated", `{"type":"heartbeat_ping"`, wire.CodeInvalidMessage, ""},
			{"array", `[{"type":"heartbeat_ping"}]`, wire.CodeInvalidMessage, ""},
			{"missing type", `{"id":"m1"}`, wire.CodeInvalidMessage, "m1"},
			{"numeric type", `{"type":3,"id":"m2"}`, wire.CodeInvalidMessage, "m2"},
			{"type an object", `{"type":{"x":1},"id":"m2b"}`, wire.CodeInvalidMessage, "m2b"},
			{"numeric id", `{"type":"heartbeat_ping","id":9}`, wire.CodeInvalidMessage, ""},
			{"unknown type", `{"type":"teleport","id":"m3"}`, wire.CodeUnknownType, "m3"},
			{"payload not an object", `{"type":"health_check","id":"m4","payload":[1]}`, wire.CodeInvalidMessage, "m4"},
			{"health_check wrong field type", `{"type":"health_check","id":"m5","payload":{"timestamp":5}}`, wire.CodeInvalidMessage, "m5"},
			{"health_check capabilities not array", `{"type":"health_check","id":"m6","payload":{"client_capabilities":"x"}}`, wire.CodeInvalidMessage, "m6"},
			{"acknowledge_warning wrong field type", `{"type":"acknowledge_warning","id":"m7","payload":{"warning_code":1}}`, wire.CodeInvalidMessage, "m7"},
			{"acknowledge_warning with nothing to acknowledge", `{"type":"acknowledge_warning","id":"m8","payload":{"warning_code":"DIRECT_PUBLIC_CONNECTION","acknowledged":true}}`, wire.CodeInvalidMessage, "m8"},
			{"auth again", `{"type":"auth","id":"m9","payload":{"token":"x"}}`, wire.CodeUnknownType, "m9"},
		}
		for _, tt := range tests {
			c.SendRaw(tt.frame)
			var ep wire.ErrorPayload
			env := c.Expect(wire.TypeError, &ep)
			if ep.Code != tt.code || !ep.Recoverable || ep.Message == "" || env.ID != tt.id {
				t.Errorf("%s: got id=%q %+v, want %s id=%q", tt.name, env.ID, ep, tt.code, tt.id)
			}
			// The connection is still fine.
			c.Send(wire.TypeHeartbeatPing, "alive", nil)
			if env := c.Expect(wire.TypeHeartbeatPong, nil); env.ID != "alive" {
				t.Fatalf("%s: pong id %q", tt.name, env.ID)
			}
		}
		if transport != overWebSocket {
			return
		}
		// A binary frame is an error too, and the connection survives it.
		c.WS.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"heartbeat_ping"}`))
		var ep wire.ErrorPayload
		if c.Expect(wire.TypeError, &ep); ep.Code != wire.CodeInvalidMessage {
			t.Fatalf("binary frame: %+v", ep)
		}
	})
}

func TestFrameOverReadLimitClosesWith1009(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *Server) { s.ReadLimit = 1024 })
	_, c, _ := h.paired()
	c.SendRaw(`{"type":"heartbeat_ping","payload":{"pad":"` + strings.Repeat("x", 2000) + `"}}`)
	if code := c.ExpectClose(); code != websocket.CloseMessageTooBig {
		t.Fatalf("close code %d, want 1009", code)
	}
}

func TestOriginCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, tt := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{h.srv.Origins[0], true},
		{"https://evil.example", false},
		{"null", false},
		{strings.Replace(h.srv.Origins[0], "https", "http", 1), false},
	} {
		header := http.Header{}
		if tt.origin != "" {
			header.Set("Origin", tt.origin)
		}
		ws, resp, err := h.dialer.Dial(h.wsURL, header)
		if tt.ok != (err == nil) {
			t.Errorf("origin %q: err=%v, want ok=%v", tt.origin, err, tt.ok)
		}
		if err == nil {
			ws.Close()
		} else if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("origin %q: response %v, want 403", tt.origin, resp)
		}
	}
}

func TestHealthCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, c2, _ := h.paired()
	// The server pings right behind the ack; the client answers it while
	// reading this pong, and the server reads that answer before the
	// health_check sent after it, so it reports a measured latency.
	c2.Send(wire.TypeHeartbeatPing, "p", nil)
	c2.Expect(wire.TypeHeartbeatPong, nil)

	c2.Send(wire.TypeHealthCheck, "health-1", map[string]any{
		"timestamp": wire.Timestamp(time.Now()), "client_nonce": "n-1",
		"client_capabilities": []string{"health_v1", "acknowledgment_v1"},
	})
	var hs wire.HealthStatus
	env := c2.Expect(wire.TypeHealthStatus, &hs)
	if env.ID != "health-1" || hs.Status != "healthy" || !hs.Ready || hs.RequiresAcknowledgment ||
		hs.Checks != (wire.HealthChecks{TLSValid: true, ClockSync: true, VersionCompatible: true, TokenPermissions: true}) ||
		len(hs.Warnings) != 0 || hs.ClientNonce != "n-1" || hs.ConnectionMode != pairing.ModeLocalOnly || hs.ClockSkewMS == nil ||
		hs.LatencyMS == nil {
		t.Fatalf("health = %+v", hs)
	}
	if _, err := time.Parse(time.RFC3339Nano, hs.ServerTimestamp); err != nil {
		t.Fatalf("server_timestamp %q", hs.ServerTimestamp)
	}

	// A clock ten minutes off.
	c2.Send(wire.TypeHealthCheck, "health-2", map[string]any{"timestamp": wire.Timestamp(time.Now().Add(-10 * time.Minute))})
	c2.Expect(wire.TypeHealthStatus, &hs)
	if hs.Checks.ClockSync || hs.Status != "warning" || hs.Warnings[0] != wire.WarnClockSkew || *hs.ClockSkewMS < 590_000 || !hs.Ready {
		t.Fatalf("skewed health = %+v", hs)
	}
}

func TestHealthCheckFailures(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, func(s *Server) { s.MinClientVersion = "2.0.0" })
		_, c, ack := h.paired()
		// Certificate near its end.
		h.clock.advance(time.Until(h.srv.Certificate.NotAfter) - time.Hour)
		c.Send(wire.TypeHealthCheck, "h", map[string]any{"timestamp": wire.Timestamp(h.clock.now())})
		var hs wire.HealthStatus
		c.Expect(wire.TypeHealthStatus, &hs)
		if hs.Checks.TLSValid || hs.Checks.VersionCompatible || !hs.Checks.ClockSync || !hs.Checks.TokenPermissions || hs.Status != "warning" ||
			hs.WarningDetails[wire.WarnCertExpiring] == "" || hs.WarningDetails[wire.WarnClientVersion] == "" {
			t.Fatalf("health = %+v", hs)
		}
		// A revoked device: token_permissions false, not ready. (Watch closes
		// the connection right after; the health answer may or may not win.)
		if err := h.st.RevokeDevice(context.Background(), ack.DeviceID, time.Now()); err != nil {
			t.Fatal(err)
		}
		c.Send(wire.TypeHealthCheck, "h2", nil)
		if env := c.Read(); env.Type == wire.TypeHealthStatus {
			json.Unmarshal(env.Payload, &hs)
			if hs.Checks.TokenPermissions || hs.Ready {
				t.Fatalf("revoked device health = %+v", hs)
			}
		} else if env.Type != wire.TypeConnectionError {
			t.Fatalf("got %s", env.Type)
		}
	})
}

func TestShutdownSendsGoingAway(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, nil)
		_, c, _ := h.paired()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- h.srv.Shutdown(ctx) }()
		if code := c.ExpectClose(); code != websocket.CloseGoingAway {
			t.Fatalf("close code %d, want 1001", code)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		// New connections are turned away while draining: a WebSocket
		// with 1001, the fallback with 503.
		if transport == overSSE {
			req, _ := http.NewRequest(http.MethodPost, h.ts.URL+wire.EventsPath, strings.NewReader(`{"type":"auth","payload":{"token":"x"}}`))
			resp, err := h.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("open while draining: %d", resp.StatusCode)
			}
			return
		}
		ws, _, err := h.dialer.Dial(h.wsURL, nil)
		if err == nil {
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _, err = ws.ReadMessage()
			ce, ok := err.(*websocket.CloseError)
			if !ok || ce.Code != websocket.CloseGoingAway {
				t.Fatalf("connection during shutdown: %v", err)
			}
		}
	})
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	resp, err := h.ts.Client().Get(h.ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 || body["status"] != "ok" || body["version"] != "test" || len(body) != 2 {
		t.Fatalf("healthz = %d %v", resp.StatusCode, body)
	}
}

// TestLastSeenIsWrittenInBatches: a handshake does not write last-seen
// itself; the sightings are written together, and at the latest when the
// server shuts down.
func TestLastSeenIsWrittenInBatches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	token, first, ack := h.paired()
	first.Close()
	h.clock.advance(time.Hour)
	seenAt := h.clock.now()
	c := h.dial(nil)
	if env := c.Auth(token, map[string]any{"client_version": "9.9.9"}); env.Type != wire.TypeConnectionAck {
		t.Fatalf("auth: %s", env.Type)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	d, err := h.st.Device(context.Background(), ack.DeviceID)
	if err != nil {
		t.Fatal(err)
	}
	if d.ClientVersion != "9.9.9" || d.Platform != "test" || d.LastSeen.Before(seenAt) || d.LastAddr != "127.0.0.1" {
		t.Fatalf("device after shutdown: %+v", d)
	}
}
