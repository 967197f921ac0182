package wire

import (
	"encoding/json"
	"strconv"
)

// Encode is json.Marshal(e) in one pass. encoding/json checks and
// compacts a json.RawMessage again while it writes it out: for a large
// payload (a 100 KiB file_read, a long tool result) as much work as
// encoding the payload was. e.Payload must be what json.Marshal returned
// (valid, compact, HTML characters escaped); it is copied as it is. The
// output is byte for byte json.Marshal's (FuzzEncode).
func Encode(e Envelope) ([]byte, error) {
	b := make([]byte, 0, len(e.Payload)+len(e.Type)+len(e.ID)+len(e.Timestamp)+64)
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
	if len(e.Payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, e.Payload...)
	}
	return append(b, '}'), nil
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}
