package terminal

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/wire"
)

// SocketName is the server's socket in the daemon's data directory.
const SocketName = "terminal.sock"

// helloWait bounds the wait for a connection's first line.
const helloWait = 5 * time.Second

// Manager is what the server needs of the session manager.
type Manager interface {
	AttachTerminal(ctx context.Context, id, cwd string, t session.Terminal) error
	DetachTerminal(id string, t session.Terminal)
	HandBack(id string, interrupt bool) error
}

// Server is the daemon's side: it accepts wrappers' control connections
// and the bridge connections they open on release.
type Server struct {
	Manager Manager
	Logger  *slog.Logger

	mu       sync.Mutex
	pending  map[string]chan net.Conn // bridge connections awaited, by nonce
	ln       net.Listener
	controls map[*control]bool
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go s.handle(c)
	}
}

// Close stops accepting and ends every control connection: the
// terminals take their sessions back (the daemon stops).
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
	}
	for t := range s.controls {
		t.conn.Close()
	}
}

func (s *Server) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) handle(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(helloWait))
	r := newReader(c)
	hello, err := r.next()
	if err != nil || hello.Op != OpHello {
		s.log().Warn("tether claude: bad first line", "err", err)
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	if hello.Role == RoleBridge {
		// Handed over under the lock (the channel holds one), so that a
		// Release that gave up finds it when it drains the channel.
		s.mu.Lock()
		ch := s.pending[hello.Nonce]
		delete(s.pending, hello.Nonce)
		if ch != nil {
			// What the reader buffered past the hello (the bridge's
			// "ready") is the bridge's.
			ch <- &bufferedConn{Conn: c, r: r.r}
		}
		s.mu.Unlock()
		if ch == nil {
			c.Close()
		}
		return
	}
	t := &control{s: s, conn: c, id: hello.SessionID, closed: make(chan struct{})}
	s.mu.Lock()
	if s.controls == nil {
		s.controls = map[*control]bool{}
	}
	s.controls[t] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.controls, t)
		s.mu.Unlock()
	}()
	t.serve(r, hello.Cwd)
}

// control is one wrapper's control connection: the session.Terminal of
// its session.
type control struct {
	s      *Server
	conn   net.Conn
	id     string
	wmu    sync.Mutex
	closed chan struct{}
}

func (t *control) send(m Msg) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.conn.SetWriteDeadline(time.Now().Add(helloWait))
	return write(t.conn, m)
}

func (t *control) serve(r *reader, cwd string) {
	defer t.conn.Close()
	defer close(t.closed)
	if err := t.s.Manager.AttachTerminal(context.Background(), t.id, cwd, t); err != nil {
		msg := "the daemon could not take this session"
		var we *wire.Error
		if errors.As(err, &we) {
			msg = we.Message
		}
		t.s.log().Info("tether claude refused", "session", t.id, "err", err)
		if err := t.send(Msg{Op: OpError, Message: msg}); err != nil {
			t.s.log().Warn("telling tether claude it was refused", "session", t.id, "err", err)
		}
		return
	}
	defer t.s.Manager.DetachTerminal(t.id, t)
	if t.send(Msg{Op: OpAttached}) != nil {
		return
	}
	t.s.log().Info("tether claude attached", "session", t.id, "cwd", cwd)
	for {
		m, err := r.next()
		if err != nil {
			return
		}
		if m.Op == OpTakeback {
			if err := t.s.Manager.HandBack(t.id, m.Interrupt); err != nil {
				t.s.log().Warn("taking a session back", "session", t.id, "err", err)
			}
		}
	}
}

// Release asks the wrapper to stop its claude and connect the bridge.
func (t *control) Release(ctx context.Context) (net.Conn, error) {
	nonce := rand.Text()
	ch := make(chan net.Conn, 1)
	t.s.mu.Lock()
	if t.s.pending == nil {
		t.s.pending = map[string]chan net.Conn{}
	}
	t.s.pending[nonce] = ch
	t.s.mu.Unlock()
	defer func() {
		t.s.mu.Lock()
		delete(t.s.pending, nonce)
		t.s.mu.Unlock()
		select {
		case c := <-ch:
			c.Close() // came when nobody waited any more
		default:
		}
	}()
	if err := t.send(Msg{Op: OpRelease, Nonce: nonce}); err != nil {
		return nil, err
	}
	select {
	case c := <-ch:
		return c, nil
	case <-t.closed:
		return nil, errors.New("the terminal went away")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Reclaim tells the wrapper to resume its claude.
func (t *control) Reclaim() {
	if err := t.send(Msg{Op: OpReclaim}); err != nil {
		t.s.log().Warn("telling a terminal to resume", "session", t.id, "err", err)
	}
}

// bufferedConn is a connection whose first bytes were read ahead into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
