package bridge

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/pairing"
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
