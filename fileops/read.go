package fileops

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"
)

// Read limits.
const (
	// MaxContentBytes is the most content one Read returns: 1 MiB.
	MaxContentBytes = 1 << 20
	// SniffBytes is how much of the start of a file decides whether it is
	// binary: 8 KiB, as git does.
	SniffBytes = 8 << 10
	// MaxCountBytes is how far past the returned content lines are still
	// counted: Read scans until it has the content and at least this many
	// bytes of the file, then stops (64 MiB).
	MaxCountBytes = 64 << 20
)

// Encodings reported in File.Encoding.
const (
	// EncodingUTF8 marks text: File.Content holds it.
	EncodingUTF8 = "utf-8"
	// EncodingBinary marks a binary file: File.Content is empty.
	EncodingBinary = "binary"
)

const chunkBytes = 64 << 10

// chunkPool holds read buffers and contentPool content buffers, so that a
// Read allocates little more than the content string it returns.
var (
	chunkPool = sync.Pool{New: func() any {
		b := make([]byte, chunkBytes)
		return &b
	}}
	contentPool = sync.Pool{New: func() any { return new([]byte) }}
)

// ReadOptions select the lines a Read returns.
type ReadOptions struct {
	// Offset is the index of the first line returned (0 is the first line).
	Offset int
	// Limit is the most lines returned; 0 means as many as fit in
	// MaxContentBytes.
	Limit int
}

// File is part of a file's content; the bridge sends it as
// wire.FileContent.
type File struct {
	// Path is the file's root-relative path.
	Path string
	// Content holds the asked lines, verbatim; "" for a binary file.
	Content string
	// Size is the size of the whole file in bytes.
	Size int64
	// Lines is the number of lines in the whole file; 0 for a binary file.
	Lines int
	// LinesPartial is true when the file was too long to count all its
	// lines (see MaxCountBytes); Lines is then a lower bound.
	LinesPartial bool
	// Offset is the index of the first line in Content.
	Offset int
	// ReturnedLines is the number of lines in Content.
	ReturnedLines int
	// Truncated is true when more of the file follows Content.
	Truncated bool
	// Encoding is EncodingUTF8, or EncodingBinary for a binary file.
	Encoding string
	// Binary is true when the file is not UTF-8 text.
	Binary bool
	// MIME is the file's media type, from its name or its first bytes.
	MIME string
}

// Read returns lines of the regular file at clientPath. It never blocks on
// a FIFO or a device: those, and directories, are refused with ErrNotFile.
func (r *Root) Read(clientPath string, opts ReadOptions) (*File, error) {
	f, err := r.read(clientPath, opts)
	if err != nil {
		return nil, fmt.Errorf("fileops: read %q: %w", clientPath, err)
	}
	return f, nil
}

func (r *Root) read(clientPath string, opts ReadOptions) (*File, error) {
	if opts.Offset < 0 || opts.Limit < 0 {
		return nil, ErrInvalidRange
	}
	rel, err := r.rel(clientPath)
	if err != nil {
		return nil, err
	}
	real, fi, err := r.stat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, ErrNotFile
	}
	f, err := r.root.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, classify(err)
	}
	defer f.Close()
	// The stat above keeps FIFOs and devices from being opened at all;
	// O_NONBLOCK keeps one swapped in meanwhile from blocking the open.
	// A regular file that replaced the one stat'ed (an editor's atomic
	// save) is read: it is what the path names now.
	ofi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !ofi.Mode().IsRegular() {
		return nil, ErrNotFile
	}
	out := &File{Path: rel, Size: ofi.Size(), Offset: opts.Offset, Encoding: EncodingUTF8}

	bufp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bufp)
	buf := *bufp
	n, err := io.ReadAtLeast(f, buf, SniffBytes)
	eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	if err != nil && !eof {
		return nil, err
	}
	head := buf[:n]
	if isBinary(head[:min(n, SniffBytes)], n > SniffBytes || !eof) {
		out.Binary = true
		out.Encoding = EncodingBinary
		out.MIME = binaryMIME(rel, head)
		return out, nil
	}
	out.MIME = textMIME(rel)

	s := lineScanner{offset: opts.Offset, limit: opts.Limit}
	cp := contentPool.Get().(*[]byte)
	if want := min(ofi.Size()+1, MaxContentBytes+1); int64(cap(*cp)) < want {
		*cp = make([]byte, 0, want)
	}
	s.content = (*cp)[:0]
	defer func() {
		*cp = s.content[:0]
		contentPool.Put(cp)
	}()
	s.feed(head)
	for !eof && !s.enough() {
		n, err := f.Read(buf)
		s.feed(buf[:n])
		if errors.Is(err, io.EOF) {
			eof = true
		} else if err != nil {
			return nil, err
		}
	}
	s.finish(out, eof)
	return out, nil
}

// isBinary reports whether head, the start of a file, marks it as binary:
// a NUL byte or invalid UTF-8. When more follows head, a rune cut at its
// end is not held against it.
func isBinary(head []byte, more bool) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	if utf8.Valid(head) {
		return false
	}
	if !more {
		return true
	}
	for k := 1; k <= utf8.UTFMax-1 && k <= len(head); k++ {
		if utf8.RuneStart(head[len(head)-k]) {
			return utf8.FullRune(head[len(head)-k:]) || !utf8.Valid(head[:len(head)-k])
		}
	}
	return true
}

// textMIME returns the media type of a text file called name: its
// extension's when that is a text type, else text/plain.
func textMIME(name string) string {
	t := mime.TypeByExtension(path.Ext(name))
	if strings.HasPrefix(t, "text/") || strings.Contains(t, "json") ||
		strings.Contains(t, "xml") || strings.Contains(t, "javascript") {
		return t
	}
	return "text/plain; charset=utf-8"
}

// binaryMIME returns the media type of a binary file called name starting
// with head: sniffed from head, else its extension's.
func binaryMIME(name string, head []byte) string {
	t := http.DetectContentType(head)
	if t == "application/octet-stream" {
		if e := mime.TypeByExtension(path.Ext(name)); e != "" {
			return e
		}
	}
	return t
}

// lineScanner picks lines out of a file fed to it in chunks and counts all
// of its lines.
type lineScanner struct {
	offset, limit int

	state    int   // scanSkip, scanCollect or scanDone
	line     int   // index of the line the skip or collection is in
	newlines int   // "\n" seen in the whole file
	read     int64 // bytes fed
	last     byte  // last byte fed
	start    int64 // file position of the first byte of content
	content  []byte
	cut      bool // the content cap stopped the collection
}

const (
	scanSkip = iota
	scanCollect
	scanDone
)

// enough reports whether the scanner needs no more input.
func (s *lineScanner) enough() bool {
	return s.state == scanDone && s.read >= MaxCountBytes
}

// feed hands the scanner the next chunk of the file.
func (s *lineScanner) feed(p []byte) {
	if len(p) == 0 {
		return
	}
	s.newlines += bytes.Count(p, []byte{'\n'})
	q := p
	for s.state == scanSkip {
		if s.line == s.offset {
			s.state = scanCollect
			s.start = s.read + int64(len(p)-len(q))
			break
		}
		i := bytes.IndexByte(q, '\n')
		if i < 0 {
			q = nil
			break
		}
		q = q[i+1:]
		s.line++
	}
	if s.state == scanCollect && len(q) > 0 {
		take := q
		if s.limit > 0 {
			end := 0
			for s.line < s.offset+s.limit {
				i := bytes.IndexByte(take[end:], '\n')
				if i < 0 {
					break
				}
				end += i + 1
				s.line++
			}
			if s.line == s.offset+s.limit {
				take = take[:end]
				s.state = scanDone
			}
		}
		if room := MaxContentBytes + 1 - len(s.content); len(take) > room {
			take = take[:room]
			s.cut = true
			s.state = scanDone
		}
		s.content = append(s.content, take...)
	}
	s.read += int64(len(p))
	s.last = p[len(p)-1]
}

// finish fills in out from what the scanner saw; eof reports whether it saw
// the whole file.
func (s *lineScanner) finish(out *File, eof bool) {
	if s.state == scanSkip {
		s.start = s.read
	}
	c := s.content
	if s.cut {
		if k := bytes.LastIndexByte(c[:MaxContentBytes], '\n'); k >= 0 {
			c = c[:k+1]
		} else {
			end := MaxContentBytes
			for end > MaxContentBytes-utf8.UTFMax && !utf8.RuneStart(c[end]) {
				end--
			}
			c = c[:end]
		}
	}
	out.ReturnedLines = bytes.Count(c, []byte{'\n'})
	if len(c) > 0 && c[len(c)-1] != '\n' {
		out.ReturnedLines++
	}
	out.Lines = s.newlines
	if eof && s.read > 0 && s.last != '\n' {
		out.Lines++
	}
	out.LinesPartial = !eof
	end := s.start + int64(len(c))
	out.Truncated = s.cut || !eof || end < s.read
	if utf8.Valid(c) {
		out.Content = string(c)
	} else {
		out.Content = string(bytes.ToValidUTF8(c, []byte("\uFFFD")))
	}
}
