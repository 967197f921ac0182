// Package bridge is the phone-facing server: the HTTP routes, the WebSocket
// upgrade and its origin check, the auth handshake, one reader and one writer
// goroutine per connection, and the dispatch of client frames to handlers.
package bridge

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/history"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/runs"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// Defaults for the Server's timing and size fields.
const (
	DefaultAuthTimeout  = 10 * time.Second
	DefaultPingInterval = 25 * time.Second
	DefaultPongWait     = 60 * time.Second
	DefaultWriteWait    = 10 * time.Second
	// DefaultReadLimit is the largest frame a client may send; a larger one
	// closes the connection with 1009 (message too big).
	DefaultReadLimit = 1 << 20
	// DefaultSendQueueBytes bounds the frames waiting for a slow client,
	// in bytes (each frame counts frameOverhead more); past it the client
	// is disconnected with 1013 and catches up from the event log on
	// reconnect.
	DefaultSendQueueBytes = 8 << 20
	// ClockSkewLimit is the largest clock difference health_check accepts.
	ClockSkewLimit = 60 * time.Second
	// CertExpiryWarning is how close to its expiry a certificate must be for
	// health_check to call it not valid.
	CertExpiryWarning = 7 * 24 * time.Hour
)

// Server serves the phone protocol. Build one with its fields set, mount
// Handler in an http.Server, call DeviceChanged when another process
// changed a device, and Shutdown when done.
type Server struct {
	// Logger receives the server's log; never secrets.
	Logger *slog.Logger
	// Store holds devices.
	Store *store.Store
	// Sessions runs agent sessions; Events is the durable event log their
	// events go through.
	Sessions *session.Manager
	Events   *session.EventLog
	// History is the session history (history_* messages); nil answers
	// them with an error.
	History *history.Index
	// Runs runs the agent-to-agent runs; nil answers their requests with
	// BRIDGE_ERROR.
	Runs *runs.Runner
	// Pairer authenticates devices and issues codes for /pair.
	Pairer *pairing.Pairer
	// Git runs the git of sessions' working directories; it must not run
	// what an agent wrote outside a sandbox (cmd/tether's runs git in the
	// session's sandbox view). A *gitops.Git; nil answers GIT_ERROR.
	Git Git
	// VAPIDPublicKey is the Web Push key browsers subscribe with
	// (push_config); empty when the daemon sends no Web Push.
	VAPIDPublicKey string
	// PushEndpointAllowed, when set, decides which push endpoints a device
	// may subscribe (tests: a push service on loopback); by default an
	// https URL naming a host by a DNS name.
	PushEndpointAllowed func(*url.URL) bool
	// CAGuide is the address of the local certificate authority's guide
	// (--tls local-ca), which the pairing page links to; empty without one.
	CAGuide string
	// PairKey is the secret /pair requires (?key=): only the user's own
	// terminal has it. Empty serves no pairing page.
	PairKey string
	// Limiter limits failed auth attempts per address.
	Limiter *pairing.AttemptLimiter
	// Classifier decides each connection's mode (tailnet, trusted
	// proxies, allowed modes); nil classifies by the peer's address alone.
	Classifier *pairing.Classifier
	// Version is the daemon's version, sent as server_version.
	Version string
	// BridgeURL is the wss URL phones use, sent in connection_ack and the
	// pairing payload.
	BridgeURL string
	// Fingerprint pins a self-signed certificate in the pairing payload;
	// empty for a certificate the platform trusts.
	Fingerprint string
	// Certificate is the leaf certificate served, for health checks; nil
	// when TLS is off.
	Certificate *x509.Certificate
	// CurrentCertificate, when set, returns the leaf served now (a
	// certificate that renews while the daemon runs); it overrides
	// Certificate.
	CurrentCertificate func() *x509.Certificate
	// Origins are the browser origins ("https://host:port") allowed to open
	// a WebSocket; requests without an Origin (native apps) are allowed.
	Origins []string
	// SupportedAgents lists the agents sessions can run.
	SupportedAgents []string
	// MinClientVersion is the oldest client_version health_check calls
	// compatible ("0.1.0" when empty).
	MinClientVersion string

	// Timing and sizes; the Default constants when zero.
	AuthTimeout  time.Duration
	PingInterval time.Duration
	PongWait     time.Duration
	WriteWait    time.Duration
	ReadLimit    int64
	// SendQueueBytes bounds a connection's queue of frames to send.
	SendQueueBytes int

	// Now is the clock; time.Now when nil.
	Now func() time.Time

	initOnce sync.Once
	upgrader websocket.Upgrader
	mux      *http.ServeMux

	// commitLocks serialise the git writes (commit, checkout, stage,
	// discard, push, pull …) per working directory (dir → *sync.Mutex):
	// two phones, or two taps, must not race on one index.
	commitLocks sync.Map

	// acks holds, per device id, the unix nanoseconds until which its
	// acknowledgment of DIRECT_PUBLIC_CONNECTION holds: for every
	// connection of the device, since apps acknowledge once per start and
	// not again when they reconnect.
	acks sync.Map

	// cursors holds, per device id, a *cursor: the last seq written to
	// any of its connections, ahead of the stored cursor.
	cursors sync.Map

	// streams holds the fallback transport's connections by the hash of
	// their token (streamKey → *conn).
	streams sync.Map

	// sightings batches the devices' last-seen records (seen.go).
	sightings sightings

	// closedDevices holds the ids of devices CloseDevice cut off (revoked):
	// a connection whose auth read the device before that is refused once
	// it names its device (device id → struct{}).
	closedDevices sync.Map

	mu       sync.Mutex
	conns    map[*conn]struct{}
	draining bool
	wg       sync.WaitGroup
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		if s.Logger == nil {
			s.Logger = slog.New(slog.DiscardHandler)
		}
		if s.Limiter == nil {
			s.Limiter = &pairing.AttemptLimiter{}
		}
		s.AuthTimeout = orDefault(s.AuthTimeout, DefaultAuthTimeout)
		s.PingInterval = orDefault(s.PingInterval, DefaultPingInterval)
		s.PongWait = orDefault(s.PongWait, DefaultPongWait)
		s.WriteWait = orDefault(s.WriteWait, DefaultWriteWait)
		s.ReadLimit = orDefault(s.ReadLimit, DefaultReadLimit)
		s.SendQueueBytes = orDefault(s.SendQueueBytes, DefaultSendQueueBytes)
		if s.MinClientVersion == "" {
			s.MinClientVersion = "0.1.0"
		}
		s.conns = map[*conn]struct{}{}
		s.upgrader = websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			// Write buffers come from a pool and go back after each
			// message, so an idle connection holds none.
			WriteBufferPool: &sync.Pool{},
			// A small read buffer of the connection's own rather than the
			// HTTP server's 4 KiB one: frames larger than it are read
			// through it all the same.
			ReadBufferSize: 512,
			CheckOrigin:    s.checkOrigin,
		}
		s.mux = http.NewServeMux()
		s.mux.HandleFunc("GET /ws", s.serveWS)
		s.mux.HandleFunc("POST "+wire.EventsPath, s.serveEvents)
		s.mux.HandleFunc("POST "+wire.SendPath, s.serveSend)
		s.mux.HandleFunc("GET /healthz", s.serveHealthz)
		s.mux.HandleFunc("GET /pair", s.notForwarded(s.servePair))
	})
}

func (s *Server) leaf() *x509.Certificate {
	if s.CurrentCertificate != nil {
		return s.CurrentCertificate()
	}
	return s.Certificate
}

func (s *Server) classifier() *pairing.Classifier {
	if s.Classifier == nil {
		return &pairing.Classifier{}
	}
	return s.Classifier
}

// notForwarded refuses requests a proxy forwarded: a proxy on this machine
// must not turn a page meant for this machine into one for the world.
func (s *Server) notForwarded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("Forwarded") != "" || r.Header.Get("X-Forwarded-Host") != "" {
			http.Error(w, "this page is not served through a proxy: open it on the computer running tether", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Handler returns the server's HTTP routes: /ws, the fallback transport's
// EventsPath and SendPath, /healthz and /pair.
func (s *Server) Handler() http.Handler {
	s.init()
	return s.mux
}

func (s *Server) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok", "version": s.Version}) // strings encode; a client gone has nobody to tell
}

// classKey is the request context key of a connection request's
// classification.
type classKey struct{}

func contextWithClass(ctx context.Context, class pairing.Classification) context.Context {
	return context.WithValue(ctx, classKey{}, class)
}

// checkOrigin refuses cross-site WebSocket hijacking: a browser sends an
// Origin, and only the daemon's own origins may connect.
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if slices.Contains(s.Origins, origin) {
		return true
	}
	// Behind a trusted proxy the page's origin is the host the proxy was
	// asked for (serveWS has classified the request).
	if cl, ok := r.Context().Value(classKey{}).(pairing.Classification); ok && cl.Proxy.IsValid() && cl.Secure && origin == "https://"+cl.Host {
		return true
	}
	s.Logger.Warn("websocket refused: foreign origin", "origin", origin, "remote", r.RemoteAddr)
	return false
}

// peerAddr is the connection's remote address, from the socket itself.
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func (s *Server) register(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	_, ok := s.conns[c]
	delete(s.conns, c)
	s.mu.Unlock()
	if ok {
		s.wg.Done()
	}
}

func (s *Server) liveConns() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// Connected counts the authenticated connections.
func (s *Server) Connected() int {
	n := 0
	for _, c := range s.liveConns() {
		if c.deviceID() != "" {
			n++
		}
	}
	return n
}

// HookAnswerers counts the authenticated connections whose clients answer
// hook-sourced approvals (they said so at auth): the ReCursor app shows
// such questions but never answers them, so a terminal must not wait on it.
func (s *Server) HookAnswerers() int {
	n := 0
	for _, c := range s.liveConns() {
		if c.deviceID() != "" && c.hookAnswers.Load() {
			n++
		}
	}
	return n
}

// CloseDevice closes every live connection of a device, telling it why,
// and refuses one that was authenticating meanwhile (see conn.auth).
func (s *Server) CloseDevice(deviceID, reason string) {
	s.closedDevices.Store(deviceID, struct{}{})
	s.Pairer.Forget(deviceID)
	for _, c := range s.liveConns() {
		if c.deviceID() == deviceID {
			c.fail(wire.TypeConnectionError, wire.CodeAuthFailed, reason, websocket.ClosePolicyViolation)
		}
	}
}

// DeviceChanged reads device id again from the store, where another
// process (`tether devices revoke` or `rename`, through the control
// socket) changed it, and closes its live connections if it is revoked
// now, or has them use its new name. The id is only
// a hint: what happens follows the store.
func (s *Server) DeviceChanged(ctx context.Context, id string) error {
	s.init()
	s.Pairer.Forget(id)
	d, err := s.Store.Device(ctx, id)
	if err != nil {
		return err
	}
	if d.RevokedAt != nil {
		s.Logger.Info("closing connections of revoked device", "device", id)
		s.CloseDevice(id, "This device has been revoked")
		return nil
	}
	s.renamed(id, d.Name)
	return nil
}

// renamed has the live connections of device id sign with its new name.
func (s *Server) renamed(id, name string) {
	for _, c := range s.liveConns() {
		if d := c.device.Load(); d != nil && d.ID == id && d.Name != name {
			renamed := *d
			renamed.Name = name
			c.device.Store(&renamed)
		}
	}
}

// Shutdown closes every WebSocket with 1001 (going away) and waits for
// them to finish, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	for _, c := range s.liveConns() {
		c.closeWith(websocket.CloseGoingAway, "server shutting down")
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	defer s.flushSightings()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range s.liveConns() {
			c.tr.close()
		}
		return errors.New("bridge: shutdown: connections still open: " + ctx.Err().Error())
	}
}
