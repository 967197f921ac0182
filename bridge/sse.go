package bridge

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tetherdev/tether/wire"
)

// The HTTPS fallback transport: the same protocol for clients that cannot
// open a WebSocket (WebKit refuses wss:// to a certificate the user
// accepted only for the page). Frames down are a Server-Sent Events stream
// (each logged event's id: is its seq, so Last-Event-ID resumes as last_seq
// does), frames up are POSTs (paths and header in package wire). Both go
// through the conn and the dispatcher a WebSocket uses: the same auth,
// envelopes, errors and limits.

// sseTransport writes Server-Sent Events to the response of EventsPath. A
// frame is one event: "id: <seq>" for logged events, its JSON as data.
type sseTransport struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	wait time.Duration
	stop func() // ends the handler that owns w
}

func (t *sseTransport) write(batch []outFrame) error {
	t.rc.SetWriteDeadline(time.Now().Add(t.wait))
	for _, f := range batch {
		if err := t.event(f.seq, "", f.data); err != nil {
			return err
		}
	}
	return t.rc.Flush()
}

// event writes one event; data's lines each become a data: line (JSON
// frames have none, but the stream's framing must not depend on it).
func (t *sseTransport) event(seq int64, name string, data []byte) error {
	b := make([]byte, 0, len(data)+32)
	if seq > 0 {
		b = strconv.AppendInt(append(b, "id: "...), seq, 10)
		b = append(b, '\n')
	}
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		b = append(append(append(b, "data: "...), line...), '\n')
		if !more {
			break
		}
		data = rest
	}
	_, err := t.w.Write(append(b, '\n'))
	return err
}

// keepalive writes a comment, which clients ignore.
func (t *sseTransport) keepalive() error {
	t.rc.SetWriteDeadline(time.Now().Add(t.wait))
	if _, err := io.WriteString(t.w, ":\n\n"); err != nil {
		return err
	}
	return t.rc.Flush()
}

// finish sends a close event holding the code and reason a WebSocket's
// close frame would; the stream ends when the handler returns.
func (t *sseTransport) finish(code int, reason string) {
	data, _ := json.Marshal(wire.StreamClose{Code: code, Reason: reason})
	t.rc.SetWriteDeadline(time.Now().Add(t.wait))
	if t.event(0, "close", data) == nil {
		t.rc.Flush()
	}
}

func (t *sseTransport) close() { t.stop() }

// streamKey is what the server keeps of a connection token: its hash, so
// that looking one up takes no time that depends on the token's bytes.
type streamKey [sha256.Size]byte

func keyOf(token string) streamKey { return sha256.Sum256([]byte(token)) }

// serveEvents opens a fallback connection: the body is the auth frame;
// the answer is the event stream, or an HTTP error whose body is the
// connection_error frame a WebSocket would have received.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	class := s.classifier().Classify(r.Context(), r)
	r = r.WithContext(contextWithClass(r.Context(), class))
	if !s.checkOrigin(r) {
		s.httpError(w, http.StatusForbidden, wire.TypeConnectionError, wire.CodeAuthFailed, "This page's origin may not connect")
		return
	}
	if class.Refused != nil {
		s.writeFrame(w, http.StatusForbidden, wire.TypeConnectionError, s.refusal(class))
		return
	}
	var lastEventID *int64
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 {
			s.httpError(w, http.StatusBadRequest, wire.TypeConnectionError, wire.CodeInvalidMessage, "Last-Event-ID must be an event's seq")
			return
		}
		lastEventID = &n
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.AuthTimeout))
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.ReadLimit))
	if err != nil {
		s.bodyError(w, err, wire.TypeConnectionError)
		return
	}
	rc.SetReadDeadline(time.Time{})

	c := s.newConn(class)
	c.alive = make(chan struct{}, 1)
	c.tr = &sseTransport{w: w, rc: rc, wait: s.WriteWait, stop: c.cancel}
	if !s.register(c) {
		c.cancel()
		s.httpError(w, http.StatusServiceUnavailable, wire.TypeConnectionError, wire.CodeBridgeError, "server shutting down")
		return
	}
	defer s.unregister(c)
	after, ok := c.auth(data, lastEventID, c.enqueue)
	if !ok {
		c.cancel()
		c.answerRefusedAuth(w)
		return
	}
	token := rand.Text()
	key := keyOf(token)
	s.streams.Store(key, c)
	defer s.streams.Delete(key)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold events back
	h.Set(wire.ConnectionHeader, token)
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		c.cancel()
		return
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer c.cancel()
		c.startStream(after)
		c.awaitClient(r)
	}()
	c.writePump()
	c.cancel()
	<-read
	c.cleanup()
}

// awaitClient is the fallback's reader: frames arrive as POSTs, so it only
// watches that the client is still there. The client POSTs at least every
// PongWait (heartbeat_ping while idle), as a WebSocket answers pings.
func (c *conn) awaitClient(r *http.Request) {
	t := time.NewTimer(c.s.PongWait)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			c.s.Logger.Debug("client closed the event stream", "device", c.deviceID())
			return
		case <-c.done:
			return
		case <-c.alive:
			t.Reset(c.s.PongWait)
		case <-t.C:
			c.s.Logger.Info("client stopped answering: dropped", "device", c.deviceID(), "remote", c.peer)
			return
		}
	}
}

// answerRefusedAuth answers a failed auth with the frame auth queued (a
// connection_error) as the body, under the HTTP status that says the same.
func (c *conn) answerRefusedAuth(w http.ResponseWriter) {
	c.mu.Lock()
	queue := c.queue
	c.queue, c.queued = nil, 0
	c.mu.Unlock()
	status := http.StatusUnauthorized
	var body []byte
	if len(queue) > 0 {
		body = queue[0].data
		var f struct {
			Payload struct{ Code string } `json:"payload"`
		}
		_ = json.Unmarshal(body, &f) // a frame of our own; without a code the status stays 401
		switch f.Payload.Code {
		case wire.CodeRateLimited:
			status = http.StatusTooManyRequests
		case wire.CodeVersionIncompatible:
			status = http.StatusBadRequest
		case wire.CodeBridgeError:
			status = http.StatusServiceUnavailable
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

// serveSend takes one frame of a fallback connection and dispatches it as
// the WebSocket's read loop would; the answers come down the connection's
// event stream. 202 says the frame was taken.
func (s *Server) serveSend(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(contextWithClass(r.Context(), s.classifier().Classify(r.Context(), r)))
	if !s.checkOrigin(r) {
		s.httpError(w, http.StatusForbidden, wire.TypeError, wire.CodeAuthFailed, "This page's origin may not connect")
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	v, found := s.streams.Load(keyOf(token))
	if !ok || !found {
		s.httpError(w, http.StatusUnauthorized, wire.TypeConnectionError, wire.CodeAuthFailed,
			"This connection has ended (or never was): open a new one at "+wire.EventsPath)
		return
	}
	c := v.(*conn)
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.AuthTimeout))
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.ReadLimit))
	if err != nil {
		s.bodyError(w, err, wire.TypeError)
		return
	}
	select {
	case c.alive <- struct{}{}:
	default:
	}
	// Frames are dispatched one at a time, in the order they arrive, as
	// the WebSocket's single reader does.
	c.readMu.Lock()
	c.dispatch(data)
	c.readMu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// bodyError answers a request body that could not be read: over ReadLimit
// (413, the WebSocket's 1009), or too slow or broken.
func (s *Server) bodyError(w http.ResponseWriter, err error, typ string) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		s.httpError(w, http.StatusRequestEntityTooLarge, typ, wire.CodeInvalidMessage,
			"A frame may hold at most "+strconv.FormatInt(tooBig.Limit, 10)+" bytes")
		return
	}
	s.httpError(w, http.StatusBadRequest, typ, wire.CodeInvalidMessage, "The request's body could not be read")
}

// httpError answers with an error frame (typ: connection_error or error)
// as the body.
func (s *Server) httpError(w http.ResponseWriter, status int, typ, code, message string) {
	if typ == wire.TypeConnectionError {
		s.writeFrame(w, status, typ, wire.ConnectionError{Code: code, Message: message})
		return
	}
	s.writeFrame(w, status, typ, wire.ErrorPayload{Code: code, Message: message, Recoverable: true})
}

func (s *Server) writeFrame(w http.ResponseWriter, status int, typ string, payload any) {
	frame, err := encode(typ, "", s.now(), payload)
	if err != nil {
		s.Logger.Error("encoding frame", "type", typ, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(frame)
}
