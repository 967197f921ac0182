package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Envelope is one frame of the protocol, in either direction.
type Envelope struct {
	Type      string `json:"type"`
	ID        string `json:"id,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	// Seq is the position of a session event in the durable event log;
	// zero for frames that are not logged.
	Seq int64 `json:"seq,omitempty"`
	// Redelivered marks a notification sent again to a device that did not
	// acknowledge it: a new delivery, without its old seq.
	Redelivered bool            `json:"redelivered,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// Decode parses one client frame. It accepts exactly one JSON object whose
// "type" is a non-empty string, whose "id" and "timestamp" are strings or
// null and whose "payload" is an object or null; unknown fields are ignored.
// Anything else is an *Error with CodeInvalidMessage.
func Decode(data []byte) (Envelope, error) {
	var raw struct {
		Type      json.RawMessage `json:"type"`
		ID        json.RawMessage `json:"id"`
		Timestamp json.RawMessage `json:"timestamp"`
		Payload   json.RawMessage `json:"payload"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return Envelope{}, Errorf(CodeInvalidMessage, "a frame must be one JSON object")
		}
		return Envelope{}, Errorf(CodeInvalidMessage, "malformed JSON: %s", jsonErrorText(err))
	}
	if dec.More() || !onlySpaceLeft(dec) {
		return Envelope{}, Errorf(CodeInvalidMessage, "a frame must hold exactly one JSON object")
	}
	var env Envelope
	var ok bool
	// The id first: an error about the rest of the frame still answers it.
	if env.ID, ok = optionalString(raw.ID); !ok {
		return Envelope{}, Errorf(CodeInvalidMessage, `"id" must be a string`)
	}
	if env.Type, ok = optionalString(raw.Type); !ok || env.Type == "" {
		return Envelope{ID: env.ID}, Errorf(CodeInvalidMessage, `"type" must be a non-empty string`)
	}
	if env.Timestamp, ok = optionalString(raw.Timestamp); !ok {
		return env, Errorf(CodeInvalidMessage, `"timestamp" must be a string`)
	}
	switch p := bytes.TrimSpace(raw.Payload); {
	case len(p) == 0 || string(p) == "null":
	case p[0] == '{':
		env.Payload = p
	default:
		return env, Errorf(CodeInvalidMessage, `"payload" must be an object`)
	}
	return env, nil
}

// optionalString reads a JSON string or null (as ""); ok is false for any
// other JSON value.
func optionalString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

func onlySpaceLeft(dec *json.Decoder) bool {
	var rest [1]byte
	buf := dec.Buffered()
	for {
		n, err := buf.Read(rest[:])
		if n == 1 && !isSpace(rest[0]) {
			return false
		}
		if err != nil {
			return true
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// DecodePayload unmarshals env's payload into v, which must be a pointer to
// one of the payload structs. A missing payload leaves v as it is. A field of
// the wrong JSON type is an *Error with CodeInvalidMessage naming the field.
func DecodePayload(env Envelope, v any) error {
	if len(env.Payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(env.Payload, v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return Errorf(CodeInvalidMessage, "%s: field %q must be %s", env.Type, ute.Field, jsonKind(ute.Type.Kind().String()))
		}
		return Errorf(CodeInvalidMessage, "%s: payload does not have the expected shape", env.Type)
	}
	return nil
}

func jsonKind(goKind string) string {
	switch {
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"), strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "slice", goKind == "array":
		return "an array"
	default:
		return "an object"
	}
}

func jsonErrorText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "unexpected end of input"
	}
	return "not valid JSON"
}

// Timestamp formats t as the protocol's timestamps: RFC 3339 in UTC with
// milliseconds.
func Timestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// ParseTimestamp reads a client's timestamp: RFC 3339 with or without
// fractional seconds, and also without a time zone (as sent by some clients
// for local time). zoned reports whether the text named its zone; a zoneless
// time is read as UTC.
func ParseTimestamp(s string) (t time.Time, zoned bool, err error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true, nil
	}
	if t, err := time.Parse("2006-01-02T15:04:05.999999999", s); err == nil {
		return t, false, nil
	}
	return time.Time{}, false, fmt.Errorf("timestamp %q is not RFC 3339", s)
}
