package bridge

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/wstest"
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
		if _, err := h.srv.Log.Append(session.Entry{SessionID: "sess_bench", Type: wire.TypeStreamChunk, Payload: payload}); err != nil {
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
				if _, err := h.srv.Log.Append(session.Entry{SessionID: "sess_bench", Type: wire.TypeStreamChunk, Payload: payload}); err != nil {
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
		last := h.srv.Log.Flushed()
		for range missed {
			if _, err := h.srv.Log.Append(session.Entry{SessionID: "sess_bench", Type: wire.TypeStreamChunk, Payload: payload}); err != nil {
				b.Fatal(err)
			}
		}
		for h.srv.Log.Flushed() < last+missed {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		c := h.dial(nil)
		if env := c.Auth(token, map[string]any{"last_seq": last}); env.Type != wire.TypeConnectionAck {
			b.Fatalf("auth: %s", env.Type)
		}
		live, _ := h.srv.Log.Append(session.Entry{SessionID: "sess_bench", Type: wire.TypeStreamEnd, Payload: wire.StreamEnd{SessionID: "sess_bench"}})
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
