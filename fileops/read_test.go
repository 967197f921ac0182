package fileops

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// openWith makes a root holding one file called name with content data.
func openWith(t testing.TB, name string, data []byte) *Root {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// reference computes what Read should return for data without the
// content cap, by splitting it into lines.
func reference(data []byte, offset, limit int) (content string, lines, returned int, truncated bool) {
	split := bytes.SplitAfter(data, []byte("\n"))
	if len(split[len(split)-1]) == 0 {
		split = split[:len(split)-1]
	}
	lines = len(split)
	start := min(offset, lines)
	end := lines
	if limit > 0 {
		end = min(start+limit, lines)
	}
	return string(bytes.Join(split[start:end], nil)), lines, end - start, end < lines
}

func TestReadLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		data          string
		offset, limit int
	}{
		{"empty", "", 0, 0},
		{"empty offset", "", 3, 2},
		{"three", "a\nb\nc\n", 0, 0},
		{"no final newline", "a\nb\nc", 0, 0},
		{"middle", "a\nb\nc\n", 1, 1},
		{"past the end", "a\nb\nc\n", 2, 5},
		{"at the end", "a\nb\nc\n", 3, 0},
		{"beyond", "a\nb\nc\n", 10, 0},
		{"last partial", "a\nb\nc", 2, 1},
		{"crlf", "x\r\ny\r\n", 0, 1},
		{"blank lines", "\n\n\n", 1, 0},
		{"one line", "just one", 0, 0},
		{"bom", "\xef\xbb\xbfhi\n", 0, 0},
		{"nul after sniff", strings.Repeat("a\n", SniffBytes) + "\x00\n", SniffBytes, 0},
		{"rune across sniff", strings.Repeat("a", SniffBytes-1) + "é\nz\n", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := openWith(t, "f.txt", []byte(tc.data))
			f, err := r.Read("f.txt", ReadOptions{Offset: tc.offset, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			content, lines, returned, truncated := reference([]byte(tc.data), tc.offset, tc.limit)
			if f.Content != content || f.Lines != lines || f.ReturnedLines != returned || f.Truncated != truncated ||
				f.Size != int64(len(tc.data)) || f.Offset != tc.offset || f.Binary || f.Encoding != EncodingUTF8 || f.LinesPartial || f.Path != "f.txt" {
				t.Errorf("got %+v\nwant content %q lines %d returned %d truncated %v", f, content, lines, returned, truncated)
			}
		})
	}
}

// TestReadRandom compares Read with the reference on random files that
// span several read chunks.
func TestReadRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 60 {
		var b bytes.Buffer
		size := rng.IntN(300 << 10)
		for b.Len() < size {
			n := rng.IntN(200)
			if rng.IntN(20) == 0 {
				n = rng.IntN(100 << 10)
			}
			b.WriteString(strings.Repeat("é", n/2))
			if rng.IntN(10) > 0 {
				b.WriteByte('\n')
			}
		}
		data := b.Bytes()
		name := fmt.Sprintf("f%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, total, _, _ := reference(data, 0, 0)
		for range 5 {
			offset := rng.IntN(total + 2)
			limit := rng.IntN(total + 2)
			f, err := r.Read(name, ReadOptions{Offset: offset, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			content, lines, returned, truncated := reference(data, offset, limit)
			if f.Content != content || f.Lines != lines || f.ReturnedLines != returned || f.Truncated != truncated {
				t.Fatalf("%s (%d bytes) offset %d limit %d: got %d bytes, %d lines, %d returned, truncated %v; want %d bytes, %d, %d, %v",
					name, len(data), offset, limit, len(f.Content), f.Lines, f.ReturnedLines, f.Truncated, len(content), lines, returned, truncated)
			}
		}
	}
}

func TestReadBinary(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	tests := []struct {
		name   string
		data   []byte
		binary bool
	}{
		{"nul", []byte("abc\x00def\n"), true},
		{"latin-1", []byte("caf\xe9\n"), true},
		{"utf-16", []byte("\xff\xfeh\x00i\x00"), true},
		{"png", png, true},
		{"invalid at sniff end", []byte(strings.Repeat("a", SniffBytes-1) + "\xff" + "more\n"), true},
		{"cut rune at file end", []byte("abc\xc3"), true},
		{"cut rune at sniff end", []byte(strings.Repeat("a", SniffBytes-1) + "\xe2\x82\xac\n"), false},
		{"utf-8", []byte("naïve ☃ 🙂\n"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := openWith(t, "f", tc.data)
			f, err := r.Read("f", ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if f.Binary != tc.binary {
				t.Fatalf("binary %v, want %v", f.Binary, tc.binary)
			}
			if f.Binary && (f.Content != "" || f.Encoding != EncodingBinary || f.Lines != 0 || f.Size != int64(len(tc.data))) {
				t.Errorf("binary file: %+v", f)
			}
			if !f.Binary && f.Content != string(tc.data) {
				t.Errorf("content %q", f.Content)
			}
		})
	}
}

func TestReadInvalidUTF8Later(t *testing.T) {
	t.Parallel()
	data := strings.Repeat("a\n", SniffBytes) + "bad \xff byte\n"
	r := openWith(t, "f", []byte(data))
	f, err := r.Read("f", ReadOptions{Offset: SniffBytes})
	if err != nil {
		t.Fatal(err)
	}
	if f.Binary || f.Content != "bad \uFFFD byte\n" || !utf8.ValidString(f.Content) {
		t.Errorf("got %+v", f)
	}
}

func TestReadCap(t *testing.T) {
	t.Parallel()
	const lineLen = 100
	var b bytes.Buffer
	for i := 0; b.Len() < 3*MaxContentBytes; i++ {
		fmt.Fprintf(&b, "%07d%s\n", i, strings.Repeat("x", lineLen-8))
	}
	data := b.Bytes()
	total := len(data) / lineLen
	r := openWith(t, "big.txt", data)

	perPage := MaxContentBytes / lineLen
	offset := 0
	for page := 0; ; page++ {
		f, err := r.Read("big.txt", ReadOptions{Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		want := min(perPage, total-offset)
		if f.ReturnedLines != want || len(f.Content) != want*lineLen || f.Lines != total || f.Size != int64(len(data)) {
			t.Fatalf("page %d: returned %d lines, %d bytes; want %d lines", page, f.ReturnedLines, len(f.Content), want)
		}
		if !strings.HasPrefix(f.Content, fmt.Sprintf("%07d", offset)) {
			t.Fatalf("page %d starts with %q", page, f.Content[:8])
		}
		offset += f.ReturnedLines
		if f.Truncated != (offset < total) {
			t.Fatalf("page %d: truncated %v at line %d of %d", page, f.Truncated, offset, total)
		}
		if !f.Truncated {
			break
		}
	}

	f, err := r.Read("big.txt", ReadOptions{Offset: 7, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if f.ReturnedLines != 5 || !f.Truncated || !strings.HasPrefix(f.Content, "0000007") || len(f.Content) != 5*lineLen {
		t.Errorf("limit 5: %d lines, truncated %v", f.ReturnedLines, f.Truncated)
	}
}

func TestReadLongLine(t *testing.T) {
	t.Parallel()
	data := "a" + strings.Repeat("é", MaxContentBytes) + "\nnext\n"
	r := openWith(t, "long", []byte(data))
	f, err := r.Read("long", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Content) != MaxContentBytes-1 || !utf8.ValidString(f.Content) || f.ReturnedLines != 1 || !f.Truncated || f.Lines != 2 {
		t.Errorf("%d bytes, valid %v, returned %d, truncated %v, lines %d",
			len(f.Content), utf8.ValidString(f.Content), f.ReturnedLines, f.Truncated, f.Lines)
	}
	f, err = r.Read("long", ReadOptions{Offset: 1})
	if err != nil || f.Content != "next\n" || f.Truncated {
		t.Errorf("line after the long one: %+v, %v", f, err)
	}
}

func TestReadLinesPartial(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "huge.log")
	if err := os.WriteFile(name, []byte("hello\n"+strings.Repeat("x", SniffBytes)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const size = MaxCountBytes + 32<<20
	if err := os.Truncate(name, size); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := r.Read("huge.log", ReadOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if f.Content != "hello\n" || !f.LinesPartial || !f.Truncated || f.Lines != 2 || f.Size != size || f.Binary {
		t.Errorf("got %+v", f)
	}
}

func TestReadMIME(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data, want string
	}{
		{"x.json", "{}\n", "application/json"},
		{"noext", "hello\n", "text/plain; charset=utf-8"},
		{"x.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image/png"},
		{"x.bin", "\x00\x01\x02", "application/octet-stream"},
	}
	for _, tc := range tests {
		r := openWith(t, tc.name, []byte(tc.data))
		f, err := r.Read(tc.name, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if f.MIME != tc.want {
			t.Errorf("%s: mime %q, want %q", tc.name, f.MIME, tc.want)
		}
	}
	r := openWith(t, "x.ts", []byte("let x = 1\n"))
	if f, err := r.Read("x.ts", ReadOptions{}); err != nil || !strings.HasPrefix(f.MIME, "text/") {
		t.Errorf("x.ts: %+v, %v", f, err)
	}
}

func TestReadShape(t *testing.T) {
	t.Parallel()
	r := openWith(t, "a.txt", []byte("one\ntwo\n"))
	f, err := r.Read("a.txt", ReadOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := File{Path: "a.txt", Content: "one\n", Size: 8, Lines: 2, ReturnedLines: 1, Truncated: true, Encoding: EncodingUTF8, MIME: "text/plain; charset=utf-8"}
	if *f != want {
		t.Errorf("\n got %+v\nwant %+v", *f, want)
	}
}

func TestReadRange(t *testing.T) {
	t.Parallel()
	r := openWith(t, "a.txt", []byte("one\n"))
	for _, o := range []ReadOptions{{Offset: -1}, {Limit: -1}} {
		if _, err := r.Read("a.txt", o); Code(err) != CodeInvalidRange {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestCode(t *testing.T) {
	t.Parallel()
	if Code(nil) != "" || Message(nil) != "" {
		t.Error("nil error has a code")
	}
	if got := Code(os.ErrClosed); got != CodeFileError {
		t.Errorf("Code(other) = %q", got)
	}
	if got := Message(fmt.Errorf("x: %w", os.ErrClosed)); got == "" || strings.Contains(got, "closed") {
		t.Errorf("Message(other) = %q", got)
	}
	for _, s := range sentinels {
		err := fmt.Errorf("fileops: read %q: %w", "x", s.err)
		if Code(err) != s.code || Message(err) != s.message {
			t.Errorf("%v: %q %q", s.err, Code(err), Message(err))
		}
	}
}

// TestReadDuringAtomicSave reads a file while it is replaced again and
// again by rename, as editors and agents save: every read succeeds and
// returns one whole version.
func TestReadDuringAtomicSave(t *testing.T) {
	t.Parallel()
	versions := []string{strings.Repeat("one\n", 3000), strings.Repeat("two two\n", 2000)}
	r := openWith(t, "f.txt", []byte(versions[0]))
	name := filepath.Join(r.Dir(), "f.txt")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := name + ".tmp"
			if err := os.WriteFile(tmp, []byte(versions[i%2]), 0o644); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, name); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()
	for range 300 {
		f, err := r.Read("f.txt", ReadOptions{})
		if err != nil {
			t.Fatalf("Read during save: %v", err)
		}
		if f.Content != versions[0] && f.Content != versions[1] {
			t.Fatalf("Read returned %d bytes that are neither version", len(f.Content))
		}
	}
}
