package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"unicode/utf8"
)

// agentBinds are, per agent, the binds that give it the user's own setup;
// an agent not listed gets none.
// resumeID is the agent conversation the session resumes, if any.
var agentBinds = map[string]func(home, workDir, stateDir, resumeID string) ([]Bind, error){
	"claude-code": claudeBinds,
	"codex":       codexBinds,
}

// claudePrivate are the entries of ~/.claude a session does not see from
// the user's: every project's transcripts (its own project's are bound
// apart), the prompt history of all projects, the credentials (bound apart,
// writable), the IDE lock files (they hold the IDE bridges' tokens), and
// the CLI's scratch state, which each session keeps for itself.
var claudePrivate = []string{
	"projects", "history.jsonl", ".credentials.json", "ide",
	"backups", "debug", "file-history", "paste-cache", "plans", "session-env", "sessions",
	"shell-snapshots", "statsig", "telemetry", "todos",
}

// Bounds of the search for look-alikes, past any of which a name counts
// as shared (so does a directory the walk cannot list): the directories
// one name's walk enters (a directory reached through several links
// counts once per link, but is read once), the names read of one
// directory, and the names read in all by one LookAlikes (a pass). An
// agent can write some of the directories walked: it must not make the
// daemon read or hold more than this.
const (
	maxLookAlikeWalk     = 1000
	maxLookAlikeDirNames = 20_000
	maxLookAlikeNames    = 100_000
	lookAlikeBatch       = 256 // names read at once
)

// ClaudeProjectDirShared reports whether a directory other than workDir
// exists whose Claude Code project directory is named as workDir's
// (ClaudeProjectDir is lossy: /r/a-b, /r/a/b and /r/a.b share -r-a-b); see
// [LookAlikes].
func ClaudeProjectDirShared(workDir string) bool { return new(LookAlikes).Shared(workDir) }

// LookAlikes finds the directories that share a Claude Code project
// directory. It remembers the directories it has read, by path and by
// file (device and inode: the links to one directory read it once): one
// serves a pass over many working directories, which share their parents.
// Not safe for concurrent use; the zero value is ready.
type LookAlikes struct {
	byPath map[string]*listing
	byFile map[fileID]*listing
	dirs   map[string]bool // whether a path is a directory
	read   int             // names read so far

	// For tests: lower bounds than the package's (zero: the package's),
	// what opens a directory (nil: openDir) and what reads its names (nil:
	// Readdirnames).
	maxDirNames, maxNames int
	open                  func(name string) (*os.File, error)
	readNames             func(f *os.File, n int) ([]string, error)
}

// listing is what a directory holds, its names by their encoding; unknown
// when it could not be read whole (an error, or more names than a bound):
// then anything may be in it.
type listing struct {
	byEnc   map[string][]string
	unknown bool
}

// fileID is a file's identity: device and inode.
type fileID struct{ dev, ino uint64 }

// Shared reports whether a directory other than workDir exists whose Claude
// Code project directory is named as workDir's. It walks from / down the
// entries whose names encode to the next part of the name (a link to a
// directory counts: a session may work through it), within the bounds of
// maxLookAlikeWalk and the names read; past them, or at a directory it
// cannot list, it reports true.
func (l *LookAlikes) Shared(workDir string) bool {
	if l.byPath == nil {
		l.byPath, l.byFile, l.dirs = map[string]*listing{}, map[fileID]*listing{}, map[string]bool{}
	}
	steps := 0
	var walk func(dir, rest string) bool
	walk = func(dir, rest string) bool {
		if rest == "" {
			return dir != workDir
		}
		if rest[0] != '-' {
			return false
		}
		if steps++; steps > maxLookAlikeWalk {
			return true
		}
		rest = rest[1:]
		ls := l.entries(dir)
		if ls.unknown {
			return true
		}
		// An entry matches when its encoding is rest up to a '-' (the
		// next separator, or one of its own) or whole.
		for k := 1; k <= len(rest); k++ {
			if k < len(rest) && rest[k] != '-' {
				continue
			}
			for _, name := range ls.byEnc[rest[:k]] {
				path := filepath.Join(dir, name)
				if l.isDir(path) && walk(path, rest[k:]) {
					return true
				}
			}
		}
		return false
	}
	return walk("/", ClaudeProjectDir(workDir))
}

// entries is what dir holds, read once per path and once per directory.
func (l *LookAlikes) entries(dir string) *listing {
	ls, ok := l.byPath[dir]
	if !ok {
		ls = l.list(dir)
		l.byPath[dir] = ls
	}
	return ls
}

// list reads dir's names, unless the directory it opens was read already
// (through another path), in batches, up to the bounds.
func (l *LookAlikes) list(dir string) *listing {
	maxDir, maxAll := cmp.Or(l.maxDirNames, maxLookAlikeDirNames), cmp.Or(l.maxNames, maxLookAlikeNames)
	if l.read >= maxAll {
		return &listing{unknown: true}
	}
	open := l.open
	if open == nil {
		open = openDir
	}
	f, err := open(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return &listing{} // gone or replaced since it was seen: nothing is in it
	}
	if err != nil {
		return &listing{unknown: true} // a directory we may not list (mode 0711) may hold a look-alike
	}
	defer func() { _ = f.Close() }() // only read from: closing it has nothing to report
	fi, err := f.Stat()
	if err != nil {
		return &listing{unknown: true}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return &listing{unknown: true}
	}
	id := fileID{st.Dev, st.Ino}
	if ls, ok := l.byFile[id]; ok {
		return ls
	}
	read := l.readNames
	if read == nil {
		read = (*os.File).Readdirnames
	}
	ls := &listing{unknown: true}
	l.byFile[id] = ls
	var all []string
	for {
		names, err := read(f, lookAlikeBatch)
		all = append(all, names...)
		l.read += len(names)
		if len(all) > maxDir || l.read > maxAll || err != nil && !errors.Is(err, io.EOF) {
			return ls
		}
		if err != nil {
			break
		}
	}
	ls.byEnc, ls.unknown = make(map[string][]string, len(all)), false
	for _, name := range all {
		enc := ClaudeProjectDir(name)
		ls.byEnc[enc] = append(ls.byEnc[enc], name)
	}
	return ls
}

// openDir opens a directory, and fails at once on anything else: the
// agent can replace a directory the walk saw by a FIFO, whose plain open
// would wait for a writer forever.
func openDir(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY, 0)
}

// isDir reports whether path is a directory or a link to one, looked at
// once.
func (l *LookAlikes) isDir(path string) bool {
	d, ok := l.dirs[path]
	if !ok {
		fi, err := os.Stat(path)
		d = err == nil && fi.IsDir()
		l.dirs[path] = d
	}
	return d
}

// ClaudeProjectDir is the CLI's name for a working directory's directory
// under ~/.claude/projects: every character but a letter or a digit
// becomes '-' (/home/dev/project: -home-dev-project).
func ClaudeProjectDir(workDir string) string {
	b := make([]byte, 0, len(workDir))
	for _, r := range workDir {
		if r < utf8.RuneSelf && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			b = append(b, byte(r))
		} else {
			b = append(b, '-')
		}
	}
	return string(b)
}

// claudeBinds gives the Claude Code CLI the user's ~/.claude and
// ~/.claude.json:
//
//   - ~/.claude is the session's own directory (StateDir/claude/dot-claude,
//     where the CLI's scratch state lands), with every entry of the user's
//     ~/.claude but claudePrivate bound in read-only: settings, CLAUDE.md,
//     commands, agents, skills, plugins, hooks' scripts …;
//   - ~/.claude/.credentials.json, when the user has one, read-write: the
//     CLI rewrites it when it refreshes an OAuth token;
//   - ~/.claude/projects/<this working directory>, read-write (created in
//     the user's ~/.claude when missing): the conversation transcripts
//     that --resume reads, shared with the user's own CLI; unless another
//     directory shares its name (ClaudeProjectDirShared), or did at an
//     earlier start: then the session's own, which starts with a copy of
//     the transcript of the conversation it resumes (resumeID), when the
//     user's directory has it, and nothing else of it;
//   - ~/.claude.json is StateDir/claude/claude.json, a copy of the user's
//     made when the session first starts; the CLI's changes to it (its
//     per-project state) stay with the session and are not copied back.
//
// Without a ~/.claude the CLI gets the session's own, empty, directory.
func claudeBinds(home, workDir, stateDir, resumeID string) ([]Bind, error) {
	if home == "" || stateDir == "" {
		return nil, nil
	}
	state := filepath.Join(stateDir, "claude")
	own := filepath.Join(state, "dot-claude")
	if err := os.MkdirAll(own, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: claude state: %w", err)
	}
	user := filepath.Join(home, ".claude")
	binds := []Bind{{Src: own, Dst: user, Writable: true}}
	entries, err := os.ReadDir(user)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("sandbox: ~/.claude: %w", err)
	default:
		for _, e := range entries {
			if !slices.Contains(claudePrivate, e.Name()) {
				binds = append(binds, Bind{Src: filepath.Join(user, e.Name()), Dst: filepath.Join(user, e.Name())})
			}
		}
		if fi, err := os.Stat(filepath.Join(user, ".credentials.json")); err == nil && fi.Mode().IsRegular() {
			p := filepath.Join(user, ".credentials.json")
			binds = append(binds, Bind{Src: p, Dst: p, Writable: true})
		}
		// Look-alike working directories (/r/a-b, /r/a/b) share one
		// directory of transcripts: a session whose working directory
		// has one, or had one at an earlier start (its own copy exists),
		// keeps its transcripts in its own ~/.claude, so that neither
		// agent reads or writes the other project's conversations.
		private := filepath.Join(own, "projects", ClaudeProjectDir(workDir))
		project := filepath.Join(user, "projects", ClaudeProjectDir(workDir))
		_, err := os.Stat(private)
		switch {
		case err == nil:
		case ClaudeProjectDirShared(workDir):
			// A session that shared the user's directory until a
			// look-alike appeared keeps the conversation it resumes:
			// its own transcript, not the rest of the directory, which
			// the look-alike's agent may have written.
			if err := os.MkdirAll(private, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox: claude project directory: %w", err)
			}
			if err := copyTranscript(project, private, resumeID); err != nil {
				return nil, err
			}
		default:
			if err := os.MkdirAll(project, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox: claude project directory: %w", err)
			}
			binds = append(binds, Bind{Src: project, Dst: project, Writable: true})
		}
	}
	global := filepath.Join(state, "claude.json")
	if err := copyOnce(filepath.Join(home, ".claude.json"), global); err != nil {
		return nil, err
	}
	return append(binds, Bind{Src: global, Dst: filepath.Join(home, ".claude.json"), Writable: true}), nil
}

// claudeSessionID is the shape of the CLI's conversation ids, a UUID: a
// recorded id comes from the sandbox and may be anything.
var claudeSessionID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// maxTranscriptCopy bounds the transcript copyTranscript copies.
const maxTranscriptCopy = 256 << 20

// copyTranscript copies the transcript of conversation id from the
// directory from into to, when it is a regular file (not a link, which the
// agent may have planted to reach another file) of at most
// maxTranscriptCopy bytes; else it copies nothing.
func copyTranscript(from, to, id string) error {
	if !claudeSessionID.MatchString(id) {
		return nil
	}
	name := id + ".jsonl"
	// O_NONBLOCK: a FIFO planted under the name does not block the open.
	src, err := os.OpenFile(filepath.Join(from, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil // none, or not one the CLI wrote
	}
	defer func() { _ = src.Close() }() // only read from: closing it has nothing to report
	if fi, err := src.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxTranscriptCopy {
		return nil
	}
	dst, err := os.OpenFile(filepath.Join(to, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox: claude transcript: %w", err)
	}
	_, err = io.Copy(dst, io.LimitReader(src, maxTranscriptCopy))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sandbox: claude transcript: %w", err)
	}
	return nil
}

// copyOnce copies src to dst unless dst exists; a missing src makes an
// empty JSON object.
func copyOnce(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b = []byte("{}\n")
	case err != nil:
		return fmt.Errorf("sandbox: ~/.claude.json: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return fmt.Errorf("sandbox: claude state: %w", err)
	}
	return nil
}
