package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// closeWait is how long the server waits for the client's close frame after
// sending its own.
const closeWait = 2 * time.Second

// conn is one client connection, over a WebSocket or the HTTPS fallback
// (sse.go). The reader (the WebSocket's read loop, or the POSTs of the
// fallback) dispatches frames; the writer goroutine alone writes, keepalives
// included, through the transport. Frames wait in a queue that holds no
// memory while empty.
type conn struct {
	s      *Server
	tr     transport
	ws     *websocket.Conn // the WebSocket's read side; nil over the fallback
	peer   netip.Addr
	tls    bool
	class  pairing.Classification
	ctx    context.Context
	cancel context.CancelFunc

	// Set once by auth, before any other goroutine reads them.
	device        atomic.Pointer[store.Device]
	clientVersion string
	hookAnswers   atomic.Bool // the client answers hook-sourced approvals
	primary       atomic.Bool // the client keeps this one connection (wire.PurposePrimary)

	rtt atomic.Int64 // nanoseconds of the last ping round trip; 0 = none yet
	// keepalive fires when the connection has been quiet for
	// PingInterval: the writer sends a keepalive then. Every frame or pong
	// the WebSocket reads sets it back, so a phone that sends
	// heartbeat_ping every 15 s is never pinged and an idle daemon wakes
	// for nothing else; over the fallback nothing is read on the stream,
	// which gets its keepalives.
	keepalive *time.Timer

	// slots holds a token per slow request running off the read loop;
	// answered counts those answered (for the log).
	slots    chan struct{}
	answered atomic.Int64

	// wmu is held by whoever writes to tr: the writer goroutine, and the
	// reader for the ack (writeNow). It is taken before mu.
	wmu       sync.Mutex
	mu        sync.Mutex
	queue     []outFrame
	queued    int // bytes in queue, frameOverhead a frame included
	closing   bool
	closeCode int
	closeText string
	notify    chan struct{}
	drained   chan struct{} // signalled when the writer has emptied the queue
	done      chan struct{} // closed when the writer has finished

	// Over the fallback: alive hears of each POST, readMu serialises
	// their dispatch.
	alive  chan struct{}
	readMu sync.Mutex

	sub      *session.Sub
	written  atomic.Int64 // seq of the last logged event written to the socket
	savedSeq int64        // the cursor last stored (writer goroutine only)
	savedAt  time.Time
}

// outFrame is a frame waiting for the writer; seq is set for logged events.
// A keepalive has no data: the writer has the transport send its keepalive
// there, in order with the frames around it.
type outFrame struct {
	data      []byte
	seq       int64
	keepalive bool
	// pooled is the buffer of a frame encoded into framePool's (a file
	// reply): the writer gives it back once the frame is written.
	pooled *[]byte
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	class := s.classifier().Classify(r.Context(), r)
	r = r.WithContext(contextWithClass(r.Context(), class))
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered with an HTTP error
	}
	c := s.newConn(class)
	c.ws = ws
	c.tr = &wsTransport{ws: ws, cork: corkOf(ws), wait: s.WriteWait, frameWait: max(s.WriteWait, s.PongWait), ended: c.ctx}
	if !s.register(c) {
		c.cancel()
		ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
		ws.Close()
		return
	}
	// The connection lives on in goroutines of its own, so that this
	// handler's goroutine (its stack grown by the TLS handshake) and the
	// HTTP server's request, response and buffers are let go: an idle
	// connection then holds little more than its socket.
	go c.writePump()
	go c.serve()
}

func (s *Server) newConn(class pairing.Classification) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		s: s, peer: class.Client, tls: class.Secure,
		class:     class,
		ctx:       ctx,
		cancel:    cancel,
		notify:    make(chan struct{}, 1),
		keepalive: time.NewTimer(s.PingInterval),
		drained:   make(chan struct{}, 1),
		slots:     make(chan struct{}, MaxRequests),
		done:      make(chan struct{}),
	}
}

// serve reads until the connection ends, then cleans up after it.
func (c *conn) serve() {
	defer c.s.unregister(c)
	c.readPump()
	c.cancel()
	<-c.done
	c.cleanup()
}

// cleanup runs when both the reader and the writer have finished.
func (c *conn) cleanup() {
	if c.sub != nil {
		c.sub.Close()
	}
	if d := c.device.Load(); d != nil {
		c.saveCursor(true)
		c.s.seen(store.Sighting{Device: d.ID, At: c.s.now(), Addr: c.peer.String()})
	}
}

func (c *conn) deviceID() string {
	if d := c.device.Load(); d != nil {
		return d.ID
	}
	return ""
}

// frameOverhead is what a queued frame costs besides its bytes.
const frameOverhead = 64

// enqueue adds a frame for the writer. A client that lets SendQueueBytes
// pile up is disconnected rather than allowed to slow anyone down or hold
// the daemon's memory.
func (c *conn) enqueue(frame []byte) { c.enqueueSeq(frame, 0) }

// enqueueKeepalive has the writer send a keepalive after what is queued.
func (c *conn) enqueueKeepalive() {
	c.mu.Lock()
	if !c.closing {
		c.queue = append(c.queue, outFrame{keepalive: true})
		c.queued += frameOverhead
	}
	c.mu.Unlock()
	c.wake()
}

// enqueueSeq enqueues a logged event's frame. It reports false when the
// connection is closing.
func (c *conn) enqueueSeq(frame []byte, seq int64) bool {
	return c.enqueueFrame(outFrame{data: frame, seq: seq})
}

// enqueueFrame is enqueueSeq of a frame with its fields set.
func (c *conn) enqueueFrame(f outFrame) bool {
	frame := f.data
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	if c.queued+len(frame)+frameOverhead > c.s.SendQueueBytes && len(c.queue) > 0 {
		c.closing, c.closeCode, c.closeText = true, websocket.CloseTryAgainLater, "send queue overflow"
		c.queue, c.queued = nil, 0
		c.mu.Unlock()
		c.s.Logger.Warn("client too slow: disconnected", "device", c.deviceID(), "remote", c.peer, "requests_answered", c.answered.Load())
		c.wake()
		return false
	}
	c.queue = append(c.queue, f)
	c.queued += len(frame) + frameOverhead
	c.mu.Unlock()
	c.wake()
	return true
}

// enqueueWait enqueues a replayed frame, waiting while the queue is more
// than half full, so that a long replay flows at the client's pace.
func (c *conn) enqueueWait(frame []byte, seq int64) error {
	for {
		c.mu.Lock()
		closing, n := c.closing, c.queued
		c.mu.Unlock()
		if closing {
			return errClosing
		}
		if n < c.s.SendQueueBytes/2 {
			c.enqueueSeq(frame, seq)
			return nil
		}
		select {
		case <-c.drained:
		case <-c.done:
			return errClosing
		}
	}
}

var errClosing = errors.New("connection closing")

// isClosing reports whether the connection is closing: frames queued now
// are dropped.
func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

func (c *conn) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// closeWith closes the connection with a close frame after the frames
// already queued have been written.
func (c *conn) closeWith(code int, text string) {
	c.mu.Lock()
	if !c.closing {
		c.closing, c.closeCode, c.closeText = true, code, text
	}
	c.mu.Unlock()
	c.wake()
}

// CloseReplaced is the close code of a connection that a newer connection
// of the same device took over.
const CloseReplaced = 4001

// takeOver closes the device's other primary connections: a phone that
// reconnects (after switching networks, say) leaves its old socket open on
// the server until the heartbeat times out, and frames written there are
// lost to it. They are dropped unwritten, so that what the device is known
// to have been sent (the replay cursor) stays what reached it.
func (s *Server) takeOver(c *conn, deviceID string) {
	for _, old := range s.liveConns() {
		if old == c || !old.primary.Load() || old.deviceID() != deviceID {
			continue
		}
		old.mu.Lock()
		if !old.closing {
			old.closing, old.closeCode, old.closeText = true, CloseReplaced, "replaced by a newer connection of this device"
			old.queue, old.queued = nil, 0
		}
		old.mu.Unlock()
		old.wake()
		s.Logger.Info("connection taken over by a newer one of the device", "device", deviceID, "remote", old.peer)
	}
}

// send queues one frame.
func (c *conn) send(typ, id string, payload any) { c.sendVia(c.enqueue, typ, id, payload) }

// sendVia encodes one frame and hands it to out (enqueue or writeNow).
func (c *conn) sendVia(out func([]byte), typ, id string, payload any) {
	frame, err := encode(typ, id, c.s.now(), payload)
	if err != nil {
		c.s.Logger.Error("encoding frame", "type", typ, "err", err)
		return
	}
	out(frame)
}

// writeNow writes a frame from the calling goroutine when nothing is
// queued ahead of it, sparing it the hand-over to the writer goroutine
// (a wake-up and a switch: on a busy or one-core daemon the larger part
// of the ack's latency); otherwise it queues it behind the others. A
// failed write ends the connection, as in the writer.
func (c *conn) writeNow(frame []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	idle := len(c.queue) == 0 && !c.closing
	c.mu.Unlock()
	if !idle {
		c.enqueue(frame)
		return
	}
	if err := c.tr.write([]outFrame{{data: frame}}); err != nil {
		c.cancel()
	}
}

// fail sends an error frame of typ (connection_error or error) and closes.
func (c *conn) fail(typ, code, message string, closeCode int) {
	c.send(typ, "", wire.ConnectionError{Code: code, Message: message})
	c.closeWith(closeCode, message)
}

// encode frames payload. A wire.Appender (the file replies) is written
// straight into the frame by its own encoder; anything else through
// json.Marshal, and copied into the frame.
func encode(typ, id string, now time.Time, payload any) ([]byte, error) {
	env := wire.Envelope{Type: typ, ID: id, Timestamp: wire.Timestamp(now)}
	if a, ok := payload.(wire.Appender); ok {
		return wire.EncodeAppender(nil, env, a), nil
	}
	if payload != nil {
		p, err := json.Marshal(payload)
		if err != nil {
			return nil, err
		}
		env.Payload = p
	}
	return wire.Encode(env)
}

func (c *conn) writePump() {
	defer close(c.done)
	defer c.tr.close()
	defer c.keepalive.Stop()
	for {
		select {
		case <-c.notify:
		case <-c.keepalive.C:
			c.wmu.Lock()
			err := c.tr.keepalive()
			c.wmu.Unlock()
			if err != nil {
				return
			}
			c.keepalive.Reset(c.s.PingInterval)
			continue
		case <-c.ctx.Done():
			return
		}
		for {
			// The batch is taken and written under wmu, so that writeNow
			// cannot slip a frame in between.
			c.wmu.Lock()
			c.mu.Lock()
			batch := c.queue
			c.queue, c.queued = nil, 0
			closing, code, text := c.closing, c.closeCode, c.closeText
			c.mu.Unlock()
			ok := c.writeBatch(batch)
			c.wmu.Unlock()
			if !ok {
				return
			}
			if len(batch) > 0 {
				c.saveCursor(false)
				continue
			}
			select {
			case c.drained <- struct{}{}:
			default:
			}
			if closing {
				c.tr.finish(code, text)
				return
			}
			break
		}
	}
}

// writeBatch writes frames and records the last logged event written. It
// reports false when the connection failed.
func (c *conn) writeBatch(batch []outFrame) bool {
	// Frames go out in runs; a keepalive between them is the transport's.
	for rest := batch; len(rest) > 0; {
		n := slices.IndexFunc(rest, func(f outFrame) bool { return f.keepalive })
		if n < 0 {
			n = len(rest)
		}
		if n > 0 && c.tr.write(rest[:n]) != nil {
			return false
		}
		releaseFrames(rest[:n])
		if n < len(rest) {
			if c.tr.keepalive() != nil {
				return false
			}
			n++
		}
		rest = rest[n:]
	}
	var last int64
	for _, f := range batch {
		if f.seq > 0 {
			last = f.seq
		}
	}
	if last > 0 {
		c.written.Store(last)
		if d := c.device.Load(); d != nil {
			c.s.wroteTo(d.ID, last)
		}
	}
	return true
}

// readAt records that the WebSocket read something at now: the client
// is alive (no keepalive due for PingInterval; traffic either way keeps
// NATs open) and has PongWait for its next frame.
func (c *conn) readAt(now time.Time) {
	c.keepalive.Reset(c.s.PingInterval)
	c.ws.SetReadDeadline(now.Add(c.s.PongWait))
}

func (c *conn) onPong(data string) error {
	now := time.Now()
	if sent, err := strconv.ParseInt(data, 10, 64); err == nil {
		if rtt := now.UnixNano() - sent; rtt > 0 {
			c.rtt.Store(rtt)
		}
	}
	c.readAt(now)
	return nil
}

func (c *conn) readPump() {
	c.ws.SetReadLimit(c.s.ReadLimit)
	c.ws.SetPongHandler(c.onPong)
	if c.class.Refused != nil {
		c.refuse()
		c.drain()
		return
	}
	c.ws.SetReadDeadline(time.Now().Add(c.s.AuthTimeout))
	if !c.authenticate() {
		c.drain()
		return
	}
	for {
		mt, data, err := c.ws.ReadMessage()
		if err != nil {
			c.logReadError(err)
			return
		}
		c.readAt(time.Now())
		if mt != websocket.TextMessage {
			c.sendError("", wire.CodeInvalidMessage, "frames must be text frames holding JSON", true)
			continue
		}
		c.dispatch(data)
	}
}

// refuse tells the client why its connection is refused and closes.
func (c *conn) refuse() {
	c.send(wire.TypeConnectionError, "", c.s.refusal(c.class))
	c.closeWith(websocket.ClosePolicyViolation, "refused: "+c.class.Mode)
}

// refusal says why a connection of class is refused (the classifier's
// reason, never its wording), and logs it.
func (s *Server) refusal(class pairing.Classification) wire.ConnectionError {
	s.Logger.Warn("connection refused", "remote", class.Client, "proxy", class.Proxy, "reason", class.Refused, "detail", class.Description)
	ce := wire.ConnectionError{
		Code:        wire.CodeMisconfigured,
		Message:     "Bridge security settings prevent this connection.",
		Remediation: "Run `tether doctor` on the computer to see the allowed connection modes and why.",
	}
	switch {
	case errors.Is(class.Refused, pairing.ErrInsecureTransport):
		ce = wire.ConnectionError{
			Code:        wire.CodeInsecureTransport,
			Message:     "Bridge requires wss:// (WebSocket Secure). Unencrypted ws:// connections are only accepted from this machine.",
			Remediation: "Connect with wss://, or enable TLS on the daemon (--tls auto, self-signed, tailscale or files).",
		}
	case errors.Is(class.Refused, pairing.ErrModeForbidden):
		ce.Message = "This bridge does not allow connections of this kind (--allow-modes)."
	case errors.Is(class.Refused, pairing.ErrProxyHeaders):
		ce.Message = "This bridge is behind a proxy it does not trust, or its proxy did not name the client."
		ce.Remediation = "Set --trusted-proxy to the proxy's address and have it send X-Forwarded-For and X-Forwarded-Proto."
	}
	return ce
}

// drain keeps reading (and discarding) until the writer has closed the
// connection, so that close frames and errors reach the client in order.
func (c *conn) drain() {
	c.ws.SetReadDeadline(time.Now().Add(c.s.WriteWait))
	for {
		if _, _, err := c.ws.NextReader(); err != nil {
			return
		}
	}
}

func (c *conn) logReadError(err error) {
	var ce *websocket.CloseError
	switch {
	case errors.As(err, &ce):
		c.s.Logger.Debug("client closed", "device", c.deviceID(), "code", ce.Code)
	case errors.Is(err, websocket.ErrReadLimit):
		c.s.Logger.Warn("frame over the read limit: closed", "device", c.deviceID(), "limit", c.s.ReadLimit)
	case isTimeout(err):
		c.s.Logger.Info("client stopped answering: dropped", "device", c.deviceID(), "remote", c.peer)
	default:
		c.s.Logger.Debug("read ended", "device", c.deviceID(), "err", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (c *conn) sendError(id, code, message string, recoverable bool) {
	c.send(wire.TypeError, id, wire.ErrorPayload{Code: code, Message: message, Recoverable: recoverable})
}
