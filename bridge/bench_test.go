package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/fileops"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/wire"
)

// BenchmarkStreamChunks measures stream_chunk events per second reaching
// each of 1 or 10 phones over wss or the HTTPS fallback, every chunk
// written to the durable event log before it is sent (the agent side is
// the log's Append, as fast as it goes). Reported: chunks/s per phone, and
// the bytes the server wrote to its sockets per chunk and phone (TLS
// records, and the HTTP chunk framing of the fallback, included).
func BenchmarkStreamChunks(b *testing.B) {
	for _, tr := range []string{overWebSocket, overSSE} {
		for _, phones := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/phones=%d", tr, phones), func(b *testing.B) { benchStreamChunks(b, tr, phones) })
		}
	}
}

func benchStreamChunks(b *testing.B, transport string, phones int) {
	h := newHarnessOver(b, transport, func(s *Server) { s.SendQueueBytes = 64 << 20 })
	token, first, _ := h.paired()
	first.Close()
	clients := make([]*wstest.Client, phones)
	for i := range clients {
		c := h.dial(nil)
		if env := c.Auth(token, nil); env.Type != wire.TypeConnectionAck {
			b.Fatalf("auth: %s", env.Type)
		}
		clients[i] = c
	}
	payload := wire.StreamChunk{SessionID: "sess_bench", MessageID: "msg_bench", Content: "a chunk of streamed text, "}
	// The producer stays at most window chunks ahead of the slowest
	// phone, as an agent paced by the phones would.
	const window = 8192
	received := make([]atomic.Int64, phones)
	slowest := func() int64 {
		m := received[0].Load()
		for i := range received {
			m = min(m, received[i].Load())
		}
		return m
	}
	var wg sync.WaitGroup
	out := h.out.Load()
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func(c *wstest.Client, got *atomic.Int64) {
			defer wg.Done()
			for n := int64(0); n < int64(b.N); {
				data, err := c.ReadRaw(30 * time.Second)
				if err != nil {
					b.Errorf("read after %d chunks: %v", n, err)
					return
				}
				if len(data) > 21 && string(data[9:21]) == "stream_chunk" {
					n++
					got.Store(n)
				}
			}
		}(c, &received[i])
	}
	b.ResetTimer()
	for i := range b.N {
		for int64(i)-slowest() > window {
			time.Sleep(50 * time.Microsecond)
		}
		if _, err := h.srv.Events.Append(session.Entry{SessionID: "sess_bench", Type: wire.TypeStreamChunk, Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "chunks/s/phone")
	b.ReportMetric(float64(h.out.Load()-out)/float64(b.N*phones), "wire-B/chunk")
}

// BenchmarkEventLatency measures one event's way from the log's Append to
// a phone's read, one event at a time, over wss and over the HTTPS
// fallback. Reported: p50 and p99 in microseconds.
func BenchmarkEventLatency(b *testing.B) {
	for _, tr := range []string{overWebSocket, overSSE} {
		b.Run(tr, func(b *testing.B) {
			h := newHarnessOver(b, tr, nil)
			_, c, _ := h.paired()
			payload := wire.StreamChunk{SessionID: "sess_bench", MessageID: "msg_bench", Content: "a chunk of streamed text, "}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := h.srv.Events.Append(session.Entry{SessionID: "sess_bench", Type: wire.TypeStreamChunk, Payload: payload}); err != nil {
					b.Fatal(err)
				}
				if _, err := c.ReadRaw(10 * time.Second); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkReconnectMissed measures a phone reconnecting with last_seq
// after missing 10,000 events: from dialing to holding every missed event
// and a live one appended after it connected.
func BenchmarkReconnectMissed(b *testing.B) {
	const missed = 10_000
	h := newHarness(b, nil)
	token, first, _ := h.paired()
	first.Close()
	payload := wire.StreamChunk{SessionID: "sess_bench", MessageID: "msg_bench", Content: "a chunk of streamed text, "}
	lat := make([]time.Duration, 0, b.N)
	for range b.N {
		b.StopTimer()
		last := h.srv.Events.Flushed()
		for range missed {
			if _, err := h.srv.Events.Append(session.Entry{SessionID: "sess_bench", Type: wire.TypeStreamChunk, Payload: payload}); err != nil {
				b.Fatal(err)
			}
		}
		for h.srv.Events.Flushed() < last+missed {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		c := h.dial(nil)
		if env := c.Auth(token, map[string]any{"last_seq": last}); env.Type != wire.TypeConnectionAck {
			b.Fatalf("auth: %s", env.Type)
		}
		live, _ := h.srv.Events.Append(session.Entry{SessionID: "sess_bench", Type: wire.TypeStreamEnd, Payload: wire.StreamEnd{SessionID: "sess_bench"}})
		want := last + 1
		for want <= live {
			env := c.Read()
			if env.Seq != want {
				b.Fatalf("got seq %d, want %d", env.Seq, want)
			}
			want++
		}
		lat = append(lat, time.Since(start))
		c.Close()
		c.Seen = nil
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "live-p50-ms")
}

// BenchmarkAuth measures a paired device's connection over wss: each
// iteration dials (TCP, TLS, upgrade), authenticates and closes. Reported
// besides ns/op: the p50 and p99 from the auth frame sent to
// connection_ack read, which is the server's own work (device lookup,
// sessions, approvals, the stream's start) and what waits on the store.
func BenchmarkAuth(b *testing.B) {
	h := newHarness(b, nil)
	token, first, _ := h.paired()
	first.Close()
	var lat []time.Duration
	for b.Loop() {
		c := h.dial(nil)
		t0 := time.Now()
		if env := c.Auth(token, nil); env.Type != wire.TypeConnectionAck {
			b.Fatalf("auth: %s", env.Type)
		}
		lat = append(lat, time.Since(t0))
		c.Close()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "auth-ack-p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "auth-ack-p99-µs")
}

// BenchmarkFirstChunk measures the daemon's share of the way from a
// phone's message to the first streamed text, directly: at the phone's
// side of the daemon, the message frame leaving the client and the first
// stream_chunk frame read by it (over wss on loopback); at the sandbox's
// side, the query command handed to the session's bridge socket and the
// first text delta handed over by the socket's reader. The share is
// (query written − message sent) + (chunk read − delta received): the
// daemon's reading, dispatch and queueing, the log's commit of each event
// before it is sent (an fsync), and the writing, with the loopback and
// the client's TLS counted against the daemon. Its two parts are
// reported too (in: message to query; out: delta to chunk), and the
// agent's own time (the demo, in a real sandbox) beside them.
func BenchmarkFirstChunk(b *testing.B) {
	edges := &edgeSpawner{}
	h := newHarnessWith(b, overWebSocket, edges, nil)
	_, c, _ := h.paired()
	const id = "first-chunk"
	c.Send(wire.TypeSessionStart, "s", map[string]any{"agent": "demo", "session_id": id, "working_directory": h.work})
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	turnDone := func(e wire.Envelope) bool { return e.Type == wire.TypeTurnComplete }
	var share, in, out, agentTime []time.Duration
	for i := 0; b.Loop(); i++ {
		frame, err := json.Marshal(map[string]any{"type": wire.TypeMessage, "id": fmt.Sprintf("m%d", i),
			"payload": map[string]any{"session_id": id, "content": "hello"}})
		if err != nil {
			b.Fatal(err)
		}
		edges.arm()
		sent := time.Now()
		if err := c.WS.WriteMessage(websocket.TextMessage, frame); err != nil {
			b.Fatal(err)
		}
		var chunk time.Time
		for chunk.IsZero() {
			_, data, err := c.WS.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(data, []byte(`"type":"stream_chunk"`)) {
				chunk = time.Now()
			}
		}
		queried, delta := edges.times()
		if queried.IsZero() || delta.IsZero() || queried.Before(sent) || chunk.Before(delta) {
			b.Fatalf("edges out of order: sent %v, queried %v, delta %v, chunk %v", sent, queried, delta, chunk)
		}
		share = append(share, queried.Sub(sent)+chunk.Sub(delta))
		in, out = append(in, queried.Sub(sent)), append(out, chunk.Sub(delta))
		agentTime = append(agentTime, delta.Sub(queried))
		c.WaitFor(wire.TypeTurnComplete, nil, turnDone)
	}
	b.StopTimer()
	for _, m := range []struct {
		name string
		d    []time.Duration
		p99  bool
	}{{"daemon", share, true}, {"in", in, true}, {"out", out, true}, {"agent", agentTime, false}} {
		slices.Sort(m.d)
		b.ReportMetric(float64(m.d[len(m.d)/2].Microseconds()), m.name+"-p50-µs")
		if m.p99 {
			b.ReportMetric(float64(m.d[len(m.d)*99/100].Microseconds()), m.name+"-p99-µs")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.srv.Sessions.Shutdown(ctx)
}

// edgeSpawner starts real sandboxes and notes, for the turn armed last,
// when the query command was written to the bridge and when the first
// text delta came back from it.
type edgeSpawner struct {
	mu             sync.Mutex
	queried, delta time.Time
}

func (e *edgeSpawner) arm() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queried, e.delta = time.Time{}, time.Time{}
}

func (e *edgeSpawner) times() (queried, delta time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.queried, e.delta
}

func (e *edgeSpawner) Spawn(ctx context.Context, spec sandbox.Spec) (session.Sandbox, error) {
	sb, err := session.Sandboxes.Spawn(ctx, spec)
	if err != nil {
		return nil, err
	}
	s := &edgeSandbox{Sandbox: sb, e: e, events: make(chan sandbox.Event)}
	go s.forward()
	return s, nil
}

func (e *edgeSpawner) Attach(ctx context.Context, conn net.Conn, id string, logger *slog.Logger) (session.Sandbox, error) {
	return session.Sandboxes.Attach(ctx, conn, id, logger)
}

type edgeSandbox struct {
	session.Sandbox
	e      *edgeSpawner
	events chan sandbox.Event
}

// Send notes the time a query is handed to the socket: after the write
// the goroutine may wait for a core while the bridge already answers.
func (s *edgeSandbox) Send(cmd sandbox.BridgeCommand) error {
	if cmd.Cmd == sandbox.CmdQuery {
		now := time.Now()
		s.e.mu.Lock()
		s.e.queried = now
		s.e.mu.Unlock()
	}
	return s.Sandbox.Send(cmd)
}

func (s *edgeSandbox) Events() <-chan sandbox.Event { return s.events }

// forward passes the bridge's events on, noting the turn's first text
// delta as it arrives.
func (s *edgeSandbox) forward() {
	defer close(s.events)
	for ev := range s.Sandbox.Events() {
		if ev.Ev == sandbox.EvMessage && bytes.Contains(ev.Data, []byte(`"text_delta"`)) {
			now := time.Now()
			s.e.mu.Lock()
			if s.e.delta.IsZero() {
				s.e.delta = now
			}
			s.e.mu.Unlock()
		}
		s.events <- ev
	}
}

// BenchmarkFileReplies measures what the daemon does for file_list of
// 1,000 entries and file_read of 100 KiB besides the socket: fileops's
// work, the reply's conversion to the protocol's types and its encoding
// as a frame.
func BenchmarkFileReplies(b *testing.B) {
	dir := b.TempDir()
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%04d.txt", i)), []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	line := "\tif err := doSomething(ctx, 42); err != nil { return err }\n"
	if err := os.WriteFile(filepath.Join(dir, "100k.go"), []byte(strings.Repeat(line, (100<<10)/len(line))), 0o644); err != nil {
		b.Fatal(err)
	}
	root, err := fileops.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	now := time.Now()
	b.Run("list1000", func(b *testing.B) {
		for b.Loop() {
			l, err := root.List(".", fileops.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := encode(wire.TypeFileListResponse, "r", now, wire.FileListResponse{SessionID: "s", FileListing: wireListing(l)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read100KiB", func(b *testing.B) {
		for b.Loop() {
			f, err := root.Read("100k.go", fileops.ReadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := encode(wire.TypeFileReadResponse, "r", now, wire.FileReadResponse{SessionID: "s", FileContent: wireFile(f)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
