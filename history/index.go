package history

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// Sources of a session.
const (
	SourceClaude = "claude" // a Claude Code transcript
	SourceCodex  = "codex"  // a Codex rollout
	SourceTether = "tether" // a tether session with no transcript of its own
)

// Config configures an Index.
type Config struct {
	// ClaudeDirs are Claude Code's configuration directories (~/.claude,
	// $CLAUDE_CONFIG_DIR): the transcripts under each one's projects/.
	ClaudeDirs []string
	// CodexDirs are Codex's home directories (~/.codex, $CODEX_HOME): the
	// rollouts under each one's sessions/.
	CodexDirs []string
	// Store holds tether's own sessions; nil lists none.
	Store *store.Store
	// Logger receives what was skipped and why.
	Logger *slog.Logger
	// Workers read files in parallel at the first scan; GOMAXPROCS when 0.
	Workers int
}

// Session is one conversation of the history.
type Session struct {
	// ID names it in the history: its source, ':' and its own id.
	ID     string
	Source string
	// Agent is the agent that ran it: claude-code, codex, or a tether
	// session's agent.
	Agent string
	// Project is its working directory.
	Project string
	// Title is its first prompt (a tether session's title when it has
	// none).
	Title        string
	StartedAt    time.Time
	LastActivity time.Time
	// Messages counts its conversation: prompts, answers, tool calls and
	// results (for a tether session, its prompts and answers).
	Messages int
	// Live says a tether session runs it now.
	Live bool
	// SessionID is the tether session that runs or ran it, if any.
	SessionID string
	// AgentSessionID is the agent's own id of the conversation (Claude
	// Code's session id, Codex's thread id).
	AgentSessionID string
	// Resumable says claude --resume can continue a Claude Code
	// conversation: its id has Claude Code's shape (the file's name, which
	// whoever writes the projects directory chose: a sandboxed agent can),
	// its file lies in the directory Claude Code keeps for its working
	// directory, and no other directory shares that one's name, now on
	// disk or as a sandboxed session's working directory in the store
	// (lookalike.go): so the working directory it names is not borrowed
	// by an agent that worked elsewhere.
	Resumable bool

	search string // its project and prompts, lower case
}

// ownDir reports whether a Claude Code transcript lies in the directory
// Claude Code keeps for the working directory it names.
func (f *file) ownDir() bool {
	return f.source == SourceClaude && f.sum.cwd != "" && filepath.Base(filepath.Dir(f.rel)) == session.ClaudeProjectDir(f.sum.cwd)
}

// preferred is, of two files that claim one conversation, the one in its
// own directory, else the first by path: the same one every time (a nil a
// gives b).
func preferred(a, b *file) *file {
	switch {
	case a == nil:
		return b
	case a.ownDir() != b.ownDir():
		if a.ownDir() {
			return a
		}
		return b
	case filepath.Join(b.root, b.rel) < filepath.Join(a.root, a.rel):
		return b
	}
	return a
}

// claudeSessionID is the shape of Claude Code's session ids (a UUID).
var claudeSessionID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Bounds of what the index holds of one directory (a project's
// transcripts, a day's rollouts), which a sandboxed agent can fill with
// files: millions of them cost it nothing but inodes.
const (
	// maxDirFiles is how many files of a directory the index holds: the
	// newest by modification time. Claude Code keeps a project's
	// transcripts 30 days by default: 5,000 is over 160 conversations a
	// day, in one project; the generated history has 25 a project.
	maxDirFiles = 5000
	// maxDirEntries is how many entries of a directory a walk reads: what
	// lies past them is not indexed.
	maxDirEntries = 10 * maxDirFiles
)

// Index is the history. Its methods are safe for concurrent use.
type Index struct {
	cfg Config
	// dirFiles and dirEntries are maxDirFiles and maxDirEntries (tests
	// lower them).
	dirFiles, dirEntries int

	mu    sync.RWMutex
	files map[string]*file // by path
	// dirs holds the files by directory; full, the directories that were
	// found over a bound (each logged once).
	dirs map[string]*dirFiles
	full map[string]bool
	// changes counts the changes of files; sorted holds the files'
	// sessions, the most recently active first, as of the count built.
	changes, built uint64
	sorted         []Session
	byAgentID      map[string]int // index in sorted
	// tether caches what the log gives of tether sessions, by id.
	tether map[string]tetherDigest

	readyOnce sync.Once
	ready     chan struct{}
}

// file is one agent file the index read.
type file struct {
	source string
	root   string // the directory it is opened under
	rel    string // its path under root
	id     string // the conversation's own id
	state  fileState
	sum    summary
}

// New returns an Index; Run builds it and keeps it current.
func New(cfg Config) *Index {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	return &Index{cfg: cfg, dirFiles: maxDirFiles, dirEntries: maxDirEntries, files: map[string]*file{}, dirs: map[string]*dirFiles{},
		full: map[string]bool{}, tether: map[string]tetherDigest{}, ready: make(chan struct{})}
}

// Ready is closed once the first scan is over.
func (x *Index) Ready() <-chan struct{} { return x.ready }

// roots are the directories the index reads, by source.
func (x *Index) roots() (out []root) {
	for _, d := range x.cfg.ClaudeDirs {
		out = append(out, root{SourceClaude, filepath.Join(d, "projects")})
	}
	for _, d := range x.cfg.CodexDirs {
		out = append(out, root{SourceCodex, filepath.Join(d, "sessions")})
	}
	return out
}

type root struct {
	source string
	dir    string
}

// depth is how deep a source's files lie under its root: a Claude Code
// transcript in its project's directory, a Codex rollout under
// YYYY/MM/DD.
func (r root) depth() int {
	if r.source == SourceCodex {
		return 4
	}
	return 2
}

// wanted reports whether rel, a path under a root, is a file of that
// root's source.
func (r root) wanted(rel string) bool {
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) != r.depth() || filepath.Ext(rel) != ".jsonl" {
		return false
	}
	if r.source == SourceCodex {
		return strings.HasPrefix(parts[len(parts)-1], "rollout-")
	}
	return true
}

// Scan reads every file under the roots, anew or on from where it was last
// read, and forgets the files that are gone.
func (x *Index) Scan(ctx context.Context) error {
	type job struct {
		r   root
		rel string
	}
	var jobs []job
	seen := map[string]bool{}
	for _, r := range x.roots() {
		for _, rel := range x.listFiles(r, ".") {
			jobs = append(jobs, job{r, rel})
			seen[filepath.Join(r.dir, rel)] = true
		}
	}
	work := make(chan job)
	var wg sync.WaitGroup
	for range x.cfg.Workers {
		wg.Go(func() {
			for j := range work {
				x.update(j.r, j.rel)
			}
		})
	}
	for _, j := range jobs {
		select {
		case work <- j:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	x.mu.Lock()
	for path := range x.files {
		if !seen[path] {
			x.drop(path)
		}
	}
	x.mu.Unlock()
	x.readyOnce.Do(func() { close(x.ready) })
	return ctx.Err()
}

// listFiles lists a root's files under its directory under (".": all),
// opening directories through an os.Root and following no symbolic link:
// of each directory, its first dirEntries entries, and of those its
// dirFiles newest files.
func (x *Index) listFiles(r root, under string) []string {
	rt, err := os.OpenRoot(r.dir)
	if err != nil {
		return nil
	}
	defer rt.Close()
	var out []string
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		entries, more := readDir(rt, rel, x.dirEntries)
		var files []string
		for _, e := range entries {
			p := filepath.Join(rel, e.Name())
			switch {
			case e.Type().IsDir() && depth < r.depth():
				walk(p, depth+1)
			case e.Type().IsRegular() && depth == r.depth() && r.wanted(p):
				files = append(files, p)
			}
		}
		if len(files) > x.dirFiles {
			files = newest(rt, files, x.dirFiles)
			more = true
		}
		if more {
			x.overBound(filepath.Join(r.dir, rel))
		}
		out = append(out, files...)
	}
	depth := 1
	if under != "." {
		depth += len(strings.Split(under, string(filepath.Separator)))
	}
	walk(under, depth)
	return out
}

// readDir reads at most n entries of the directory rel of rt; more says
// there are others.
func readDir(rt *os.Root, rel string, n int) (entries []fs.DirEntry, more bool) {
	d, err := rt.Open(rel)
	if err != nil {
		return nil, false
	}
	defer d.Close()
	for len(entries) < n {
		chunk, err := d.ReadDir(min(n-len(entries), 1024))
		entries = append(entries, chunk...)
		if err != nil {
			return entries, false
		}
	}
	next, _ := d.ReadDir(1)
	return entries, len(next) > 0
}

// ranked is a file's modification time as the bound of a directory ranks
// it, where the newest are kept: a time more than a minute ahead of the
// clock ranks as the oldest. The agent sets its files' times; files dated
// in the future would otherwise outrank, and keep out, every file written
// after them.
func ranked(mod time.Time) time.Time {
	if mod.After(time.Now().Add(time.Minute)) {
		return time.Time{}
	}
	return mod
}

// newest returns the n most recently modified of files (paths under rt).
func newest(rt *os.Root, files []string, n int) []string {
	type dated struct {
		rel string
		mod time.Time
	}
	all := make([]dated, 0, len(files))
	for _, rel := range files {
		if info, err := rt.Lstat(rel); err == nil {
			all = append(all, dated{rel, ranked(info.ModTime())})
		}
	}
	slices.SortFunc(all, func(a, b dated) int {
		if c := b.mod.Compare(a.mod); c != 0 {
			return c
		}
		return strings.Compare(a.rel, b.rel)
	})
	out := make([]string, 0, n)
	for _, d := range all[:min(n, len(all))] {
		out = append(out, d.rel)
	}
	return out
}

// overBound logs, once per directory, that it holds more files than the
// index holds of it.
func (x *Index) overBound(dir string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.overBoundLocked(dir)
}

func (x *Index) overBoundLocked(dir string) {
	if x.full[dir] {
		return
	}
	x.full[dir] = true
	x.cfg.Logger.Warn("history: a directory holds more session files than the bound: only its newest are indexed", "dir", dir,
		"bound_files", x.dirFiles, "bound_entries", x.dirEntries)
}

// dirFiles are the files the index holds of one directory.
type dirFiles struct {
	files map[string]*file // by path
	// floor is the oldest modification time of files, when known.
	floor   time.Time
	floored bool
}

// put holds f as the file at path, in its directory. A file new to a
// directory that holds dirFiles already is left out if it is older than
// all of them; else it takes the place of the oldest tenth of them (at
// once, so that each new file does not search the directory again). x.mu
// is held.
func (x *Index) put(path string, f *file) {
	dir := filepath.Dir(path)
	d := x.dirs[dir]
	if d == nil {
		d = &dirFiles{files: map[string]*file{}}
		x.dirs[dir] = d
	}
	if _, ok := d.files[path]; !ok && len(d.files) >= x.dirFiles {
		x.overBoundLocked(dir)
		if ranked(f.state.mod).Before(x.floorLocked(dir)) {
			return
		}
		x.evictLocked(dir)
	}
	d.files[path], d.floored = f, false
	x.files[path] = f
	x.changes++
}

// evictLocked forgets the least recently modified tenth (at least one) of
// the files the index holds of dir. x.mu is held.
func (x *Index) evictLocked(dir string) {
	d := x.dirs[dir]
	paths := make([]string, 0, len(d.files))
	for p := range d.files {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, func(a, b string) int {
		if c := ranked(d.files[a].state.mod).Compare(ranked(d.files[b].state.mod)); c != 0 {
			return c
		}
		return strings.Compare(b, a)
	})
	for _, p := range paths[:max(1, x.dirFiles/10)] {
		x.drop(p)
	}
}

// floorLocked is, for a directory of which the index holds dirFiles
// files, the modification time of the oldest: a file not held that is
// older is not read. Zero for other directories. x.mu is held.
func (x *Index) floorLocked(dir string) time.Time {
	d := x.dirs[dir]
	if d == nil || len(d.files) < x.dirFiles {
		return time.Time{}
	}
	if !d.floored {
		first := true
		for _, g := range d.files {
			if mod := ranked(g.state.mod); first || mod.Before(d.floor) {
				d.floor, first = mod, false
			}
		}
		d.floored = true
	}
	return d.floor
}

// errOlder is the error of a file left out: its directory is full of
// newer ones.
var errOlder = errors.New("history: older than the files its directory holds")

// drop forgets the file at path. x.mu is held.
func (x *Index) drop(path string) {
	if _, ok := x.files[path]; !ok {
		return
	}
	delete(x.files, path)
	dir := filepath.Dir(path)
	if d := x.dirs[dir]; d != nil {
		delete(d.files, path)
		d.floored = false
		if len(d.files) == 0 {
			delete(x.dirs, dir)
		}
	}
	x.changes++
}

// update reads a file anew, or on from where it was last read; a file that
// is gone (or is not a regular file) is forgotten.
func (x *Index) update(r root, rel string) {
	path := filepath.Join(r.dir, rel)
	x.mu.RLock()
	old := x.files[path]
	x.mu.RUnlock()
	var floor time.Time
	if old == nil {
		x.mu.Lock() // the floor is cached
		floor = x.floorLocked(filepath.Dir(path))
		x.mu.Unlock()
	}
	f, err := x.read(r, rel, old, floor)
	x.mu.Lock()
	defer x.mu.Unlock()
	if errors.Is(err, errOlder) {
		return
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, session.ErrNotRegular) {
			x.cfg.Logger.Warn("history: reading a session file", "path", path, "err", err)
		}
		x.drop(path)
		return
	}
	if f.sum.malformed+f.sum.overlong > 0 && (old == nil || old.sum.malformed+old.sum.overlong != f.sum.malformed+f.sum.overlong) {
		x.cfg.Logger.Warn("history: session file lines skipped", "path", path, "malformed", f.sum.malformed, "over_bound", f.sum.overlong, "bound", MaxLine)
	}
	if f.state.partial && (old == nil || !old.state.partial) {
		x.cfg.Logger.Warn("history: session file longer than the bound: indexed as of its start", "path", path, "size", f.state.size, "bound", MaxFile)
	}
	if f != old {
		x.put(path, f)
	}
}

// read summarises a file, on from old when it goes on from there; a file
// modified before floor is not read (errOlder).
func (x *Index) read(r root, rel string, old *file, floor time.Time) (*file, error) {
	fh, info, err := session.OpenTranscript(r.dir, rel)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if ranked(info.ModTime()).Before(floor) {
		return nil, errOlder
	}
	f := &file{source: r.source, root: r.dir, rel: rel, id: conversationID(r.source, rel)}
	if old != nil && old.state.continues(fh, info) {
		// A file read up to MaxFile has nothing more to read.
		if old.state.partial || old.state.size == info.Size() && old.state.mod.Equal(info.ModTime()) {
			return old, nil
		}
		f.sum, f.state = old.sum, old.state
	}
	limit := min(info.Size(), MaxFile)
	end, from := f.state.end, f.state.end
	if f.state.skip > 0 {
		// A line over MaxLine being written: on from what was read of it.
		after, ok, err := nextLine(fh, f.state.skip, limit)
		if err != nil {
			return nil, err
		}
		from = limit
		if ok {
			f.sum.overlong++
			end, from = after, after
		}
	}
	if from < limit {
		body := io.NewSectionReader(fh, from, limit-from)
		switch r.source {
		case SourceCodex:
			end, err = scanCodex(body, from, &f.sum)
		default:
			end, err = scanClaude(SourceClaude+":"+f.id, body, from, &f.sum)
		}
		if err != nil {
			return nil, err
		}
	}
	var skip int64
	if limit-end > MaxLine {
		// What follows the last line is already over MaxLine: the next
		// read does not read it again.
		skip = limit
	}
	if f.sum.last.IsZero() {
		f.sum.last = info.ModTime()
	}
	if f.sum.started.IsZero() {
		f.sum.started = f.sum.last
	}
	f.state = fileState{id: session.FileID(info), size: info.Size(), mod: info.ModTime(), end: end, skip: skip, partial: info.Size() > MaxFile}
	return f, nil
}

// conversationID is the agent's own id of the conversation in a file: a
// transcript's name, a rollout's trailing UUID.
func conversationID(source, rel string) string {
	name := strings.TrimSuffix(filepath.Base(rel), ".jsonl")
	if source == SourceCodex && len(name) >= 36 {
		return name[len(name)-36:]
	}
	return name
}

// Query asks for a page of the history.
type Query struct {
	// Project keeps the sessions of that working directory only.
	Project string
	// Text keeps the sessions whose prompts, title or project hold it
	// (case-insensitive).
	Text string
	// Cursor is a page's Next: the page after it.
	Cursor string
	// Limit is the most sessions in a page.
	Limit int
}

// Page is a page of the history, the most recently active first.
type Page struct {
	Sessions []Session
	// Next asks for the page after this one; empty on the last.
	Next string
}

// List returns a page of the history.
func (x *Index) List(ctx context.Context, q Query) (Page, error) {
	all, err := x.sessions(ctx)
	if err != nil {
		return Page{}, err
	}
	text := strings.ToLower(strings.TrimSpace(q.Text))
	var after *cursor
	if q.Cursor != "" {
		c, err := parseCursor(q.Cursor)
		if err != nil {
			return Page{}, err
		}
		after = &c
	}
	var out []Session
	for _, s := range all {
		if q.Project != "" && s.Project != q.Project {
			continue
		}
		if text != "" && !strings.Contains(s.search, text) {
			continue
		}
		if after != nil && !after.before(s) {
			continue
		}
		out = append(out, s)
		if q.Limit > 0 && len(out) > q.Limit {
			break
		}
	}
	var p Page
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
		last := out[len(out)-1]
		p.Next = cursor{last.LastActivity.UnixNano(), last.ID}.String()
	}
	p.Sessions = out
	return p, nil
}

func newestFirst(a, b Session) int {
	if c := b.LastActivity.Compare(a.LastActivity); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// cursor is the last session of a page: the next starts after it.
type cursor struct {
	at int64 // its last activity, Unix nanoseconds
	id string
}

func (c cursor) String() string { return strconv.FormatInt(c.at, 10) + ":" + c.id }

func parseCursor(s string) (cursor, error) {
	at, id, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return cursor{}, wire.Errorf(wire.CodeInvalidMessage, "cursor must be a page's next_cursor")
	}
	return cursor{n, id}, nil
}

// before reports whether s comes after the cursor in the newest-first order.
func (c cursor) before(s Session) bool {
	return newestFirst(Session{LastActivity: time.Unix(0, c.at), ID: c.id}, s) < 0
}

// Project is one working directory of the history.
type Project struct {
	Path         string
	Sessions     int
	LastActivity time.Time
}

// Projects lists the history's working directories, the most recently
// active first.
func (x *Index) Projects(ctx context.Context) ([]Project, error) {
	all, err := x.sessions(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]*Project{}
	for _, s := range all {
		p := by[s.Project]
		if p == nil {
			p = &Project{Path: s.Project}
			by[s.Project] = p
		}
		p.Sessions++
		if s.LastActivity.After(p.LastActivity) {
			p.LastActivity = s.LastActivity
		}
	}
	out := make([]Project, 0, len(by))
	for _, p := range by {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Project) int {
		if c := b.LastActivity.Compare(a.LastActivity); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out, nil
}

// Lookup returns the session id names in the history.
func (x *Index) Lookup(ctx context.Context, id string) (Session, bool, error) {
	all, err := x.sessions(ctx)
	if err != nil {
		return Session{}, false, err
	}
	for _, s := range all {
		if s.ID == id {
			// A look-alike made since the list was built counts too:
			// resuming is decided from the disk as it is.
			s.Resumable = s.Resumable && !session.ClaudeProjectDirShared(s.Project)
			return s, true, nil
		}
	}
	return Session{}, false, nil
}

// sessions is the whole history, the most recently active first: the
// files' conversations, each linked to the tether session that runs or ran
// it, and the tether sessions that have no file.
func (x *Index) sessions(ctx context.Context) ([]Session, error) {
	files, byAgentID := x.filesSorted()
	if x.cfg.Store == nil {
		return files, nil
	}
	recs, err := x.cfg.Store.AllSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(files)
	sandboxDirs := sandboxWorkDirs(recs)
	for i := range out {
		if out[i].Resumable && sharedBySandbox(sandboxDirs, out[i].Project) {
			out[i].Resumable = false
		}
	}
	var own []Session
	for _, rec := range recs {
		i, ok := byAgentID[rec.AgentSessionID]
		if !ok {
			i, ok = byAgentID[rec.ID]
		}
		if ok {
			// The conversation's file is the session's: a live session
			// links it, else the latest.
			s := &out[i]
			if s.SessionID == "" || rec.Live() || !s.Live {
				s.SessionID, s.Live = rec.ID, rec.Live()
			}
			if s.Project == "" {
				s.Project = rec.WorkingDirectory
				s.search = strings.ToLower(s.Project) + "\n" + s.search
			}
			continue
		}
		d, err := x.digest(ctx, rec)
		if err != nil {
			return nil, err
		}
		title := d.title
		if title == "" {
			title = rec.Title
		}
		own = append(own, Session{ID: SourceTether + ":" + rec.ID, Source: SourceTether, Agent: rec.Agent, Project: rec.WorkingDirectory,
			Title: title, StartedAt: rec.CreatedAt, LastActivity: rec.UpdatedAt, Messages: d.messages, Live: rec.Live(), SessionID: rec.ID,
			AgentSessionID: rec.AgentSessionID, search: strings.ToLower(rec.WorkingDirectory + "\n" + title)})
	}
	if len(own) == 0 {
		return out, nil
	}
	slices.SortFunc(own, newestFirst)
	merged := make([]Session, 0, len(out)+len(own))
	for len(out) > 0 && len(own) > 0 {
		if newestFirst(out[0], own[0]) <= 0 {
			merged, out = append(merged, out[0]), out[1:]
		} else {
			merged, own = append(merged, own[0]), own[1:]
		}
	}
	return append(append(merged, out...), own...), nil
}

// filesSorted returns the files' sessions, the most recently active first,
// and where each agent conversation id is in them, built again only when a
// file changed. Both are shared: not to be changed.
func (x *Index) filesSorted() ([]Session, map[string]int) {
	x.mu.RLock()
	if x.sorted != nil && x.built == x.changes {
		defer x.mu.RUnlock()
		return x.sorted, x.byAgentID
	}
	x.mu.RUnlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.sorted != nil && x.built == x.changes {
		return x.sorted, x.byAgentID
	}
	// Files that claim one conversation (an agent can name a file after
	// another's id) give one entry: the preferred file's.
	chosen := make(map[string]*file, len(x.files))
	for _, f := range x.files {
		k := f.source + ":" + f.id
		chosen[k] = preferred(chosen[k], f)
	}
	out := make([]Session, 0, len(chosen))
	shared := map[string]bool{} // by working directory
	var lookAlikes session.LookAlikes
	for _, f := range chosen {
		agent := "claude-code"
		if f.source == SourceCodex {
			agent = "codex"
		}
		resumable := f.source == SourceClaude && claudeSessionID.MatchString(f.id) && f.ownDir()
		if resumable {
			lookAlike, ok := shared[f.sum.cwd]
			if !ok {
				lookAlike = lookAlikes.Shared(f.sum.cwd)
				shared[f.sum.cwd] = lookAlike
			}
			resumable = !lookAlike
		}
		out = append(out, Session{ID: f.source + ":" + f.id, Source: f.source, Agent: agent, Project: f.sum.cwd, Title: f.sum.title,
			StartedAt: f.sum.started, LastActivity: f.sum.last, Messages: f.sum.messages, AgentSessionID: f.id,
			Resumable: resumable, search: strings.ToLower(f.sum.cwd) + "\n" + f.sum.prompts})
	}
	slices.SortFunc(out, newestFirst)
	by := make(map[string]int, len(out))
	for i, s := range out {
		by[s.AgentSessionID] = i
	}
	x.sorted, x.byAgentID, x.built = out, by, x.changes
	return out, by
}

// tetherDigest is what the log gives of a tether session, as of its
// updated time.
type tetherDigest struct {
	updated  time.Time
	title    string
	messages int
}

// digest reads a tether session's first prompt and its number of prompts
// and answers from the log, once for each of its updates.
func (x *Index) digest(ctx context.Context, rec store.Session) (tetherDigest, error) {
	x.mu.RLock()
	d, ok := x.tether[rec.ID]
	x.mu.RUnlock()
	if ok && d.updated.Equal(rec.UpdatedAt) {
		return d, nil
	}
	sd, err := x.cfg.Store.SessionDigest(ctx, rec.ID, wire.TypeUserMessage, wire.TypeStreamStart)
	if err != nil {
		return d, err
	}
	d = tetherDigest{updated: rec.UpdatedAt, messages: sd.Count}
	var env wire.Envelope
	var m wire.UserMessage
	if sd.First != nil && json.Unmarshal(sd.First, &env) == nil && json.Unmarshal(env.Payload, &m) == nil {
		d.title = cut(strings.Join(strings.Fields(m.Content), " "), maxTitle)
	}
	x.mu.Lock()
	x.tether[rec.ID] = d
	x.mu.Unlock()
	return d, nil
}

// Conversation is a page of one session's conversation, as the events a
// live session produces.
type Conversation struct {
	// Frames are whole event frames, oldest first. A tether session's
	// are as logged (with their seq); a file's have none.
	Frames []json.RawMessage
	// Before asks for the page before this one; meaningful with More.
	Before int64
	More   bool
}

// Read returns the newest events of a session's conversation before
// before (0: the newest), about limit of them.
func (x *Index) Read(ctx context.Context, id string, before int64, limit int) (Conversation, error) {
	source, own, _ := strings.Cut(id, ":")
	if source == SourceTether {
		if x.cfg.Store == nil {
			return Conversation{}, errUnknown(id)
		}
		if _, err := x.cfg.Store.Session(ctx, own); errors.Is(err, store.ErrNotFound) {
			return Conversation{}, errUnknown(id)
		} else if err != nil {
			return Conversation{}, err
		}
		events, more, err := x.cfg.Store.SessionEvents(ctx, own, before, limit, wire.MaxHistoryBytes)
		if err != nil {
			return Conversation{}, err
		}
		c := Conversation{More: more}
		for _, e := range events {
			c.Frames = append(c.Frames, e.Frame)
		}
		if len(events) > 0 {
			c.Before = events[0].Seq
		}
		return c, nil
	}
	x.mu.RLock()
	var f *file
	for _, candidate := range x.files {
		if candidate.source == source && candidate.id == own {
			f = preferred(f, candidate)
		}
	}
	x.mu.RUnlock()
	if f == nil {
		return Conversation{}, errUnknown(id)
	}
	fh, info, err := session.OpenTranscript(f.root, f.rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, session.ErrNotRegular) {
		return Conversation{}, errUnknown(id)
	}
	if err != nil {
		return Conversation{}, err
	}
	defer fh.Close()
	var c Conversation
	switch source {
	case SourceCodex:
		c.Frames, c.Before, c.More, err = codexPage(id, fh, info.Size(), before, limit, info.ModTime())
	default:
		c.Frames, c.Before, c.More, err = claudePage(id, fh, info.Size(), before, limit, info.ModTime())
	}
	return c, err
}

func errUnknown(id string) error {
	return wire.Errorf(wire.CodeSessionNotFound, "no session %q in the history", id)
}

// Len is the number of agent files indexed.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.files)
}
