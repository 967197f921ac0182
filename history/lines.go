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
	// MaxFile is how much of a file the index reads: the summary of a
	// longer one (an agent can make a sparse file of a terabyte for free,
	// or keep appending) is of its first MaxFile bytes, and it is not read
	// again while it goes on. Real transcripts are far smaller: the
	// generated history's are 200 KB on average, long sessions reach tens
	// of MB.
	MaxFile = 64 << 20
	// maxPageRead is how much of a file one page of its conversation reads,
	// back from where the page ends: its newest lines, whatever the file's
	// size. A page (200 events, tool results of up to tens of KB) takes a
	// few hundred KB of a real transcript; a window that holds no line
	// ends the pages.
	maxPageRead = 8 << 20
	// readBuffer is the size of a file's read buffer.
	readBuffer = 64 << 10
)

// nextLine returns the offset just after the first '\n' of r in [from,
// to); ok is false when there is none.
func nextLine(r io.ReaderAt, from, to int64) (after int64, ok bool, err error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, from, to-from), readBuffer)
	off := from
	for {
		chunk, err := br.ReadSlice('\n')
		off += int64(len(chunk))
		switch {
		case err == nil:
			return off, true, nil
		case errors.Is(err, io.EOF):
			return 0, false, nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return 0, false, err
		}
	}
}

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
	// skip, when not 0, is where the next read starts: the bytes from end
	// to skip are part of a line already over MaxLine, read once.
	skip int64
	// partial says the file is longer than MaxFile: what is past it is
	// not read.
	partial bool
}

// continues reports whether the open file f (info its stat) goes on from
// where s stopped.
func (s fileState) continues(f *os.File, info os.FileInfo) bool {
	if s.id == "" || s.id != session.FileID(info) || info.Size() < max(s.end, s.skip) {
		return false
	}
	if s.end == 0 {
		return true
	}
	var b [1]byte
	_, err := f.ReadAt(b[:], s.end-1)
	return err == nil && b[0] == '\n'
}
