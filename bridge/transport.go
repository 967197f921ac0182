package bridge

import (
	"context"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
)

// transport carries a connection's frames to its client: a WebSocket, or
// the HTTPS fallback's event stream (sse.go). Only the writer goroutine
// calls write, keepalive and finish; close may be called from any.
type transport interface {
	// write sends frames in order; an error ends the connection.
	write(batch []outFrame) error
	// keepalive is sent when the connection has been quiet for
	// PingInterval, so that an idle connection stays open through NATs and
	// proxies (conn.keepalive).
	keepalive() error
	// finish tells the client that the connection ends, with a WebSocket
	// close code and reason, after the frames already written.
	finish(code int, reason string)
	// close lets the connection go at once.
	close()
}

// wsTransport writes to a WebSocket.
type wsTransport struct {
	ws   *websocket.Conn
	cork *corkConn // nil when the listener does not cork
	wait time.Duration
	// frameWait bounds the writing of frames: PongWait, as long as a
	// client has to answer at all. A deadline is a runtime timer that
	// wakes the process when it passes even if the write is long done:
	// with WriteWait (10 s) an idle daemon woke 10 s after every
	// heartbeat_pong; with PongWait the next pong (15 s) moves it first.
	frameWait time.Duration
	// ended is done when the connection's reader has finished.
	ended context.Context
}

// write sends frames corked into as few system calls as the socket allows.
func (t *wsTransport) write(batch []outFrame) error {
	if t.cork != nil && len(batch) > 1 {
		t.cork.cork()
	}
	t.ws.SetWriteDeadline(time.Now().Add(t.frameWait))
	for _, f := range batch {
		if err := t.ws.WriteMessage(websocket.TextMessage, f.data); err != nil {
			return err
		}
	}
	if t.cork != nil {
		return t.cork.uncork()
	}
	return nil
}

// keepalive sends a ping carrying the send time, so that the pong tells
// the round-trip time (conn.onPong).
func (t *wsTransport) keepalive() error {
	data := strconv.AppendInt(nil, time.Now().UnixNano(), 10)
	return t.ws.WriteControl(websocket.PingMessage, data, time.Now().Add(t.wait))
}

// finish runs the closing handshake: our close frame, then the reader
// takes the client's before the socket is closed, so that the client reads
// every frame and the code.
func (t *wsTransport) finish(code int, reason string) {
	t.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(t.wait))
	timer := time.NewTimer(closeWait)
	defer timer.Stop()
	select {
	case <-t.ended.Done():
	case <-timer.C:
	}
}

func (t *wsTransport) close() { t.ws.Close() }
