package bridge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
)

// heapGrowth runs f and returns by how much the heap in use grew at its
// peak, sampled every 2 ms.
func heapGrowth(f func()) int64 {
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-sampled
	return int64(peak.Load()) - int64(base.HeapInuse)
}

// flood writes frames without reading anything, until n are written or
// the server stops reading, and returns how many were written.
func flood(c *wstest.Client, n int, frame func(i int) []byte) int {
	sent := 0
	for ; sent < n; sent++ {
		c.WS.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if c.WS.WriteMessage(websocket.TextMessage, frame(sent)) != nil {
			break
		}
	}
	return sent
}

// heapBound is the most the heap may grow by for unread answers: the
// queue's bound, the requests running (a file's content, its JSON and the
// frame's) and the garbage not yet collected; without the bound it grew by
// everything asked for (400 MB for 400 file reads of 1 MB).
const heapBound = 64 << 20

// patientWriter lets the server wait for a client that reads only after it
// has written everything: a write that waited less would end the
// connection first (1006), where the queue's bound must.
func patientWriter(s *Server) { s.WriteWait = 2 * time.Minute }

// TestSlowReaderOfAnswersIsDisconnected: a client asks for answers of
// 64 KiB (heartbeats with long ids) and reads none while it asks. The
// socket buffers fill, the queue reaches its bound in bytes and the server
// closes with 1013 rather than hold the answers: its heap, sampled
// throughout, grows by a fraction of what was asked for.
func TestSlowReaderOfAnswersIsDisconnected(t *testing.T) {
	t.Parallel()
	h := newHarness(t, patientWriter)
	_, c, _ := h.paired()
	frame := []byte(`{"type":"heartbeat_ping","id":"` + strings.Repeat("p", 64<<10) + `"}`)
	// 25 MB of answers: well past the queue's 8 MiB and the sockets'
	// buffers. The client then stops sending, so that the server closes a
	// socket with nothing unread (a reset would lose the close frame).
	var sent, code int
	grew := heapGrowth(func() {
		sent = flood(c, 400, func(int) []byte { return frame })
		code = c.ExpectClose()
	})
	t.Logf("%d pings of 64 KiB sent (%d MB of answers asked for); the heap grew by at most %.1f MB", sent, sent>>4, float64(grew)/(1<<20))
	if code != websocket.CloseTryAgainLater {
		t.Fatalf("close code %d, want 1013", code)
	}
	if grew > heapBound {
		t.Fatalf("the heap grew by %d bytes for answers nobody read", grew)
	}
}

// TestUnreadFileReadsHoldBoundedBytes: 400 file_read of a 1 MB file,
// none of the answers read. They once took 400 MB of queue; now the
// connection is closed with 1013 and the heap grows by about the queue's
// bound, whatever was asked.
func TestUnreadFileReadsHoldBoundedBytes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "big.txt"), []byte(strings.Repeat("0123456789abcdef\n", 1<<20/17)), 0o644)
	h := newHarness(t, func(s *Server) {
		patientWriter(s)
		m, err := session.NewManager(context.Background(), session.Config{Store: s.Store, Events: s.Events, Agents: []string{"demo"}, Roots: []string{root}})
		if err != nil {
			t.Fatal(err)
		}
		s.Sessions = m
	})
	now := time.Now()
	if err := h.st.CreateSession(context.Background(), store.Session{ID: "files", Agent: "claude-code", Source: "hooks",
		WorkingDirectory: root, Status: store.StatusIdle, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	_, c, _ := h.paired()
	// Four at a time (the most a connection may run), each four once the
	// server has answered them, so that none is refused; the rest at once
	// when the server has stopped answering.
	var sent, code int
	read := func(i int) []byte {
		return fmt.Appendf(nil, `{"type":"file_read","id":"r%d","payload":{"session_id":"files","path":"big.txt"}}`, sent+i)
	}
	grew := heapGrowth(func() {
		for sent < 400 {
			n := flood(c, MaxRequests, read)
			sent += n
			if n < MaxRequests || !h.answered(sent) {
				break
			}
		}
		sent += flood(c, 400-sent, read)
		code = c.ExpectClose()
	})
	t.Logf("%d file_read of 1 MB sent; the heap grew by at most %.1f MB", sent, float64(grew)/(1<<20))
	if code != websocket.CloseTryAgainLater {
		t.Fatalf("close code %d, want 1013", code)
	}
	if grew > heapBound {
		t.Fatalf("the heap grew by %d bytes for answers nobody read", grew)
	}
}

// answered waits until the server's connection has answered n requests,
// and reports false when it is closing or gone.
func (h *harness) answered(n int) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		h.srv.mu.Lock()
		var done int64 = -1
		for c := range h.srv.conns {
			if !c.isClosing() {
				done = c.answered.Load()
			}
		}
		h.srv.mu.Unlock()
		if done < 0 {
			return false
		}
		if done >= int64(n) {
			return true
		}
	}
	h.t.Fatalf("%d requests not answered after 10 s", n)
	return false
}
