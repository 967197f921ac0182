package bridge

import (
	"crypto/tls"
	"net"
	"sync"

	"github.com/gorilla/websocket"
)

// Listener wraps a TCP listener so that the connection writer can cork its
// sockets: while it writes a batch of frames, the bytes (TLS records
// included, when TLS wraps this listener) collect in a buffer and leave in
// one system call. Wrap it before TLS: tls.NewListener(bridge.Listener(ln), …).
func Listener(ln net.Listener) net.Listener { return corkListener{ln} }

type corkListener struct{ net.Listener }

func (l corkListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &corkConn{Conn: c}, nil
}

// corkMax is how much a corked connection holds before it writes anyway.
const corkMax = 64 << 10

var corkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, corkMax); return &b }}

// corkConn is a net.Conn whose writes can be held back and sent together.
// Its buffer comes from a pool only while corked, so an idle connection
// holds none.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    *[]byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = corkBuffers.Get().(*[]byte)
	}
	if len(*c.buf)+len(p) > corkMax {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > corkMax {
			return c.Conn.Write(p)
		}
		c.buf = corkBuffers.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was held back and stops holding.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if c.buf == nil {
		return nil
	}
	b := c.buf
	c.buf = nil
	_, err := c.Conn.Write(*b)
	*b = (*b)[:0]
	corkBuffers.Put(b)
	return err
}

// corkOf finds the corkable socket under a WebSocket, if the listener made
// one.
func corkOf(ws *websocket.Conn) *corkConn {
	nc := ws.NetConn()
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	cc, _ := nc.(*corkConn)
	return cc
}
