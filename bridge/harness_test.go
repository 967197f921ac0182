package bridge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/bridge/wire"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
)

// harness runs a real Server behind a real TLS listener on loopback.
type harness struct {
	t      *testing.T
	srv    *Server
	ts     *httptest.Server
	st     *store.Store
	wsURL  string
	dialer *websocket.Dialer
	clock  *testClock
}

type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

func newHarness(t *testing.T, configure func(*Server)) *harness {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "tether.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{}
	srv := &Server{
		Store:           st,
		Pairer:          &pairing.Pairer{Store: st, Now: clock.now},
		Version:         "test",
		SupportedAgents: []string{"demo"},
		Now:             clock.now,
	}
	if configure != nil {
		configure(srv)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.StartTLS()
	srv.BridgeURL = "wss://" + ts.Listener.Addr().String() + "/ws"
	srv.Origins = []string{"https://" + ts.Listener.Addr().String()}
	srv.Certificate = ts.Certificate()
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { srv.Watch(ctx); close(watched) }()
	t.Cleanup(func() {
		cancel()
		<-watched
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
		ts.Close()
		st.Close()
	})
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return &harness{
		t: t, srv: srv, ts: ts, st: st, clock: clock,
		wsURL:  srv.BridgeURL,
		dialer: &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool}, HandshakeTimeout: 5 * time.Second},
	}
}

func (h *harness) code(kind string) string {
	h.t.Helper()
	c, err := h.srv.Pairer.NewCode(context.Background(), kind)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(c.Secret)
}

type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func (h *harness) dial(header http.Header) *client {
	h.t.Helper()
	ws, resp, err := h.dialer.Dial(h.wsURL, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		h.t.Fatalf("dial: %v (HTTP %d)", err, status)
	}
	h.t.Cleanup(func() { ws.Close() })
	return &client{t: h.t, ws: ws}
}

func (c *client) sendRaw(s string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) send(typ, id string, payload any) {
	c.t.Helper()
	env := map[string]any{"type": typ, "timestamp": wire.Timestamp(time.Now())}
	if id != "" {
		env["id"] = id
	}
	if payload != nil {
		env["payload"] = payload
	}
	b, err := json.Marshal(env)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// read returns the next frame, failing the test after 5 s.
func (c *client) read() wire.Envelope {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var env wire.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		c.t.Fatalf("server sent invalid JSON %q: %v", data, err)
	}
	return env
}

// expect reads the next frame and checks its type, decoding its payload
// into v when v is not nil.
func (c *client) expect(typ string, v any) wire.Envelope {
	c.t.Helper()
	env := c.read()
	if env.Type != typ {
		c.t.Fatalf("got %s %s, want %s", env.Type, env.Payload, typ)
	}
	if v != nil {
		if err := json.Unmarshal(env.Payload, v); err != nil {
			c.t.Fatalf("payload of %s: %v", typ, err)
		}
	}
	return env
}

// expectClose reads until the connection closes and returns the close code.
func (c *client) expectClose() int {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := c.ws.ReadMessage()
		if err == nil {
			continue
		}
		if ce, ok := err.(*websocket.CloseError); ok {
			return ce.Code
		}
		if strings.Contains(err.Error(), "timeout") {
			c.t.Fatalf("connection still open: %v", err)
		}
		return websocket.CloseAbnormalClosure
	}
}

func (c *client) auth(token string, extra map[string]any) wire.Envelope {
	c.t.Helper()
	p := map[string]any{"token": token, "client_version": "1.0.0", "platform": "test"}
	for k, v := range extra {
		p[k] = v
	}
	c.send(wire.TypeAuth, "auth-1", p)
	return c.read()
}

// paired pairs a new device and returns its token and a connected client.
func (h *harness) paired() (string, *client, wire.ConnectionAck) {
	h.t.Helper()
	c := h.dial(nil)
	env := c.auth(h.code(store.CodeOnce), nil)
	var ack wire.ConnectionAck
	if env.Type != wire.TypeConnectionAck {
		h.t.Fatalf("pairing: got %s %s", env.Type, env.Payload)
	}
	json.Unmarshal(env.Payload, &ack)
	return ack.DeviceToken, c, ack
}
