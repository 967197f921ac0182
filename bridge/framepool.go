package bridge

import (
	"sync"

	"github.com/tetherdev/tether/wire"
)

// framePool holds the buffers of the file replies' frames (100 KiB for a
// read, as much for a listing of 1,000): written, they are garbage at
// once, and at a phone's pace of browsing they were most of what the
// daemon allocated and so most of what made it collect.
var framePool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledFrame is the largest buffer framePool keeps: a read's 1 MiB
// of content, escaped.
const maxPooledFrame = 2 << 20

// sendPooled queues the frame of a reply that encodes itself, encoded
// into a buffer of framePool's; the writer gives the buffer back once the
// frame is written (releaseFrames). A frame dropped unwritten (the
// connection closed) leaves its buffer to the collector.
func (c *conn) sendPooled(typ, id string, p wire.Appender) {
	bp := framePool.Get().(*[]byte)
	*bp = wire.EncodeAppender((*bp)[:0], wire.Envelope{Type: typ, ID: id, Timestamp: wire.Timestamp(c.s.now())}, p)
	c.enqueueFrame(outFrame{data: *bp, pooled: bp})
}

// releaseFrames gives the pooled buffers of written frames back. Nothing
// holds a frame once the transport has written it: gorilla writes it out
// before WriteMessage returns, and the event stream copies it.
func releaseFrames(frames []outFrame) {
	for _, f := range frames {
		if f.pooled != nil && cap(f.data) <= maxPooledFrame {
			*f.pooled = f.data[:0]
			framePool.Put(f.pooled)
		}
	}
}
