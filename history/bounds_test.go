package history

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// prompt is a transcript's line holding a prompt of the project /p.
func prompt(text string, day int) string {
	return fmt.Sprintf(`{"type":"user","message":{"role":"user","content":%q},"uuid":"u-%s","timestamp":"2026-01-%02dT00:00:00Z","cwd":"/p"}`+"\n", text, text, day)
}

// writeAt writes s into the file at path at offset at.
func writeAt(t *testing.T, path string, at int64, s string) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt([]byte(s), at); err != nil {
		t.Fatal(err)
	}
}

// TestHugeFile: an agent makes its transcript a sparse file of a terabyte
// (free for it): the index reads its first MaxFile bytes once, not again
// while it grows, and a page of its conversation reads the last
// maxPageRead bytes before the page's end.
func TestHugeFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	path := f.transcript("/p", "huge", []byte(prompt("first", 1)))
	const size = 1 << 40
	if err := os.Truncate(path, size); err != nil {
		t.Skip("no sparse files here:", err)
	}
	// Lines within MaxFile are read, the rest are not: each comes after a
	// '\n' that ends the zeros before it (an over-long line, skipped).
	inside := "\n" + prompt("inside", 2)
	writeAt(t, path, MaxFile-int64(len(inside)), inside)
	past := "\n" + prompt("past", 3)
	writeAt(t, path, MaxFile, past)
	last := "\n" + prompt("last", 4)
	writeAt(t, path, size-int64(len(last)), last)

	f.scan()
	p := f.list(Query{})
	if len(p.Sessions) != 1 || p.Sessions[0].Title != "first" || p.Sessions[0].Messages != 2 || p.Sessions[0].LastActivity.Day() != 2 {
		t.Fatalf("sessions = %+v", p.Sessions)
	}
	read := f.index.files[path]

	// It grows (the agent appends): it is not read again.
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(prompt("appended", 5))
	fh.Close()
	f.scan()
	if f.index.files[path] != read {
		t.Fatal("a file past MaxFile was read again when it grew")
	}

	// Its conversation, from the newest: the lines of the last
	// maxPageRead bytes, then the window before holds no line.
	c, err := f.index.Read(context.Background(), "claude:huge", 0, 100)
	if err != nil || fmt.Sprint(types(t, c.Frames)) != "[user_message last user_message appended]" || !c.More {
		t.Fatalf("newest page: %q, more %v, %v", types(t, c.Frames), c.More, err)
	}
	c, err = f.index.Read(context.Background(), "claude:huge", c.Before, 100)
	if err != nil || len(c.Frames) != 0 || c.More {
		t.Fatalf("page before: %q, more %v, %v", types(t, c.Frames), c.More, err)
	}
}

// TestLongLineBeingWritten: a line over MaxLine still being written (an
// agent appends to it without a '\n') is read once: each later read goes
// on from where the last stopped, not from the line's start.
func TestLongLineBeingWritten(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	first := prompt("first", 1)
	path := f.transcript("/p", "long", []byte(first))
	grow := func(by int64) {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, info.Size()+by); err != nil {
			t.Fatal(err)
		}
	}
	grow(MaxLine + 1)
	f.scan()
	st := f.index.files[path].state
	if st.end != int64(len(first)) || st.skip != st.size {
		t.Fatalf("after the line passed MaxLine: %+v", st)
	}
	grow(1000)
	f.scan()
	if st2 := f.index.files[path].state; st2.end != st.end || st2.skip != st.size+1000 {
		t.Fatalf("after it grew: %+v", st2)
	}
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString("\n" + prompt("second", 2))
	fh.Close()
	f.scan()
	got := f.index.files[path]
	if got.sum.messages != 2 || got.sum.overlong != 1 || got.state.skip != 0 {
		t.Fatalf("after its end: %+v, %+v", got.sum, got.state)
	}
}

// TestPagesOfALongFile: a conversation longer than a page's window pages
// back to its first line, each line once, in order.
func TestPagesOfALongFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	pad := strings.Repeat("x", 200<<10)
	var b strings.Builder
	const n = 60 // 12 MB: the pages read two windows at least
	for i := range n {
		b.WriteString(prompt(fmt.Sprintf("p%02d %s", i, pad), 1))
	}
	f.transcript("/p", "long", []byte(b.String()))
	f.scan()
	var seen []string
	before := int64(0)
	for range n {
		c, err := f.index.Read(context.Background(), "claude:long", before, 7)
		if err != nil {
			t.Fatal(err)
		}
		var page []string
		for _, s := range types(t, c.Frames) {
			page = append(page, strings.TrimPrefix(s, "user_message ")[:3])
		}
		seen = append(page, seen...)
		if !c.More {
			break
		}
		before = c.Before
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("p%02d", i))
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("paged %v", seen)
	}
}

// TestManyFiles: an agent fills its project's transcript directory with
// files: the index holds the directory's newest (a new file takes the
// place of the oldest tenth), reads only so many of its entries, says so
// once in the log, and other directories keep theirs.
func TestManyFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var logged bytes.Buffer
	f.index.cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	f.index.dirFiles, f.index.dirEntries = 20, 100
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(project string, i int) string {
		t.Helper()
		path := f.transcript(project, fmt.Sprintf("%s%03d", project[1:], i), []byte(prompt(fmt.Sprint(i), 1)))
		if err := os.Chtimes(path, epoch, epoch.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for i := range 30 {
		write("/p", i)
	}
	for i := range 5 {
		write("/q", i)
	}
	f.scan()
	held := func(project string) (ids []string) {
		t.Helper()
		for _, s := range f.list(Query{}).Sessions {
			if strings.HasPrefix(s.AgentSessionID, project[1:]) {
				ids = append(ids, s.AgentSessionID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	ids := func(from, to int) (out []string) {
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("p%03d", i))
		}
		return out
	}
	if got := held("/p"); fmt.Sprint(got) != fmt.Sprint(ids(10, 30)) {
		t.Fatalf("/p holds %v", got)
	}
	if got := held("/q"); len(got) != 5 {
		t.Fatalf("/q holds %v", got)
	}
	if n := strings.Count(logged.String(), "more session files than the bound"); n != 1 {
		t.Fatalf("logged %d times: %s", n, &logged)
	}
	// A file older than those held is not read; a newer one takes the
	// place of the oldest tenth.
	f.index.refresh(write("/p", -1))
	f.index.refresh(write("/p", 30))
	if got := held("/p"); fmt.Sprint(got) != fmt.Sprint(ids(12, 31)) {
		t.Fatalf("after two more, /p holds %v", got)
	}
	// Past dirEntries, a directory's other entries are not read.
	for i := 31; i < 150; i++ {
		write("/p", i)
	}
	f.scan()
	if got := held("/p"); len(got) == 0 || len(got) > 20 || f.index.Len() != len(got)+5 {
		t.Fatalf("of 150 files, /p holds %v; the index %d", got, f.index.Len())
	}
	if n := strings.Count(logged.String(), "more session files than the bound"); n != 1 {
		t.Fatalf("logged %d times: %s", n, &logged)
	}
}

// TestFutureFilesKeepNothingOut: an agent fills its project's directory
// (shared with the user's terminal sessions in the same working
// directory) with transcripts dated in 2100; a transcript written after
// them is indexed all the same.
func TestFutureFilesKeepNothingOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.index.dirFiles, f.index.dirEntries = 20, 100
	future := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 20 {
		path := f.transcript("/p", fmt.Sprintf("planted%03d", i), []byte(prompt(fmt.Sprint(i), 1)))
		if err := os.Chtimes(path, future, future); err != nil {
			t.Fatal(err)
		}
	}
	f.scan()
	f.index.refresh(f.transcript("/p", "real", []byte(prompt("real work", 1))))
	for _, s := range f.list(Query{}).Sessions {
		if s.AgentSessionID == "real" {
			return
		}
	}
	t.Fatal("the transcript written after the future-dated ones is not indexed")
}
