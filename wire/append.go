package wire

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// Appender is a payload that writes its own JSON encoding: byte for byte
// what json.Marshal writes for it (FuzzAppendJSON), without reflection and
// without a buffer of its own. EncodeAppender writes it straight into the
// frame.
type Appender interface {
	// AppendJSON appends the payload's JSON encoding to b.
	AppendJSON(b []byte) []byte
	// SizeHint is about how many bytes AppendJSON appends, so that the
	// frame's buffer is allocated once.
	SizeHint() int
}

// The file replies are the two payloads large enough for reflection and a
// second copy to matter: 100 KiB of content to escape, 1,000 entries of a
// listing. Their field order and omitempty follow the struct tags in
// files.go; a nil embedded pointer leaves its fields out, as encoding/json
// does.

// AppendJSON appends r as json.Marshal encodes it.
func (r FileReadResponse) AppendJSON(b []byte) []byte {
	b = append(b, `{"session_id":`...)
	b = appendString(b, r.SessionID)
	if f := r.FileContent; f != nil {
		b = append(b, `,"path":`...)
		b = appendString(b, f.Path)
		b = append(b, `,"content":`...)
		b = appendString(b, f.Content)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, f.Size, 10)
		b = append(b, `,"lines":`...)
		b = strconv.AppendInt(b, int64(f.Lines), 10)
		if f.LinesPartial {
			b = append(b, `,"lines_partial":true`...)
		}
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, int64(f.Offset), 10)
		b = append(b, `,"returned_lines":`...)
		b = strconv.AppendInt(b, int64(f.ReturnedLines), 10)
		b = append(b, `,"truncated":`...)
		b = strconv.AppendBool(b, f.Truncated)
		b = append(b, `,"encoding":`...)
		b = appendString(b, f.Encoding)
		b = append(b, `,"binary":`...)
		b = strconv.AppendBool(b, f.Binary)
		if f.MIME != "" {
			b = append(b, `,"mime":`...)
			b = appendString(b, f.MIME)
		}
	}
	return append(b, '}')
}

// SizeHint is the size of r's encoding when its content grows by a
// quarter in escaping (source code grows by a tenth or so: newlines,
// tabs, quotes). Too large costs the zeroing of the spare bytes, too
// small a second allocation and a copy of all.
func (r FileReadResponse) SizeHint() int {
	n := 256 + len(r.SessionID)
	if f := r.FileContent; f != nil {
		n += len(f.Path) + len(f.Content) + len(f.Content)/4 + len(f.MIME)
	}
	return n
}

// AppendJSON appends r as json.Marshal encodes it.
func (r FileListResponse) AppendJSON(b []byte) []byte {
	b = append(b, `{"session_id":`...)
	b = appendString(b, r.SessionID)
	if l := r.FileListing; l != nil {
		b = append(b, `,"path":`...)
		b = appendString(b, l.Path)
		b = append(b, `,"parent":`...)
		b = appendString(b, l.Parent)
		b = append(b, `,"entries":`...)
		if l.Entries == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i := range l.Entries {
				if i > 0 {
					b = append(b, ',')
				}
				b = l.Entries[i].appendJSON(b)
			}
			b = append(b, ']')
		}
		b = append(b, `,"total":`...)
		b = strconv.AppendInt(b, int64(l.Total), 10)
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, int64(l.Offset), 10)
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, int64(l.Limit), 10)
		b = append(b, `,"has_more":`...)
		b = strconv.AppendBool(b, l.HasMore)
	}
	return append(b, '}')
}

// SizeHint is the size of r's encoding when its names need no escaping.
func (r FileListResponse) SizeHint() int {
	n := 128 + len(r.SessionID)
	if l := r.FileListing; l != nil {
		n += len(l.Path) + len(l.Parent)
		for i := range l.Entries {
			e := &l.Entries[i]
			n += 64 + len(e.Name) + len(e.Path) + len(e.Modified)
		}
	}
	return n
}

func (e *FileEntry) appendJSON(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, e.Name)
	b = append(b, `,"path":`...)
	b = appendString(b, e.Path)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, e.Size, 10)
	if e.Modified != "" {
		b = append(b, `,"modified":`...)
		b = appendString(b, e.Modified)
	}
	if e.Symlink {
		b = append(b, `,"symlink":true`...)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string, escaped as json.Marshal
// escapes it: `"` and `\`, control characters (\b, \f, \n, \r and \t
// short, the rest as \u00XX), the HTML characters <, > and & as \u00XX,
// U+2028 and U+2029 as \u2028 and \u2029, and each byte of invalid UTF-8
// as \ufffd. Everything else is copied as it is.
//
// It goes eight bytes at a time: the word is appended whole, and when one
// of its bytes is not plain ASCII the append is cut back to before that
// byte, which is escaped with the ones to escape right after it (a run
// of tabs), and the next word starts after them. A file's text mostly
// needs no escaping for a few bytes at a time (a line, up to its
// newline), and the word, unlike a copy of each run, needs neither a
// call nor a length.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	i := 0
	for i+8 <= len(s) {
		t := s[i : i+8]
		_ = t[7] // one bounds check, not eight
		w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		b = binary.LittleEndian.AppendUint64(b, w)
		m := specialBytes(w)
		if m == 0 {
			i += 8
			continue
		}
		j := bits.TrailingZeros64(m) / 8
		b = b[:len(b)-8+j]
		for i += j; i < len(s); i++ {
			c := s[i]
			if c >= utf8.RuneSelf {
				b, i = appendRune(b, s, i)
				break
			}
			e := escapeOf[c]
			if e == 0 {
				break
			}
			b = appendEscape(b, c, e)
		}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			b, i = appendRune(b, s, i)
		case escapeOf[c] == 0:
			b = append(b, c)
			i++
		default:
			b = appendEscape(b, c, escapeOf[c])
			i++
		}
	}
	return append(b, '"')
}

// appendEscape appends the escape of the ASCII byte c, e being
// escapeOf[c].
func appendEscape(b []byte, c, e byte) []byte {
	if e == 'u' {
		return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
	}
	return append(b, '\\', e)
}

// appendRune appends the rune that starts at s[i], a byte from 0x80 up,
// as a JSON string holds it, and returns the index after it.
func appendRune(b []byte, s string, i int) ([]byte, int) {
	r, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && size == 1:
		return append(b, `\ufffd`...), i + 1
	case r == '\u2028' || r == '\u2029':
		return append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf]), i + size
	}
	return append(b, s[i:i+size]...), i + size
}

const hexDigits = "0123456789abcdef"

// escapeOf[c] says how the ASCII byte c is escaped: 0 not at all, 'u'
// as \u00XX, else as a backslash and that letter.
var escapeOf = func() (t [utf8.RuneSelf]byte) {
	for c := range byte(' ') {
		t[c] = 'u'
	}
	t['<'], t['>'], t['&'] = 'u', 'u', 'u'
	t['"'], t['\\'], t['\b'], t['\f'], t['\n'], t['\r'], t['\t'] = '"', '\\', 'b', 'f', 'n', 'r', 't'
	return t
}()

// Bytes of eight-byte words.
const (
	ones  = 0x0101010101010101
	lows  = 0x7f7f7f7f7f7f7f7f
	highs = 0x8080808080808080
)

// specialBytes sets the high bit of exactly those bytes of w that are
// not plain ASCII: below 0x20, from 0x80 up, `"`, `\`, <, > and &. No
// carry crosses from one byte to the next: a byte's low seven bits plus
// 0x7f or 0x60 stay below 0x100.
func specialBytes(w uint64) uint64 {
	m := ^(w&lows + 0x60*ones) | w // below 0x20, and from 0x80 up
	// 0x22 `"` and 0x26 &: w^0x22 is 0x00 or 0x04 there, and only there.
	m |= zeroBytes((w ^ 0x22*ones) &^ (0x04 * ones))
	// 0x3c < and 0x3e >: w^0x3c is 0x00 or 0x02.
	m |= zeroBytes((w ^ 0x3c*ones) &^ (0x02 * ones))
	m |= zeroBytes(w ^ 0x5c*ones) // `\`
	return m & highs
}

// zeroBytes sets the high bit of exactly the zero bytes of x (and maybe
// other bits).
func zeroBytes(x uint64) uint64 { return ^(x&lows + lows | x) }
