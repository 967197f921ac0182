package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// TestPooledFramesKeptUntilWritten: file replies queued behind one
// another each keep their own buffer until the writer has written them,
// and buffers given back are reused without touching frames written
// later.
func TestPooledFramesKeptUntilWritten(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 19, 0, 0, 0, time.UTC)
	s := &Server{PingInterval: time.Hour, SendQueueBytes: 64 << 20, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}
	c := s.newConn(pairing.Classification{})
	tr := &recordingTransport{}
	c.tr = tr
	var want []string
	send := func(i int) {
		p := wire.FileReadResponse{SessionID: "s", FileContent: &wire.FileContent{Path: fmt.Sprint(i), Content: strings.Repeat(fmt.Sprintf("<%d>\n", i), 1000*(i%3+1))}}
		payload, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		frame, err := json.Marshal(wire.Envelope{Type: wire.TypeFileReadResponse, ID: fmt.Sprint(i), Timestamp: wire.Timestamp(now), Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(frame))
		c.sendPooled(wire.TypeFileReadResponse, fmt.Sprint(i), p)
	}
	drained := func() {
		select {
		case <-c.drained:
		case <-time.After(wstest.Timeout):
			t.Fatal("the writer did not empty its queue")
		}
	}
	for i := range 4 {
		send(i)
	}
	go c.writePump()
	drained()
	for i := 4; i < 12; i++ {
		send(i)
		drained()
	}
	if got := tr.written(); !slices.Equal(got, want) {
		t.Errorf("written frames differ from their encodings (%d written, %d sent)", len(got), len(want))
	}
	c.cancel()
	<-c.done
}

// TestFileRepliesOverBothTransports sends reads of different files back to
// back over the WebSocket and the HTTPS fallback: each reply, whose frame
// came from the pool, must be its own file's, whole.
func TestFileRepliesOverBothTransports(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		root := t.TempDir()
		want := map[string]string{}
		for i := range MaxRequests {
			name := fmt.Sprintf("f%d.txt", i)
			want[name] = strings.Repeat(fmt.Sprintf("line of %s <&>\t\"\n", name), 1000*(i+1))
			if err := os.WriteFile(filepath.Join(root, name), []byte(want[name]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		h := newHarnessOver(t, transport, func(s *Server) {
			m, err := session.NewManager(context.Background(), session.Config{Store: s.Store, Events: s.Events, Agents: []string{"demo"}, Roots: []string{root}})
			if err != nil {
				t.Fatal(err)
			}
			s.Sessions = m
		})
		now := time.Now()
		if err := h.st.CreateSession(context.Background(), store.Session{ID: "files", Agent: "claude-code", Source: store.SourceHooks,
			WorkingDirectory: root, Status: store.StatusIdle, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		_, c, _ := h.paired()
		for round := range 3 {
			for name := range want {
				c.Send(wire.TypeFileRead, fmt.Sprint(round, name), map[string]any{"session_id": "files", "path": name})
			}
			for range want {
				var got wire.FileReadResponse
				env := c.WaitFor(wire.TypeFileReadResponse, &got, nil)
				if got.FileContent == nil || env.ID != fmt.Sprint(round, got.Path) || got.Content != want[got.Path] {
					t.Fatalf("round %d, reply %s: a reply of another file or cut (%q, %d bytes)", round, env.ID, got.Path, len(got.Content))
				}
			}
		}
	})
}
