package sandbox

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// MaxMessage is the largest agent message the bridge passes on whole; a
// larger one has its long strings cut (Shrink). Lines between the bridge
// and the daemon are at most DefaultMaxLine, which a shrunk message fits.
const MaxMessage = 1 << 20

// maxString is what Shrink leaves of a long string.
const maxString = 16 << 10

// Shrink cuts an agent message (a JSON object) larger than max bytes: every
// string longer than 16 KiB keeps its first 16 KiB (whole UTF-8
// characters) and a marker saying how much was cut. It reports false when
// the message is still too large, or not JSON: then it must be dropped.
func Shrink(msg json.RawMessage, max int) (json.RawMessage, bool) {
	if len(msg) <= max {
		return msg, true
	}
	var v any
	if err := json.Unmarshal(msg, &v); err != nil {
		return nil, false
	}
	out, err := json.Marshal(shrinkValue(v))
	if err != nil || len(out) > max {
		return nil, false
	}
	return out, true
}

func shrinkValue(v any) any {
	switch v := v.(type) {
	case string:
		if len(v) <= maxString {
			return v
		}
		cut := maxString
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		return v[:cut] + fmt.Sprintf("\n…[tether cut %d bytes: the agent's message passed 1 MiB]", len(v)-cut)
	case map[string]any:
		for k, e := range v {
			v[k] = shrinkValue(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = shrinkValue(e)
		}
		return v
	default:
		return v
	}
}
