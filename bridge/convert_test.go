package bridge

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/fileops"
	"github.com/tetherdev/tether/gitops"
	"github.com/tetherdev/tether/wire"
)

// TestWireShapes checks the JSON the phone gets for real gitops and
// fileops results, converted to the protocol's types: the names and types
// the app's parser requires, null never where a list is due, and a file
// read byte for byte as PROTOCOL.md shows it.
func TestWireShapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a",
			"GIT_COMMITTER_EMAIL=a@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	write("a.txt", "one\ntwo\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	ctx := context.Background()
	g := &gitops.Git{}

	st, err := g.Status(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	m := marshalMap(t, wire.GitStatusResponse{SessionID: "s", GitStatus: wireStatus(st)})
	if m["session_id"] != "s" || m["branch"] != "main" || m["is_clean"] != true {
		t.Errorf("status: %v", m)
	}
	for _, k := range []string{"ahead", "behind"} {
		if _, ok := m[k].(float64); !ok {
			t.Errorf("status: %s not a number in %v", k, m)
		}
	}
	if c, ok := m["changes"].([]any); !ok || len(c) != 0 {
		t.Errorf("status: changes not an empty list in %v", m)
	}

	write("a.txt", "one\n2\n")
	d, err := g.Diff(ctx, dir, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	m = marshalMap(t, wire.GitDiffResponse{SessionID: "s", GitDiff: wireDiff(d)})
	files, _ := m["files"].([]any)
	if len(files) != 1 || m["cached"] != false {
		t.Fatalf("diff: %v", m)
	}
	f := files[0].(map[string]any)
	for _, k := range []string{"path", "old_path", "new_path", "status", "old_mode", "new_mode", "fingerprint"} {
		if _, ok := f[k].(string); !ok {
			t.Errorf("diff: %s not a string in %v", k, f)
		}
	}
	hunks, _ := f["hunks"].([]any)
	if len(hunks) != 1 {
		t.Fatalf("diff: hunks %v", f)
	}
	for _, l := range hunks[0].(map[string]any)["lines"].([]any) {
		lm := l.(map[string]any)
		if typ, _ := lm["type"].(string); typ != wire.LineContext && typ != wire.LineAdded && typ != wire.LineRemoved {
			t.Errorf("diff: line type in %v", lm)
		}
		if c, ok := lm["content"].(string); !ok || strings.HasPrefix(c, "+") || strings.HasPrefix(c, "-") {
			t.Errorf("diff: line content in %v", lm)
		}
	}

	root, err := fileops.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fc, err := root.Read("a.txt", fileops.ReadOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := marshalReply(t, wire.FileReadResponse{SessionID: "s", FileContent: wireFile(fc)})
	want := `{"session_id":"s","path":"a.txt","content":"one\n","size":6,"lines":2,"offset":0,"returned_lines":1,"truncated":true,"encoding":"utf-8","binary":false,"mime":"text/plain; charset=utf-8"}`
	if got != want {
		t.Errorf("file_read_response\n got %s\nwant %s", got, want)
	}
	empty, err := fileops.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	l, err := empty.List("", fileops.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got = marshalReply(t, wire.FileListResponse{SessionID: "s", FileListing: wireListing(l)})
	want = `{"session_id":"s","path":".","parent":"","entries":[],"total":0,"offset":0,"limit":1000,"has_more":false}`
	if got != want {
		t.Errorf("empty file_list_response\n got %s\nwant %s", got, want)
	}
	// Times in whole seconds, UTC, as time.Time's encoding gave them; a
	// link to nowhere has none.
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644)
	at := time.Date(2026, 11, 27, 17, 4, 5, 678_000_000, time.FixedZone("CET", 3600))
	if err := os.Chtimes(filepath.Join(dir, "a.txt"), at, at); err != nil {
		t.Fatal(err)
	}
	os.Symlink("nowhere", filepath.Join(dir, "gone"))
	some, err := fileops.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer some.Close()
	if l, err = some.List("", fileops.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	got = marshalReply(t, wire.FileListResponse{SessionID: "s", FileListing: wireListing(l)})
	want = `{"session_id":"s","path":".","parent":"","entries":[{"name":"a.txt","path":"a.txt","type":"file","size":4,"modified":"2026-11-27T16:04:05Z"},{"name":"gone","path":"gone","type":"file","size":0,"symlink":true}],"total":2,"offset":0,"limit":1000,"has_more":false}`
	if got != want {
		t.Errorf("file_list entries\n got %s\nwant %s", got, want)
	}
}

// marshalReply returns the JSON of a file reply, checking that its own
// encoder (which the bridge uses) writes what json.Marshal writes.
func marshalReply(t *testing.T, r wire.Appender) string {
	t.Helper()
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.AppendJSON(nil); string(got) != string(want) {
		t.Errorf("AppendJSON\n got %s\nwant %s (json.Marshal)", got, want)
	}
	return string(want)
}

func marshalMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// benchDiff is a diff of 100 files of 10 hunks of 20 lines each.
func benchDiff() *gitops.DiffResult {
	d := &gitops.DiffResult{}
	for f := range 100 {
		fd := gitops.FileDiff{Path: "pkg/file" + strings.Repeat("x", f%7) + ".go", Status: gitops.StatusModified, OldMode: "100644", NewMode: "100644"}
		for h := range 10 {
			hk := gitops.Hunk{Header: "@@ -1,20 +1,20 @@ func f()", OldStart: h * 30, NewStart: h * 30, OldLines: 20, NewLines: 20}
			for l := range 20 {
				hk.Lines = append(hk.Lines, gitops.Line{Type: gitops.LineContext, Content: "\tx := compute(a, b, c) // a line of code", OldLineNumber: l, NewLineNumber: l})
			}
			fd.Hunks = append(fd.Hunks, hk)
		}
		d.Files = append(d.Files, fd)
	}
	return d
}

// BenchmarkWireDiff is the conversion of a large diff to the protocol's
// types alone; BenchmarkWireDiffJSON adds the encoding the bridge does
// after it, to show what share of a reply's cost the conversion is.
func BenchmarkWireDiff(b *testing.B) {
	d := benchDiff()
	b.ReportAllocs()
	for b.Loop() {
		wireDiff(d)
	}
}

func BenchmarkWireDiffJSON(b *testing.B) {
	d := benchDiff()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(wire.GitDiffResponse{SessionID: "s", GitDiff: wireDiff(d)}); err != nil {
			b.Fatal(err)
		}
	}
}
