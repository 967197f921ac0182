package wire

import (
	"slices"
	"strconv"
)

// Encode is json.Marshal(e) in one pass. encoding/json checks and
// compacts a json.RawMessage again while it writes it out: for a large
// payload (a 100 KiB file_read, a long tool result) as much work as
// encoding the payload was. e.Payload must be what json.Marshal returned
// (valid, compact, HTML characters escaped); it is copied as it is. The
// output is byte for byte json.Marshal's (FuzzEncode).
func Encode(e Envelope) ([]byte, error) {
	b := appendHead(make([]byte, 0, len(e.Payload)+len(e.Type)+len(e.ID)+len(e.Timestamp)+64), e)
	if len(e.Payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, e.Payload...)
	}
	return append(b, '}'), nil
}

// EncodeAppender appends to dst the frame Encode makes of e with p's
// encoding as its payload, written straight into the frame: no buffer of
// its own for the payload, and no copy of it. e.Payload is ignored. dst
// may be a buffer to reuse (nil for a new one).
func EncodeAppender(dst []byte, e Envelope, p Appender) []byte {
	b := slices.Grow(dst, p.SizeHint()+len(e.Type)+len(e.ID)+len(e.Timestamp)+64)
	b = appendHead(b, e)
	b = append(b, `,"payload":`...)
	b = p.AppendJSON(b)
	return append(b, '}')
}

// appendHead appends e's fields but its payload, after the opening brace.
func appendHead(b []byte, e Envelope) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, e.Type)
	if e.ID != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, e.ID)
	}
	if e.Timestamp != "" {
		b = append(b, `,"timestamp":`...)
		b = appendString(b, e.Timestamp)
	}
	if e.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, e.Seq, 10)
	}
	if e.Redelivered {
		b = append(b, `,"redelivered":true`...)
	}
	return b
}
