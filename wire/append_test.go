package wire

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// checkAppender fails t unless EncodeAppender(e, p) is json.Marshal's
// frame of e with p as its payload, byte for byte.
func checkAppender(t *testing.T, e Envelope, p Appender) {
	t.Helper()
	payload, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	e.Payload = payload
	want, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if got := EncodeAppender([]byte("reused"), e, p); string(got[len("reused"):]) != string(want) {
		t.Fatalf("EncodeAppender =\n%q\njson.Marshal =\n%q", got, want)
	}
}

// stringCases are strings whose escaping differs in some way: every
// ASCII control character, the HTML characters, invalid and cut UTF-8,
// U+2028 and U+2029 (also in the middle of an eight-byte word), U+FFFD
// itself, long runs with and without anything to escape, and random
// bytes up to more than a read's 1 MiB.
func stringCases() []string {
	cases := []string{
		"", "plain", `"quoted" and \back\slashed`, "<script>alert('x' && 1)</script>",
		"\x00\x01\x1f\x7f", "\b\f\n\r\t", "\u2028\u2029", "1234567\u2028tail", "abcdefgh\u2029",
		"\xff", "\xe2\x80", "a\xe2\x80\xa8b\xe2\x80", "\xc0\xaf", "\xed\xa0\x80", "\uFFFD", "\U0010FFFF", "\xf4\x90\x80\x80",
		"é日本語🙂", strings.Repeat("x", 4096), strings.Repeat("0123456<", 100), strings.Repeat("line\n", 1000),
	}
	for c := range 256 {
		cases = append(cases, string([]byte{byte(c)}), "12345678"+string([]byte{byte(c)})+"abcdefg")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1 << 16, 1 << 16, 1 << 16, 1 << 16, 3 << 19} {
		b := make([]byte, rng.IntN(n))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		cases = append(cases, string(b))
	}
	return cases
}

func TestAppendJSON(t *testing.T) {
	t.Parallel()
	e := Envelope{Type: TypeFileReadResponse, ID: "r-1", Timestamp: "2026-11-27T19:00:00.000Z"}
	checkAppender(t, e, FileReadResponse{SessionID: "s"})
	checkAppender(t, e, FileListResponse{SessionID: "s"})
	checkAppender(t, e, FileListResponse{SessionID: "s", FileListing: &FileListing{}})
	checkAppender(t, e, FileListResponse{SessionID: "s", FileListing: &FileListing{Entries: []FileEntry{}}})
	for _, s := range stringCases() {
		checkAppender(t, e, FileReadResponse{SessionID: s, FileContent: &FileContent{Path: s, Content: s, Size: -1, Lines: 3,
			LinesPartial: true, Offset: 1 << 40, ReturnedLines: -7, Truncated: true, Encoding: s, Binary: true, MIME: s}})
		checkAppender(t, Envelope{Type: s, ID: s, Timestamp: s, Seq: -1, Redelivered: true}, FileListResponse{SessionID: s,
			FileListing: &FileListing{Path: s, Parent: s, Total: 2, Offset: 3, Limit: 4, HasMore: true, Entries: []FileEntry{
				{Name: s, Path: s, Type: s, Size: 5, Modified: s, Symlink: true}, {}}}})
	}
}

// FuzzAppendJSON: the file replies' own encoders write what json.Marshal
// writes, for any strings and numbers.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{"", "line one\nline <two> & \"three\"\x00\u2028", "\xffinvalid utf-8", "12345678\u2029\\"} {
		f.Add(s, s, int64(len(s)), 2, uint8(0xff))
	}
	f.Fuzz(func(t *testing.T, a, b string, n int64, m int, flags uint8) {
		flag := func(i uint) bool { return flags&(1<<i) != 0 }
		read := FileReadResponse{SessionID: b}
		if !flag(0) {
			read.FileContent = &FileContent{Path: b, Content: a, Size: n, Lines: m, LinesPartial: flag(1), Offset: -m,
				ReturnedLines: m / 2, Truncated: flag(2), Encoding: b, Binary: flag(3)}
			if flag(4) {
				read.MIME = a
			}
		}
		checkAppender(t, Envelope{Type: a, ID: b, Seq: n}, read)
		list := FileListResponse{SessionID: a}
		if !flag(5) {
			list.FileListing = &FileListing{Path: a, Parent: b, Total: m, Offset: int(n), Limit: -m, HasMore: flag(6)}
			if !flag(7) {
				list.Entries = []FileEntry{{Name: a, Path: b, Type: a, Size: n, Modified: b, Symlink: flag(1)}, {Name: b, Modified: a, Symlink: flag(2)}}
			}
		}
		checkAppender(t, Envelope{Type: b, Timestamp: a, Redelivered: flag(3)}, list)
	})
}

// benchReplies are a file_read reply of 100 KiB of source text and a
// file_list reply of 1,000 entries.
func benchReplies() (FileReadResponse, FileListResponse) {
	var sb strings.Builder
	for i := 0; sb.Len() < 100<<10; i++ {
		sb.WriteString("\tif err := doSomething(ctx, \"<name>\", i&1); err != nil {\n\t\treturn fmt.Errorf(\"step %d: %w\", i, err)\n\t}\n")
	}
	read := FileReadResponse{SessionID: "s", FileContent: &FileContent{Path: "main.go", Content: sb.String()[:100<<10], Size: 100 << 10,
		Lines: 2000, ReturnedLines: 2000, Encoding: "utf-8", MIME: "text/x-go; charset=utf-8"}}
	list := FileListResponse{SessionID: "s", FileListing: &FileListing{Path: "big", Parent: ".", Total: 1000, Limit: 1000}}
	for i := range 1000 {
		name := "file-" + strings.Repeat("x", i%13) + ".txt"
		list.Entries = append(list.Entries, FileEntry{Name: name, Path: "big/" + name, Type: FileTypeFile, Size: int64(i * 37), Modified: "2026-11-27T16:04:05Z"})
	}
	return read, list
}

// BenchmarkAppendJSON: the two file replies framed as the bridge framed
// them (json.Marshal of the payload, then Encode) and by EncodeAppender.
func BenchmarkAppendJSON(b *testing.B) {
	read, list := benchReplies()
	e := Envelope{Type: TypeFileReadResponse, ID: "req-1", Timestamp: "2026-11-27T14:00:00.000Z"}
	for _, p := range []struct {
		name string
		v    Appender
	}{{"read100KiB", read}, {"list1000", list}} {
		b.Run("reply="+p.name+"/impl=json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				payload, err := json.Marshal(p.v)
				if err != nil {
					b.Fatal(err)
				}
				e := e
				e.Payload = payload
				if _, err := Encode(e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("reply="+p.name+"/impl=EncodeAppender", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				EncodeAppender(nil, e, p.v)
			}
		})
	}
}

// BenchmarkAppendString: escaping a file's content alone, as
// encoding/json does it and as appendString does.
func BenchmarkAppendString(b *testing.B) {
	read, _ := benchReplies()
	s := read.Content
	b.SetBytes(int64(len(s)))
	b.Run("impl=json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=appendString", func(b *testing.B) {
		buf := make([]byte, 0, 2*len(s))
		for b.Loop() {
			buf = appendString(buf[:0], s)
		}
	})
}
