package bridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/bridge/wire"
	"github.com/tetherdev/tether/gitops"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
)

// harness runs a real Server behind a real TLS listener on loopback.
type harness struct {
	t      testing.TB
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

func newHarness(t testing.TB, configure func(*Server)) *harness {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "tether.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{}
	evlog, err := session.NewLog(context.Background(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := session.NewManager(context.Background(), session.Config{Store: st, Log: evlog, Agents: []string{"demo"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{
		Store:           st,
		Log:             evlog,
		Sessions:        sessions,
		Pairer:          &pairing.Pairer{Store: st, Now: clock.now},
		Git:             &gitops.Git{}, // the tests' own repositories
		Version:         "test",
		SupportedAgents: []string{"demo"},
		Now:             clock.now,
	}
	if configure != nil {
		configure(srv)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener = Listener(ts.Listener)
	ts.StartTLS()
	srv.BridgeURL = "wss://" + ts.Listener.Addr().String() + "/ws"
	srv.Origins = []string{"https://" + ts.Listener.Addr().String()}
	srv.Certificate = ts.Certificate()
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { srv.Watch(ctx); close(watched) }()
	logged := make(chan struct{})
	go func() { evlog.Run(ctx); close(logged) }()
	t.Cleanup(func() {
		cancel()
		<-watched
		<-logged
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
		ts.Close()
		st.Close()
	})
	return &harness{
		t: t, srv: srv, ts: ts, st: st, clock: clock,
		wsURL:  srv.BridgeURL,
		dialer: wstest.CADialer(ts.Certificate()),
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

func (h *harness) dial(header http.Header) *wstest.Client {
	h.t.Helper()
	return wstest.Dial(h.t, h.dialer, h.wsURL, header)
}

// paired pairs a new device and returns its token and a connected client.
func (h *harness) paired() (string, *wstest.Client, wire.ConnectionAck) {
	h.t.Helper()
	c := h.dial(nil)
	env := c.Auth(h.code(store.CodeOnce), nil)
	var ack wire.ConnectionAck
	if env.Type != wire.TypeConnectionAck {
		h.t.Fatalf("pairing: got %s %s", env.Type, env.Payload)
	}
	json.Unmarshal(env.Payload, &ack)
	return ack.DeviceToken, c, ack
}
