package pairing

import (
	"strings"
	"unicode"
)

// MaxLabel is the longest device name, platform or client version kept,
// in characters.
const MaxLabel = 64

// CleanLabel makes a phone-supplied label (device name, platform, client
// version) safe to store and show: control and format characters (escape
// sequences, bidirectional overrides, zero-width characters) are dropped,
// runs of white space become one space, and the result is at most
// MaxLabel characters. Terminals and the web client show it as text.
func CleanLabel(s string) string {
	var b strings.Builder
	space, n := false, 0
	for _, r := range s {
		switch {
		case n >= MaxLabel:
			return b.String()
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r), r == unicode.ReplacementChar, !unicode.IsPrint(r):
			continue
		}
		if space {
			if n+2 > MaxLabel {
				return b.String()
			}
			b.WriteByte(' ')
			space = false
			n++
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
