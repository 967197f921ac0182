package bridge

import (
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/pairing"
)

// recordingTransport records the frames written to it, in order.
type recordingTransport struct {
	mu     sync.Mutex
	frames []string
}

func (r *recordingTransport) write(batch []outFrame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range batch {
		r.frames = append(r.frames, string(f.data))
	}
	return nil
}

func (r *recordingTransport) written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.frames)
}

func (*recordingTransport) keepalive() error   { return nil }
func (*recordingTransport) finish(int, string) {}
func (*recordingTransport) close()             {}

// TestWriteNowKeepsOrder: the ack is written by the reader itself only
// when nothing is queued ahead of it; otherwise it goes behind what is.
func TestWriteNowKeepsOrder(t *testing.T) {
	t.Parallel()
	s := &Server{PingInterval: time.Hour, SendQueueBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	c := s.newConn(pairing.Classification{})
	tr := &recordingTransport{}
	c.tr = tr
	c.writeNow([]byte("ack"))
	if got := tr.written(); !slices.Equal(got, []string{"ack"}) {
		t.Fatalf("with nothing queued, writeNow wrote %q before returning; want the ack", got)
	}
	c.enqueue([]byte("queued"))
	c.writeNow([]byte("behind"))
	if got := tr.written(); len(got) != 1 {
		t.Fatalf("writeNow wrote ahead of a queued frame: %q", got)
	}
	go c.writePump()
	select {
	case <-c.drained:
	case <-time.After(wstest.Timeout):
		t.Fatal("the writer did not empty its queue")
	}
	want := []string{"ack", "queued", "behind"}
	if got := tr.written(); !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
	c.closeWith(1000, "")
	c.writeNow([]byte("after close"))
	c.cancel()
	<-c.done
	if got := tr.written(); !slices.Equal(got, want) {
		t.Fatalf("written %q after closing, want still %q", got, want)
	}
}
