package wstest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tetherdev/tether/wire"
)

// DialSSE returns a Client that speaks the protocol over the HTTPS
// fallback transport of the daemon at base ("https://host:port"): its
// first frame (the auth) opens the event stream, the next ones are POSTed.
// Everything else reads as over a WebSocket: an HTTP error answering the
// auth is its frame followed by a close with 1008, as the WebSocket's
// connection_error and close; the stream's close event is a close frame; a
// stream that ends without one is 1006. header goes with every request.
func DialSSE(t testing.TB, client *http.Client, base string, header http.Header) *Client {
	l := &sseLink{client: client, base: base, header: header, frames: make(chan sseItem, 1024)}
	t.Cleanup(l.close)
	return &Client{T: t, sse: l}
}

// sseItem is a frame, or the end of the connection (data nil).
type sseItem struct {
	data []byte
	id   string // the event's id: line, "" for none
	code int    // close code, when data is nil
}

type sseLink struct {
	client *http.Client
	base   string
	header http.Header

	mu     sync.Mutex
	token  string
	opened bool
	body   io.Closer
	frames chan sseItem
	// ended holds the close code once the connection has ended.
	ended int
	// lastID is the id of the last event read.
	lastID string
}

func (l *sseLink) request(path string, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, l.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range l.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// send opens the stream with the first frame and POSTs the others.
func (l *sseLink) send(frame []byte) error {
	l.mu.Lock()
	opened, token := l.opened, l.token
	l.opened = true
	l.mu.Unlock()
	if !opened {
		return l.open(frame)
	}
	req, err := l.request(wire.SendPath, frame)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		return nil
	}
	// A refused frame answers with an error frame, which the client reads
	// like any other.
	data, _ := io.ReadAll(resp.Body)
	if len(data) == 0 {
		return errors.New("POST " + wire.SendPath + ": " + resp.Status)
	}
	l.frames <- sseItem{data: data}
	return nil
}

func (l *sseLink) open(auth []byte) error {
	req, err := l.request(wire.EventsPath, auth)
	if err != nil {
		return err
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(data) > 0 {
			l.frames <- sseItem{data: data}
		}
		l.frames <- sseItem{code: websocket.ClosePolicyViolation}
		return nil
	}
	l.mu.Lock()
	l.token = resp.Header.Get(wire.ConnectionHeader)
	l.body = resp.Body
	l.mu.Unlock()
	go l.readEvents(resp.Body)
	return nil
}

// readEvents parses the stream into frames until it ends.
func (l *sseLink) readEvents(body io.ReadCloser) {
	defer body.Close()
	r := bufio.NewReader(body)
	var id, name string
	var data []byte
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			l.frames <- sseItem{code: websocket.CloseAbnormalClosure}
			return
		}
		line = strings.TrimSuffix(line, "\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if data == nil {
				continue
			}
			if name == "close" {
				var c wire.StreamClose
				json.Unmarshal(data, &c)
				l.frames <- sseItem{code: c.Code}
				return
			}
			l.frames <- sseItem{data: data, id: id}
			id, name, data = "", "", nil
		case field == "":
			// A comment: the keepalive.
		case field == "id":
			id = value
		case field == "event":
			name = value
		case field == "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
}

// read returns the next frame, or a *websocket.CloseError once the
// connection has ended.
func (l *sseLink) read(wait time.Duration) ([]byte, error) {
	l.mu.Lock()
	ended := l.ended
	l.mu.Unlock()
	if ended != 0 {
		return nil, &websocket.CloseError{Code: ended}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case it := <-l.frames:
		if it.data == nil {
			l.mu.Lock()
			l.ended = it.code
			l.mu.Unlock()
			return nil, &websocket.CloseError{Code: it.code}
		}
		if it.id != "" {
			l.mu.Lock()
			l.lastID = it.id
			l.mu.Unlock()
		}
		return it.data, nil
	case <-t.C:
		return nil, os.ErrDeadlineExceeded
	}
}

func (l *sseLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.body != nil {
		l.body.Close()
	}
}

// LastEventID is the id of the last event read over the fallback
// transport (its seq), "" for none or over a WebSocket.
func (c *Client) LastEventID() string {
	if c.sse == nil {
		return ""
	}
	c.sse.mu.Lock()
	defer c.sse.mu.Unlock()
	return c.sse.lastID
}

// StreamToken is the fallback connection's token, "" before it opened.
func (c *Client) StreamToken() string {
	if c.sse == nil {
		return ""
	}
	c.sse.mu.Lock()
	defer c.sse.mu.Unlock()
	return c.sse.token
}

// Close ends the connection from the client's side.
func (c *Client) Close() {
	if c.sse != nil {
		c.sse.close()
		return
	}
	c.WS.Close()
}
