package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Look-alike working directories (<root>/a-b, <root>/a/b) share one
// directory of transcripts in the user's ~/.claude: a session in either
// gets its own instead, and keeps it once the look-alike is gone; a
// session in a directory of its own name shares the user's.
func TestLookAlikesKeepTheirTranscriptsApart(t *testing.T) {
	t.Parallel()
	home, root := t.TempDir(), t.TempDir()
	dashed, nested, solo := filepath.Join(root, "a-b"), filepath.Join(root, "a", "b"), filepath.Join(root, "solo")
	for _, d := range []string{filepath.Join(home, ".claude"), dashed, nested, solo} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	shared := filepath.Join(home, ".claude", "projects")
	sharesTranscripts := func(workDir, stateDir string) bool {
		t.Helper()
		binds, err := claudeBinds(home, workDir, stateDir, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range binds {
			if strings.HasPrefix(b.Src, shared+string(filepath.Separator)) {
				return true
			}
		}
		if _, err := os.Stat(filepath.Join(stateDir, "claude", "dot-claude", "projects", ClaudeProjectDir(workDir))); err != nil {
			t.Fatalf("%s has neither the user's transcripts nor its own: %v", workDir, err)
		}
		return false
	}
	dashedState, nestedState := t.TempDir(), t.TempDir()
	if sharesTranscripts(dashed, dashedState) || sharesTranscripts(nested, nestedState) {
		t.Fatal("a session in a look-alike directory shares the user's transcripts")
	}
	if err := os.RemoveAll(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if sharesTranscripts(dashed, dashedState) {
		t.Error("once its look-alike is gone, the session left its own transcripts")
	}
	if !sharesTranscripts(solo, t.TempDir()) || !sharesTranscripts(dashed, t.TempDir()) {
		t.Error("a session without a look-alike does not share the user's transcripts")
	}
}

// FuzzClaudeProjectDir: the name is the CLI's, every character but an
// ASCII letter or digit replaced by '-', as a regular expression does it
// (an invalid byte counting as one character).
func FuzzClaudeProjectDir(f *testing.F) {
	for _, s := range []string{"/home/dev/project", "/r/a-b", "/r/a.b/ü", "\xff\xfe/x", ""} {
		f.Add(s)
	}
	nonAlnum := regexp.MustCompile(`[^A-Za-z0-9]`)
	f.Fuzz(func(t *testing.T, dir string) {
		if got, want := ClaudeProjectDir(dir), nonAlnum.ReplaceAllString(dir, "-"); got != want {
			t.Fatalf("ClaudeProjectDir(%q) = %q, want %q", dir, got, want)
		}
	})
}

// The reviewer's attack at a small scale: an agent that can write a
// directory the walk enters (here root, above the user's project
// root/my-app/x) makes 50 names that encode as my-app does, each a link to
// one directory of 5,000 entries. The walk reads that directory once, and
// past a bound on the names read (of one directory, or in all) it answers
// "shared" having read no more than the bound.
func TestLookAlikesBoundTheirReads(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	big, work := filepath.Join(root, "big"), filepath.Join(root, "my-app", "x")
	for _, d := range []string{big, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5000 {
		if err := os.WriteFile(filepath.Join(big, "f"+strconv.Itoa(i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	links := make([]string, 50)
	for i := range links {
		links[i] = filepath.Join(root, "my"+string(rune(0x4e00+i))+"app") // encodes to my-app
		if err := os.Symlink(big, links[i]); err != nil {
			t.Fatal(err)
		}
	}
	// bigReads counts the names read of big, through any of its paths.
	bigReads := func(l *LookAlikes) *int {
		n := new(int)
		l.readNames = func(f *os.File, batch int) ([]string, error) {
			names, err := f.Readdirnames(batch)
			if f.Name() == big || slices.Contains(links, f.Name()) {
				*n += len(names)
			}
			return names, err
		}
		return n
	}

	l := new(LookAlikes)
	n := bigReads(l)
	if l.Shared(work) {
		t.Error("within the bounds, links to a directory without x count as a look-alike")
	}
	if *n != 5000 {
		t.Errorf("read %d names of the linked directory, want its 5,000 once", *n)
	}

	l = &LookAlikes{maxDirNames: 1000}
	n = bigReads(l)
	if !l.Shared(work) {
		t.Error("a directory over the bound of names does not count as shared")
	}
	if *n > 1000+lookAlikeBatch {
		t.Errorf("read %d names of the linked directory, over the bound of 1,000", *n)
	}

	l = &LookAlikes{maxNames: 3000}
	if !l.Shared(work) {
		t.Error("a walk over the bound of names in all does not count as shared")
	}
	if l.read > 3000+lookAlikeBatch {
		t.Errorf("read %d names in all, over the bound of 3,000", l.read)
	}
	if !l.Shared(filepath.Join(work, "y")) { // reads work, not read yet
		t.Error("past the bound in all, a later walk of the pass does not count as shared")
	}
}

// A directory the walk enters but cannot list (mode 0711: one may stat its
// entries, not list them) may hold a look-alike: it counts as shared. Root
// opens and lists it regardless, so run as root the test makes the open
// fail as it fails for another user (EACCES), and, apart, the read.
func TestLookAlikesInAnUnreadableDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	hidden, work := filepath.Join(root, "a"), filepath.Join(root, "a-b")
	for _, d := range []string{hidden, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if new(LookAlikes).Shared(work) {
		t.Fatal("an empty look-alike parent counts as shared while readable")
	}
	if err := os.Chmod(hidden, 0o711); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if !new(LookAlikes).Shared(work) {
			t.Error("a directory the walk cannot list counts as holding no look-alike")
		}
		return
	}
	denied := &fs.PathError{Op: "open", Path: hidden, Err: syscall.EACCES}
	openFails := &LookAlikes{open: func(name string) (*os.File, error) {
		if name == hidden {
			return nil, denied
		}
		return os.Open(name)
	}}
	if !openFails.Shared(work) {
		t.Error("a directory the walk cannot open counts as holding no look-alike")
	}
	readFails := &LookAlikes{readNames: func(f *os.File, n int) ([]string, error) {
		if f.Name() == hidden {
			return nil, denied
		}
		return f.Readdirnames(n)
	}}
	if !readFails.Shared(work) {
		t.Error("a directory the walk cannot read counts as holding no look-alike")
	}
}

// A directory the walk saw, replaced by a FIFO before the walk opens it
// (the agent can race it), is not waited on: it holds nothing.
func TestLookAlikesDoNotOpenAFIFO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "a")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	l := LookAlikes{byPath: map[string]*listing{}, byFile: map[fileID]*listing{}}
	if ls := l.entries(fifo); ls.unknown || len(ls.byEnc) != 0 {
		t.Errorf("a FIFO lists as %+v, want nothing", ls)
	}
}

// A session of <root>/a-b that shared the user's transcripts, when
// <root>/a/b appears, gets its own directory with a copy of the transcript
// of the conversation it resumes, so that --resume finds it, and nothing
// else of the shared directory: not the other files (the look-alike's
// agent may have planted them), not a link planted under its name, not a
// file reached through an id that is not the CLI's shape.
func TestLookAlikeKeepsTheConversationItResumes(t *testing.T) {
	t.Parallel()
	home, root := t.TempDir(), t.TempDir()
	work := filepath.Join(root, "a-b")
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	const id, linked = "0b7c2a4e-1f3d-4e5a-9b6c-7d8e9f0a1b2c", "1c8d3b5f-2a4e-4f6b-8c7d-8e9f0a1b2c3d"
	shared := filepath.Join(home, ".claude", "projects", ClaudeProjectDir(work))
	secret := filepath.Join(home, "secret")
	files := map[string]string{id + ".jsonl": `{"type":"user"}` + "\n", "planted.jsonl": "planted\n", "../x.jsonl": "beside\n"}
	stateOf := map[string]string{}
	for _, resume := range []string{id, linked, "../x"} {
		stateOf[resume] = t.TempDir()
		if _, err := claudeBinds(home, work, stateOf[resume], resume); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(shared, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(secret, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(shared, linked+".jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	for resume, stateDir := range stateOf {
		if _, err := claudeBinds(home, work, stateDir, resume); err != nil {
			t.Fatal(err)
		}
		private := filepath.Join(stateDir, "claude", "dot-claude", "projects", ClaudeProjectDir(work))
		entries, err := os.ReadDir(private)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		want := []string(nil)
		if resume == id {
			want = []string{id + ".jsonl"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("resuming %q, its own directory holds %q, want %q", resume, got, want)
		}
		if resume == id {
			if b, err := os.ReadFile(filepath.Join(private, id+".jsonl")); err != nil || string(b) != files[id+".jsonl"] {
				t.Errorf("the copied transcript: %q, %v", b, err)
			}
		}
	}
}
