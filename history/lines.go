package history

import (
	"bufio"
	"errors"
	"io"
	"os"
	"time"

	"github.com/tetherdev/tether/session"
)

// Bounds of what is read of a transcript.
const (
	// MaxLine is the longest line read; a longer one (a huge tool result)
	// is skipped whole, without being held in memory.
	MaxLine = 1 << 20
	// readBuffer is the size of a file's read buffer.
	readBuffer = 64 << 10
)

// eachLine calls fn with every complete line of r (without its '\n') and
// the offset it starts at, r's first byte being at offset from. Lines over
// MaxLine are skipped and counted. A last line without its '\n' (still
// being written) is left for the next read. fn returning false stops the
// read after that line. end is the offset just after the last line read.
func eachLine(r io.Reader, from int64, fn func(line []byte, at int64) bool) (end int64, overlong int, err error) {
	br := bufio.NewReaderSize(r, readBuffer)
	var long []byte
	skipping := false
	off, start := from, from
	for {
		chunk, err := br.ReadSlice('\n')
		off += int64(len(chunk))
		if errors.Is(err, bufio.ErrBufferFull) {
			if !skipping && len(long)+len(chunk) <= MaxLine {
				long = append(long, chunk...)
			} else {
				skipping, long = true, long[:0]
			}
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return start, overlong, err
		}
		line := chunk[:len(chunk)-1]
		switch {
		case skipping || len(long)+len(line) > MaxLine:
			overlong++
		default:
			if len(long) > 0 {
				long = append(long, line...)
				line = long
			}
			if !fn(line, start) {
				return off, overlong, nil
			}
		}
		long, skipping, start = long[:0], false, off
	}
}

// fileState is what identifies the contents of a file read before: a file
// that still has its identity, has not shrunk and still ends a line where
// the last read stopped is read on from there.
type fileState struct {
	id   string // device and inode
	size int64
	mod  time.Time
	end  int64 // just after the last complete line read
}

// continues reports whether the open file f (info its stat) goes on from
// where s stopped.
func (s fileState) continues(f *os.File, info os.FileInfo) bool {
	if s.id == "" || s.id != session.FileID(info) || info.Size() < s.end {
		return false
	}
	if s.end == 0 {
		return true
	}
	var b [1]byte
	_, err := f.ReadAt(b[:], s.end-1)
	return err == nil && b[0] == '\n'
}
