package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

func TestFilesOverTheProtocol(t *testing.T) {
	d := newDaemon(t)
	os.MkdirAll(filepath.Join(d.project, "lib", "models"), 0o755)
	os.WriteFile(filepath.Join(d.project, "lib", "auth.dart"), []byte("class Auth {}\nvoid main() {}\n"), 0o644)
	os.WriteFile(filepath.Join(d.project, "README.md"), []byte("# hi\n"), 0o644)
	os.WriteFile(filepath.Join(d.project, ".env"), []byte("SECRET=1\n"), 0o644)
	os.Symlink("/etc", filepath.Join(d.project, "etc-link"))
	c, _ := d.phone(nil)
	const id = "files"
	d.startSession(c, id, "ask")
	c.WaitFor(wire.TypeSessionReady, nil, nil)

	type entry struct {
		Name, Path, Type, Modified string
		Size                       int64
		Symlink                    bool
	}
	var l struct {
		SessionID string `json:"session_id"`
		Path      string
		Entries   []entry
	}
	c.Send(wire.TypeFileList, "file-1", map[string]any{"session_id": id, "path": "."})
	if env := c.WaitFor(wire.TypeFileListResponse, &l, nil); env.ID != "file-1" || l.SessionID != id {
		t.Fatalf("file_list_response id %q: %+v", env.ID, l)
	}
	names := []string{}
	for _, e := range l.Entries {
		names = append(names, e.Name+":"+e.Type)
	}
	if got := strings.Join(names, " "); got != "lib:directory README.md:file etc-link:file" {
		t.Fatalf("listing of the root: %s (directories first, dotfiles and .git hidden, a link out is a file)", got)
	}
	// Down by the entry's own path, and read a file by its entry's path.
	c.Send(wire.TypeFileList, "file-2", map[string]any{"session_id": id, "path": l.Entries[0].Path})
	c.WaitFor(wire.TypeFileListResponse, &l, func(e wire.Envelope) bool { return e.ID == "file-2" })
	if len(l.Entries) != 2 || l.Entries[0].Name != "models" || l.Entries[1].Path != "lib/auth.dart" || l.Entries[1].Modified == "" {
		t.Fatalf("listing of lib: %+v", l.Entries)
	}
	var f struct {
		Content        string
		Size, Lines    int
		Truncated      bool
		Encoding, Path string
	}
	c.Send(wire.TypeFileRead, "file-3", map[string]any{"session_id": id, "path": "lib/auth.dart", "offset": 0})
	c.WaitFor(wire.TypeFileReadResponse, &f, func(e wire.Envelope) bool { return e.ID == "file-3" })
	if f.Content != "class Auth {}\nvoid main() {}\n" || f.Lines != 2 || f.Size != 29 || f.Encoding != "utf-8" || f.Truncated {
		t.Fatalf("file_read = %+v", f)
	}
	// The spec's absolute form, inside the working directory, works too.
	c.Send(wire.TypeFileRead, "file-4", map[string]any{"session_id": id, "path": filepath.Join(d.project, "README.md"), "offset": 0, "limit": 1})
	c.WaitFor(wire.TypeFileReadResponse, &f, func(e wire.Envelope) bool { return e.ID == "file-4" })
	if f.Content != "# hi\n" {
		t.Fatalf("absolute read = %+v", f)
	}

	for _, tt := range []struct{ typ, payload, code string }{
		{wire.TypeFileRead, `{"session_id":"files","path":"../../etc/passwd"}`, "PATH_OUTSIDE_ROOT"},
		{wire.TypeFileRead, `{"session_id":"files","path":"/etc/passwd"}`, "PATH_OUTSIDE_ROOT"},
		{wire.TypeFileList, `{"session_id":"files","path":"etc-link"}`, "PATH_OUTSIDE_ROOT"},
		{wire.TypeFileRead, `{"session_id":"files","path":"nope.txt"}`, "FILE_NOT_FOUND"},
		{wire.TypeFileRead, `{"session_id":"files","path":"lib"}`, "NOT_A_FILE"},
		{wire.TypeFileList, `{"session_id":"files","path":"README.md"}`, "NOT_A_DIRECTORY"},
		{wire.TypeFileRead, `{"session_id":"files","path":"a\u0000b"}`, "INVALID_PATH"},
		{wire.TypeFileList, `{"session_id":"nope","path":"."}`, wire.CodeSessionNotFound},
		{wire.TypeFileList, `{"path":"."}`, wire.CodeInvalidMessage},
		{wire.TypeFileList, `{"session_id":"files","path":7}`, wire.CodeInvalidMessage},
		{wire.TypeFileRead, `{"session_id":"files","path":"README.md","offset":"0"}`, wire.CodeInvalidMessage},
	} {
		c.SendRaw(`{"type":"` + tt.typ + `","id":"bad","payload":` + tt.payload + `}`)
		var ep wire.ErrorPayload
		c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == "bad" })
		if ep.Code != tt.code || strings.Contains(ep.Message, "/etc") {
			t.Errorf("%s %s: %+v, want %s", tt.typ, tt.payload, ep, tt.code)
		}
	}
}

// TestFileRepliesInFlight sends reads and listings back to back, as many
// as run at once, for several rounds: each reply must be its own file's,
// whole, while the frames' buffers go round the daemon's pool (which
// bridge's TestPooledFramesKeptUntilWritten pins down with the queue held).
func TestFileRepliesInFlight(t *testing.T) {
	d := newDaemon(t)
	want := map[string]string{}
	for i := range 8 {
		name := fmt.Sprintf("f%d.txt", i)
		want[name] = strings.Repeat(fmt.Sprintf("line %d of %s <&>\t\"\n", i, name), 2000+500*i)
		if err := os.WriteFile(filepath.Join(d.project, name), []byte(want[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := d.phone(nil)
	d.startSession(c, "files", "ask")
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	for round := range 5 {
		sent := map[string]string{}
		for k := range 4 { // bridge.MaxRequests
			id := fmt.Sprintf("r%d-%d", round, k)
			if k == 3 {
				c.Send(wire.TypeFileList, id, map[string]any{"session_id": "files", "path": "."})
				sent[id] = ""
				continue
			}
			name := fmt.Sprintf("f%d.txt", (round+k)%8)
			c.Send(wire.TypeFileRead, id, map[string]any{"session_id": "files", "path": name})
			sent[id] = name
		}
		for len(sent) > 0 {
			env := c.Read()
			name, ok := sent[env.ID]
			if !ok {
				continue
			}
			delete(sent, env.ID)
			if name == "" {
				var l wire.FileListResponse
				wstest.Decode(t, env, &l)
				if env.Type != wire.TypeFileListResponse || l.FileListing == nil || l.Total != len(want) {
					t.Fatalf("%s: %s %s", env.ID, env.Type, env.Payload)
				}
				continue
			}
			var f wire.FileReadResponse
			wstest.Decode(t, env, &f)
			if env.Type != wire.TypeFileReadResponse || f.FileContent == nil || f.Path != name || f.Content != want[name] {
				t.Fatalf("%s: %s of %q, %d bytes (want %s, %d bytes)", env.ID, env.Type, f.Path, len(f.Content), name, len(want[name]))
			}
		}
	}
}
