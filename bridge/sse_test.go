package bridge

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// appendEvents logs n session events and returns their seqs.
func (h *harness) appendEvents(n int, text string) []int64 {
	h.t.Helper()
	var seqs []int64
	for i := range n {
		seq, err := h.srv.Events.Append(session.Entry{SessionID: "s1", Type: wire.TypeStreamChunk,
			Payload: wire.StreamChunk{SessionID: "s1", Content: text + strconv.Itoa(i)}})
		if err != nil {
			h.t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// TestSSEEventsCarryTheirSeqAndResumeFromLastEventID: over the fallback,
// each logged event's SSE id is its seq, and a new stream opened with
// Last-Event-ID gets exactly the events after it, as last_seq would.
func TestSSEEventsCarryTheirSeqAndResumeFromLastEventID(t *testing.T) {
	t.Parallel()
	h := newHarnessOver(t, overSSE, nil)
	token, c, _ := h.paired()
	seqs := h.appendEvents(5, "chunk ")
	for _, want := range seqs {
		env := c.Expect(wire.TypeStreamChunk, nil)
		if env.Seq != want || c.LastEventID() != strconv.FormatInt(want, 10) {
			t.Fatalf("event seq %d id %q, want %d", env.Seq, c.LastEventID(), want)
		}
	}
	c.Close()

	header := http.Header{}
	header.Set("Last-Event-ID", strconv.FormatInt(seqs[2], 10))
	c2 := h.dial(header)
	if env := c2.Auth(token, nil); env.Type != wire.TypeConnectionAck {
		t.Fatalf("reconnect: %s %s", env.Type, env.Payload)
	}
	var got []int64
	for range 2 {
		got = append(got, c2.Expect(wire.TypeStreamChunk, nil).Seq)
	}
	if got[0] != seqs[3] || got[1] != seqs[4] {
		t.Fatalf("resumed with %v, want %v", got, seqs[3:])
	}
	c2.Send(wire.TypeHeartbeatPing, "after-replay", nil)
	if env := c2.Expect(wire.TypeHeartbeatPong, nil); env.ID != "after-replay" {
		t.Fatalf("an event was sent twice, or out of order: %s %q", env.Type, env.ID)
	}
}

// TestSSEOpenRefusals: what a WebSocket would learn from connection_error
// and a close code, the fallback says with an HTTP status and the same
// frame.
func TestSSEOpenRefusals(t *testing.T) {
	t.Parallel()
	h := newHarnessOver(t, overSSE, nil)
	post := func(header http.Header, body string) (int, wire.Envelope) {
		req, _ := http.NewRequest(http.MethodPost, h.ts.URL+wire.EventsPath, strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := h.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env wire.Envelope
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(data, &env); err != nil {
				t.Fatalf("%d answer %q is not a frame", resp.StatusCode, data)
			}
		}
		return resp.StatusCode, env
	}
	code := func(env wire.Envelope) string {
		var ce wire.ConnectionError
		json.Unmarshal(env.Payload, &ce)
		return ce.Code
	}
	for _, tt := range []struct {
		name   string
		header http.Header
		body   string
		status int
		code   string
	}{
		{"bad token", nil, `{"type":"auth","id":"a","payload":{"token":"tdt_nope"}}`, 401, wire.CodeAuthFailed},
		{"not auth", nil, `{"type":"heartbeat_ping"}`, 401, wire.CodeAuthFailed},
		{"not JSON", nil, `hello`, 401, wire.CodeAuthFailed},
		{"newer protocol", nil, `{"type":"auth","payload":{"token":"x","protocol_version":"2.0"}}`, 400, wire.CodeVersionIncompatible},
		{"foreign origin", http.Header{"Origin": {"https://evil.example"}}, `{"type":"auth","payload":{"token":"x"}}`, 403, wire.CodeAuthFailed},
		{"bad Last-Event-ID", http.Header{"Last-Event-Id": {"-3"}}, `{"type":"auth","payload":{"token":"x"}}`, 400, wire.CodeInvalidMessage},
		{"over the read limit", nil, `{"type":"auth","payload":{"token":"` + strings.Repeat("x", DefaultReadLimit) + `"}}`, 413, wire.CodeInvalidMessage},
	} {
		status, env := post(tt.header, tt.body)
		if status != tt.status || env.Type != wire.TypeConnectionError || code(env) != tt.code {
			t.Errorf("%s: %d %s %s, want %d %s", tt.name, status, env.Type, code(env), tt.status, tt.code)
		}
	}
	// The page's own origin opens a stream.
	status, _ := post(http.Header{"Origin": {h.srv.Origins[0]}}, `{"type":"auth","payload":{"token":"`+h.code(store.CodeOnce)+`"}}`)
	if status != http.StatusOK {
		t.Fatalf("own origin: %d", status)
	}
}

// TestSSESendRefusals: a POST without a live connection's token, or over
// the read limit, is refused with an error frame; the connection survives
// a refused frame.
func TestSSESendRefusals(t *testing.T) {
	t.Parallel()
	h := newHarnessOver(t, overSSE, func(s *Server) { s.ReadLimit = 4096 })
	_, c, _ := h.paired()
	send := func(token, body string) (int, wire.Envelope) {
		req, _ := http.NewRequest(http.MethodPost, h.ts.URL+wire.SendPath, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := h.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env wire.Envelope
		if data, _ := io.ReadAll(resp.Body); len(data) > 0 {
			json.Unmarshal(data, &env)
		}
		return resp.StatusCode, env
	}
	ping := `{"type":"heartbeat_ping","id":"p"}`
	if status, env := send("", ping); status != 401 || env.Type != wire.TypeConnectionError {
		t.Fatalf("no token: %d %s", status, env.Type)
	}
	if status, env := send(c.StreamToken()+"x", ping); status != 401 || env.Type != wire.TypeConnectionError {
		t.Fatalf("wrong token: %d %s", status, env.Type)
	}
	big := `{"type":"heartbeat_ping","payload":{"pad":"` + strings.Repeat("x", 5000) + `"}}`
	var ep wire.ErrorPayload
	if status, env := send(c.StreamToken(), big); status != 413 || env.Type != wire.TypeError || json.Unmarshal(env.Payload, &ep) != nil || ep.Code != wire.CodeInvalidMessage {
		t.Fatalf("over the limit: %d %s %s", status, env.Type, env.Payload)
	}
	if status, _ := send(c.StreamToken(), ping); status != http.StatusAccepted {
		t.Fatalf("a frame after a refused one: %d", status)
	}
	if env := c.Expect(wire.TypeHeartbeatPong, nil); env.ID != "p" {
		t.Fatalf("pong id %q", env.ID)
	}
	// The token ends with its connection: once the server has seen the
	// stream close, it takes no more frames.
	token := c.StreamToken()
	c.Close()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wstest.Timeout)
	for h.srv.Connected() > 0 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("the server never saw the stream close")
		}
	}
	if status, env := send(token, ping); status != 401 || env.Type != wire.TypeConnectionError {
		t.Fatalf("the token of a closed stream: %d %s", status, env.Type)
	}
}

// TestSSEClientThatStopsPostingIsDropped: the fallback has no pongs, so a
// client must POST (a heartbeat_ping at least) within PongWait; one that
// does not is dropped, and one that does stays.
func TestSSEClientThatStopsPostingIsDropped(t *testing.T) {
	t.Parallel()
	h := newHarnessOver(t, overSSE, func(s *Server) { s.PongWait = 300 * time.Millisecond })
	start := time.Now()
	_, quiet, _ := h.paired()
	_, chatty, _ := h.paired()
	done := make(chan int)
	go func() { done <- quiet.ExpectClose() }()
	for {
		select {
		case code := <-done:
			if code != websocket.CloseAbnormalClosure {
				t.Fatalf("quiet client closed with %d, want the stream to end (1006)", code)
			}
			if time.Since(start) < 300*time.Millisecond {
				t.Fatalf("dropped after %v, before PongWait", time.Since(start))
			}
			chatty.Send(wire.TypeHeartbeatPing, "still", nil)
			if env := chatty.Expect(wire.TypeHeartbeatPong, nil); env.ID != "still" {
				t.Fatalf("pong %q", env.ID)
			}
			return
		case <-time.After(100 * time.Millisecond):
			chatty.Send(wire.TypeHeartbeatPing, "", nil)
			chatty.Expect(wire.TypeHeartbeatPong, nil)
		}
	}
}
