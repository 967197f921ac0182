package sandbox

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShrink(t *testing.T) {
	t.Parallel()
	small := json.RawMessage(`{"type":"assistant","text":"hi"}`)
	if got, ok := Shrink(small, MaxMessage); !ok || string(got) != string(small) {
		t.Fatalf("a small message changed: %s", got)
	}
	big, _ := json.Marshal(map[string]any{"type": "user", "content": []any{map[string]any{"tool_use_id": "t", "content": strings.Repeat("é", 2<<20)}}})
	got, ok := Shrink(big, MaxMessage)
	if !ok || len(got) > MaxMessage || !json.Valid(got) || !strings.Contains(string(got), "tether cut") || !strings.Contains(string(got), `"tool_use_id":"t"`) {
		t.Fatalf("shrunk to %d bytes, ok %v: %.300s", len(got), ok, got)
	}
	var v struct{ Content []struct{ Content string } }
	json.Unmarshal(got, &v)
	if !utf8.ValidString(v.Content[0].Content) {
		t.Fatal("a character was cut in half")
	}
	// Many short strings cannot be cut: the message is refused.
	many := make([]string, 200_000)
	for i := range many {
		many[i] = "0123456789"
	}
	huge, _ := json.Marshal(map[string]any{"parts": many})
	if _, ok := Shrink(huge, MaxMessage); ok {
		t.Fatal("a message that cannot be cut passed")
	}
}

func FuzzShrink(f *testing.F) {
	f.Add([]byte(`{"a":"b"}`), 8)
	f.Add([]byte(`{"a":["`+strings.Repeat("x", 40000)+`"]}`), 20000)
	f.Add([]byte(`not json`), 1)
	f.Fuzz(func(t *testing.T, msg []byte, max int) {
		if max < 0 {
			max = -max
		}
		out, ok := Shrink(msg, max)
		if ok && (len(out) > max && len(msg) > max || len(msg) > max && !json.Valid(out)) {
			t.Fatalf("Shrink(%d bytes, %d) = %d bytes, valid %v", len(msg), max, len(out), json.Valid(out))
		}
	})
}
