package pairing

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCleanLabel(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Alice's iPhone", "Alice's iPhone"},
		{"  spaced \t out\n ", "spaced out"},
		{"\x1b[2J\x1b]0;pwned\x07evil", "[2J]0;pwnedevil"},
		{"name\u202egnp.exe", "namegnp.exe"},
		{"zero\u200bwidth\ufeff", "zerowidth"},
		{"c1\u009bcontrol", "c1control"},
		{"bad\xffutf8", "badutf8"},
		{"日本語の電話", "日本語の電話"},
		{strings.Repeat("x", 100), strings.Repeat("x", MaxLabel)},
		{"", ""},
	}
	for _, tt := range tests {
		if got := CleanLabel(tt.in); got != tt.want {
			t.Errorf("CleanLabel(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzCleanLabel(f *testing.F) {
	for _, s := range []string{"phone", "\x1b[31mred", "a\u202eb", " x  y ", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := CleanLabel(s)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > MaxLabel || got != strings.TrimSpace(got) {
			t.Fatalf("CleanLabel(%q) = %q", s, got)
		}
		for _, r := range got {
			if r != ' ' && (!unicode.IsPrint(r) || unicode.Is(unicode.Cf, r)) {
				t.Fatalf("CleanLabel(%q) = %q keeps %U", s, got, r)
			}
		}
		if CleanLabel(got) != got {
			t.Fatalf("CleanLabel is not idempotent on %q", s)
		}
	})
}
