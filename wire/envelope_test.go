package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    Envelope
		wantErr string // substring of the message; "" = success
	}{
		{"full", `{"type":"auth","id":"a1","timestamp":"2026-03-21T05:34:46.123456Z","payload":{"token":"x"}}`,
			Envelope{Type: "auth", ID: "a1", Timestamp: "2026-03-21T05:34:46.123456Z", Payload: []byte(`{"token":"x"}`)}, ""},
		{"no id no payload", `{"type":"heartbeat_ping"}`, Envelope{Type: "heartbeat_ping"}, ""},
		{"null fields", `{"type":"x","id":null,"timestamp":null,"payload":null}`, Envelope{Type: "x"}, ""},
		{"unknown fields ignored", `{"type":"x","seq":4,"extra":[1,2]}`, Envelope{Type: "x"}, ""},
		{"surrounding space", " \n{\"type\":\"x\"}\n ", Envelope{Type: "x"}, ""},
		{"empty", ``, Envelope{}, "malformed JSON"},
		{"not json", `hello`, Envelope{}, "malformed JSON"},
		{"truncated", `{"type":"auth"`, Envelope{}, "malformed JSON"},
		{"array", `[1,2]`, Envelope{}, "one JSON object"},
		{"string", `"auth"`, Envelope{}, "one JSON object"},
		{"two objects", `{"type":"a"}{"type":"b"}`, Envelope{}, "exactly one"},
		{"trailing garbage", `{"type":"a"} x`, Envelope{}, "exactly one"},
		{"missing type", `{"id":"1"}`, Envelope{ID: "1"}, `"type"`},
		{"numeric type keeps the id", `{"type":7,"id":"2"}`, Envelope{ID: "2"}, `"type"`},
		{"empty type", `{"type":""}`, Envelope{}, `"type"`},
		{"numeric type", `{"type":5}`, Envelope{}, `"type"`},
		{"numeric id", `{"type":"x","id":5}`, Envelope{}, `"id"`},
		{"object timestamp", `{"type":"x","timestamp":{}}`, Envelope{}, `"timestamp"`},
		{"array payload", `{"type":"x","payload":[]}`, Envelope{}, `"payload"`},
		{"string payload", `{"type":"x","payload":"p"}`, Envelope{}, `"payload"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.in))
			if tt.wantErr != "" {
				var we *Error
				if !errors.As(err, &we) || we.Code != CodeInvalidMessage || !strings.Contains(we.Message, tt.wantErr) {
					t.Fatalf("Decode(%q) error = %v, want INVALID_MESSAGE containing %q", tt.in, err, tt.wantErr)
				}
				if got.ID != tt.want.ID {
					t.Fatalf("Decode(%q) error answers id %q, want %q", tt.in, got.ID, tt.want.ID)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%q): %v", tt.in, err)
			}
			if got.Type != tt.want.Type || got.ID != tt.want.ID || got.Timestamp != tt.want.Timestamp || string(got.Payload) != string(tt.want.Payload) {
				t.Fatalf("Decode(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDecodePayload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		payload string
		wantErr string
	}{
		{`{"token":"t","client_version":"0.1.0","purpose":"probe"}`, ""},
		{`{}`, ""},
		{`{"token":5}`, `field "token" must be a string`},
		{`{"token":"t","last_seq":"7"}`, `field "last_seq" must be a number`},
		{`{"token":"t","last_seq":1.5}`, `field "last_seq" must be a number`},
		{`{"token":["t"]}`, `field "token" must be a string`},
	}
	for _, tt := range tests {
		env := Envelope{Type: TypeAuth, Payload: []byte(tt.payload)}
		var a Auth
		err := DecodePayload(env, &a)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("DecodePayload(%s): %v", tt.payload, err)
			}
			continue
		}
		var we *Error
		if !errors.As(err, &we) || we.Code != CodeInvalidMessage || !strings.Contains(we.Message, tt.wantErr) {
			t.Errorf("DecodePayload(%s) = %v, want INVALID_MESSAGE with %q", tt.payload, err, tt.wantErr)
		}
	}
}

func TestParseTimestamp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		zoned bool
		ok    bool
	}{
		{"2026-03-21T05:34:46.123456Z", true, true},
		{"2026-03-21T05:34:46+02:00", true, true},
		{"2026-03-21T05:34:46.123456", false, true},
		{"2026-03-21T05:34:46", false, true},
		{"21/03/2026", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		got, zoned, err := ParseTimestamp(tt.in)
		if (err == nil) != tt.ok || zoned != tt.zoned {
			t.Errorf("ParseTimestamp(%q) = %v, %v, %v; want ok=%v zoned=%v", tt.in, got, zoned, err, tt.ok, tt.zoned)
		}
		if tt.ok && got.Year() != 2026 {
			t.Errorf("ParseTimestamp(%q) year = %d", tt.in, got.Year())
		}
	}
	if got := Timestamp(time.Date(2026, 3, 20, 14, 32, 0, 50e6, time.FixedZone("x", 3600))); got != "2026-03-20T13:32:00.050Z" {
		t.Errorf("Timestamp = %q", got)
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want [3]int
		ok   bool
	}{
		{"1.0", [3]int{1, 0, 0}, true},
		{"0.1.0", [3]int{0, 1, 0}, true},
		{"v2.3.4-beta+x", [3]int{2, 3, 4}, true},
		{"1", [3]int{}, false},
		{"1.x", [3]int{}, false},
		{"1.2.3.4", [3]int{}, false},
		{"-1.0", [3]int{}, false},
	}
	for _, tt := range tests {
		got, err := ParseVersion(tt.in)
		if (err == nil) != tt.ok || tt.ok && got != tt.want {
			t.Errorf("ParseVersion(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// FuzzDecode checks that no input makes the decoder panic, and that what
// it accepts has a type and an object payload.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"auth","id":"a","payload":{"token":"t","last_seq":3}}`,
		`{"type":"heartbeat_ping"}`, `[]`, `{"type":1}`, `{"type":"x","payload":[]}`, `{}`, ``,
		`{"type":"x","payload":{"a":"\u0000"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := Decode(data)
		if err != nil {
			var we *Error
			if !errors.As(err, &we) || we.Code != CodeInvalidMessage {
				t.Fatalf("error %v is not an INVALID_MESSAGE *Error", err)
			}
			return
		}
		if env.Type == "" {
			t.Fatal("accepted a frame without a type")
		}
		if len(env.Payload) > 0 && env.Payload[0] != '{' {
			t.Fatalf("accepted a non-object payload %q", env.Payload)
		}
		var a Auth
		if err := DecodePayload(env, &a); err != nil {
			var we *Error
			if !errors.As(err, &we) || we.Code != CodeInvalidMessage {
				t.Fatalf("payload error %v is not an INVALID_MESSAGE *Error", err)
			}
		}
	})
}

func TestValidateSettings(t *testing.T) {
	t.Parallel()
	for _, ok := range []struct {
		model, mode string
		thinking    int
	}{
		{"", "", 0}, {"sonnet", "plan", 1024}, {"claude-opus-4-8[1m]", "bypassPermissions", 128000}, {"opus[1m]", "acceptEdits", 0},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "default", 0}, {"claude-sonnet-4-5@20250929", "", 0},
	} {
		if err := ValidateSettings(ok.model, ok.mode, ok.thinking); err != nil {
			t.Errorf("ValidateSettings(%q, %q, %d) = %v", ok.model, ok.mode, ok.thinking, err)
		}
	}
	for _, bad := range []struct {
		model, mode string
		thinking    int
	}{
		{"-sonnet", "", 0}, {"son net", "", 0}, {"sonnet\n", "", 0}, {strings.Repeat("a", 101), "", 0}, {"a;b", "", 0},
		{"", "auto", 0}, {"", "Plan", 0}, {"", "", 1023}, {"", "", 128001}, {"", "", -1},
	} {
		if err := ValidateSettings(bad.model, bad.mode, bad.thinking); err == nil {
			t.Errorf("ValidateSettings(%q, %q, %d) accepted", bad.model, bad.mode, bad.thinking)
		}
	}
}

// FuzzEncode: Encode writes what json.Marshal writes, for any strings and
// any payload json.Marshal made.
func FuzzEncode(f *testing.F) {
	f.Add("file_read_response", "req-1", "2026-11-27T14:00:00.000Z", int64(0), false, "line one\nline <two> & \"three\"\x00\u2028")
	f.Add("notification", "", "", int64(42), true, "")
	f.Add("", "\xff", "t", int64(-1), false, "\xffinvalid utf-8")
	f.Fuzz(func(t *testing.T, typ, id, ts string, seq int64, redelivered bool, content string) {
		e := Envelope{Type: typ, ID: id, Timestamp: ts, Seq: seq, Redelivered: redelivered}
		if content != "" {
			p, err := json.Marshal(map[string]any{"content": content, "n": len(content)})
			if err != nil {
				t.Fatal(err)
			}
			e.Payload = p
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Encode(e)
		if err != nil || string(got) != string(want) {
			t.Fatalf("Encode = %s, %v\njson.Marshal = %s", got, err, want)
		}
	})
}

// BenchmarkEncode: a file_read reply of 100 KiB of source text, its
// payload already encoded, framed by Encode and by json.Marshal.
func BenchmarkEncode(b *testing.B) {
	text := strings.Repeat("func main() {\n\tfmt.Println(\"<hello>\", 'x' & 1)\n}\n", 100<<10/48)
	p, err := json.Marshal(map[string]any{"path": "main.go", "content": text})
	if err != nil {
		b.Fatal(err)
	}
	e := Envelope{Type: "file_read_response", ID: "req-1", Timestamp: "2026-11-27T14:00:00.000Z", Payload: p}
	b.Run("impl=json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=Encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := Encode(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
