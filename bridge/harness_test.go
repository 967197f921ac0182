package bridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/gitops"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/runs"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// harness runs a real Server behind a real TLS listener on loopback; its
// clients use one transport.
type harness struct {
	t      testing.TB
	sse    bool // clients use the HTTPS fallback, not WebSockets
	srv    *Server
	ts     *httptest.Server
	st     *store.Store
	wsURL  string
	dialer *websocket.Dialer
	clock  *testClock
	out    *atomic.Int64 // bytes the server wrote to its sockets, TLS included
	work   string        // the directory sessions may work in
}

// countingListener counts the bytes written to its connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
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

// Transports are the names of the transports a harness's clients use.
const (
	overWebSocket = "websocket"
	overSSE       = "sse"
)

// forTransports runs test once over each transport, in parallel.
func forTransports(t *testing.T, test func(t *testing.T, transport string)) {
	for _, tr := range []string{overWebSocket, overSSE} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			test(t, tr)
		})
	}
}

func newHarness(t testing.TB, configure func(*Server)) *harness {
	t.Helper()
	return newHarnessOver(t, overWebSocket, configure)
}

func newHarnessOver(t testing.TB, transport string, configure func(*Server)) *harness {
	t.Helper()
	return newHarnessWith(t, transport, nil, configure)
}

// newHarnessWith is newHarnessOver whose sessions start their sandboxes
// with spawner (nil: the real ones, running this test binary as their
// bridge: TestMain).
func newHarnessWith(t testing.TB, transport string, spawner session.Spawner, configure func(*Server)) *harness {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "tether.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{}
	work := t.TempDir()
	evlog, err := session.NewEventLog(context.Background(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := session.NewManager(context.Background(), session.Config{Store: st, Events: evlog, Agents: []string{"demo"}, Spawner: spawner,
		Sandbox: sandbox.Spec{Args: []string{sandboxBridgeArg}}, DataDir: t.TempDir(), Roots: []string{work}})
	if err != nil {
		t.Fatal(err)
	}
	runner := runs.New(runs.Config{Store: st, Events: evlog})
	runner.Attach(sessions)
	srv := &Server{
		Store:           st,
		Events:          evlog,
		Sessions:        sessions,
		Runs:            runner,
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
	out := &atomic.Int64{}
	ts.Listener = Listener(countingListener{ts.Listener, out})
	ts.StartTLS()
	srv.BridgeURL = "wss://" + ts.Listener.Addr().String() + "/ws"
	srv.Origins = []string{"https://" + ts.Listener.Addr().String()}
	srv.Certificate = ts.Certificate()
	ctx, cancel := context.WithCancel(context.Background())
	logged := make(chan struct{})
	go func() { evlog.Run(ctx); close(logged) }()
	t.Cleanup(func() {
		cancel()
		<-logged
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
		ts.Close()
		st.Close()
	})
	return &harness{
		t: t, srv: srv, ts: ts, st: st, clock: clock, sse: transport == overSSE, out: out, work: work,
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
	if h.sse {
		return wstest.DialSSE(h.t, h.ts.Client(), h.ts.URL, header)
	}
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
