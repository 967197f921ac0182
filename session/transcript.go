package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/bridge/wire"
)

// A Claude Code session seen through hooks shows the whole conversation:
// the hook payloads name the session's transcript (transcript_path, a JSON
// Lines file Claude Code appends to), and the Manager follows it, relaying
// the user's prompts and the assistant's text as the events a sandboxed
// session produces. Tool calls and results come from the hooks themselves
// (PreToolUse, PostToolUse), so the transcript's are skipped: each appears
// once. The file is read from where the last read ended (kept in the
// store, so a restart goes on from there), complete lines only, at each
// hook event of the session: its text is in the file before the hook that
// follows it fires, so it reaches the phone in order.
//
// The path comes from a hook request: only a .jsonl file under the user's
// ~/.claude/projects is followed, opened through an os.Root there so that
// no symbolic link leads out of it.

// Bounds of a transcript read.
const (
	// maxTranscriptLine is the longest line relayed; a longer one (a huge
	// tool result) is skipped.
	maxTranscriptLine = 1 << 20
	// maxTranscriptRead bounds one read; the rest waits for the next hook
	// event.
	maxTranscriptRead = 8 << 20
)

// transcripts holds what the Manager knows of the files it follows.
type transcripts struct {
	mu sync.Mutex // one read at a time, so that events stay in file order
	// relayed holds, per session, the uuids of the lines relayed since the
	// daemon started: a file read again from its start (replaced, or
	// truncated) relays nothing twice.
	relayed map[string]map[string]bool
	// watching holds the watchers of live sessions' transcripts.
	watching map[string]context.CancelFunc
	// lastText is the last assistant text relayed, per session.
	lastText map[string]string
}

// transcriptLine is what the follower reads of a transcript line.
type transcriptLine struct {
	Type    string `json:"type"`
	UUID    string `json:"uuid"`
	IsMeta  bool   `json:"isMeta"`
	Message *struct {
		ID      string          `json:"id"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// transcriptEntries turns one transcript line into the events it means:
// a user's prompt (a string, or text blocks that are not tool results) as
// user_message, an assistant's text block as a stream of one chunk.
// Anything else, and anything malformed, means nothing.
func transcriptEntries(sessionID string, line []byte) []Entry {
	var l transcriptLine
	if json.Unmarshal(line, &l) != nil || l.Message == nil || l.IsMeta || l.UUID == "" {
		return nil
	}
	var text string
	if json.Unmarshal(l.Message.Content, &text) != nil {
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(l.Message.Content, &blocks) != nil {
			return nil
		}
		var parts []string
		for _, b := range blocks {
			if b.Type != "text" {
				return nil // a tool call or its result: the hooks relay those
			}
			parts = append(parts, b.Text)
		}
		text = strings.Join(parts, "\n")
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	switch l.Type {
	case "user":
		return []Entry{{SessionID: sessionID, Type: wire.TypeUserMessage, Payload: wire.UserMessage{
			SessionID: sessionID, MessageID: l.UUID, Content: text, DeviceName: "terminal"}}}
	case "assistant":
		id := l.UUID
		return []Entry{
			{SessionID: sessionID, Type: wire.TypeStreamStart, Payload: wire.StreamStart{SessionID: sessionID, MessageID: id}},
			{SessionID: sessionID, Type: wire.TypeStreamChunk, Payload: wire.StreamChunk{SessionID: sessionID, MessageID: id, Content: text}},
			{SessionID: sessionID, Type: wire.TypeStreamEnd, Payload: wire.StreamEnd{SessionID: sessionID, MessageID: id, FinishReason: "stop"}},
		}
	}
	return nil
}

// followTranscript relays what was added to an observed session's
// transcript since the last read. It reports whether a line read names
// want (a tool_use id), when want is not empty.
func (m *Manager) followTranscript(ctx context.Context, sessionID, path, want string) (found bool) {
	if path == "" || m.cfg.Home == "" {
		return false
	}
	rel, err := m.transcriptRel(path)
	if err != nil {
		m.cfg.Logger.Warn("not following a transcript", "session", sessionID, "path", path, "err", err)
		return false
	}
	t := &m.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	root, err := os.OpenRoot(filepath.Join(m.cfg.Home, ".claude", "projects"))
	if err != nil {
		m.cfg.Logger.Warn("not following a transcript", "session", sessionID, "err", err)
		return false
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		m.cfg.Logger.Warn("not following a transcript", "session", sessionID, "path", path, "err", err)
		return false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		m.cfg.Logger.Warn("not following a transcript: not a regular file", "session", sessionID, "path", path)
		return false
	}
	from, reread := int64(0), false
	if known, at, ok, err := m.cfg.Store.TranscriptOffset(ctx, sessionID); err == nil && ok {
		// A file shorter than what was read was replaced or truncated
		// (or another file is named): it is read again from its start,
		// relaying only what is new.
		if known == rel && at <= info.Size() {
			from = at
		} else {
			reread = true
		}
	}
	if from == info.Size() {
		return false
	}
	buf, err := io.ReadAll(io.NewSectionReader(f, from, min(info.Size()-from, maxTranscriptRead)))
	if err != nil {
		m.cfg.Logger.Warn("reading a transcript", "session", sessionID, "err", err)
		return false
	}
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		if len(buf) < maxTranscriptLine {
			return false // a line still being written
		}
		end = len(buf) - 1 // a line past the bound: skipped whole
	}
	if t.relayed == nil {
		t.relayed = map[string]map[string]bool{}
	}
	seen := t.relayed[sessionID]
	if seen == nil {
		seen = map[string]bool{}
		t.relayed[sessionID] = seen
		if reread {
			// A daemon started since: what was relayed is in the log.
			m.relayedFromLog(ctx, sessionID, seen)
		}
	}
	skipped := 0
	for line := range bytes.SplitSeq(buf[:end], []byte{'\n'}) {
		if len(line) > maxTranscriptLine {
			skipped++
			continue
		}
		if want != "" && bytes.Contains(line, []byte(want)) {
			found = true
		}
		for _, e := range transcriptEntries(sessionID, line) {
			id := lineUUID(e)
			if e.Type == wire.TypeStreamStart || e.Type == wire.TypeUserMessage {
				if seen[id] {
					break
				}
				seen[id] = true
			}
			if c, ok := e.Payload.(wire.StreamChunk); ok {
				if t.lastText == nil {
					t.lastText = map[string]string{}
				}
				t.lastText[sessionID] = c.Content
			}
			m.append(e)
		}
	}
	if skipped > 0 {
		m.cfg.Logger.Warn("transcript lines over the bound skipped", "session", sessionID, "lines", skipped, "bound", maxTranscriptLine)
	}
	if err := m.cfg.Store.SetTranscriptOffset(ctx, sessionID, rel, from+int64(end)+1); err != nil {
		m.cfg.Logger.Warn("recording a transcript's offset", "session", sessionID, "err", err)
	}
	return found
}

// How the follower keeps up with a file Claude Code writes on its own
// schedule: a hook may fire before the lines that precede it are written.
const (
	// hookWait is how long a hook event waits for the transcript lines
	// that precede it, so that the text before a tool call (or the turn's
	// last answer) is shown before the event.
	hookWait = 500 * time.Millisecond
	// transcriptPoll is how often the transcript of a live observed
	// session is read between hook events (text that no hook follows: the
	// last answer of a turn, written after Stop fired).
	transcriptPoll = 250 * time.Millisecond
	// transcriptQuiet ends the polling of a transcript that has not grown
	// for this long; the next hook event starts it again.
	transcriptQuiet = 10 * time.Minute
)

// followUntil reads the transcript until a line holding want is in (or
// hookWait passed), then returns: the caller appends the hook's event
// after the lines that led to it (PreToolUse: the tool_use line; Stop: the
// last answer's).
func (m *Manager) followUntil(ctx context.Context, sessionID, path, want string) {
	deadline := time.Now().Add(hookWait)
	for !m.followTranscript(ctx, sessionID, path, want) && want != "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// followStop reads the transcript until it holds the turn's last answer,
// unless it was relayed already.
func (m *Manager) followStop(ctx context.Context, sessionID, path, lastAnswer string) {
	t := &m.transcripts
	t.mu.Lock()
	done := lastAnswer == "" || t.lastText[sessionID] == lastAnswer
	t.mu.Unlock()
	if done {
		m.followTranscript(ctx, sessionID, path, "")
		return
	}
	quoted, _ := json.Marshal(lastAnswer)
	m.followUntil(ctx, sessionID, path, string(quoted[1:len(quoted)-1]))
}

// watchTranscript polls an observed session's transcript until the
// session ends, the daemon stops, or the file stays quiet for
// transcriptQuiet. One watcher a session.
func (m *Manager) watchTranscript(sessionID, path string) {
	if path == "" || m.cfg.Home == "" {
		return
	}
	t := &m.transcripts
	t.mu.Lock()
	if t.watching == nil {
		t.watching = map[string]context.CancelFunc{}
	}
	if _, ok := t.watching[sessionID]; ok {
		t.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.watching[sessionID] = cancel
	t.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.unwatchTranscript(sessionID)
		tick := time.NewTicker(transcriptPoll)
		defer tick.Stop()
		var last int64
		quietSince := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			m.followTranscript(ctx, sessionID, path, "")
			_, at, _, _ := m.cfg.Store.TranscriptOffset(ctx, sessionID)
			if at != last {
				last, quietSince = at, time.Now()
			} else if time.Since(quietSince) > transcriptQuiet {
				return
			}
		}
	}()
}

// unwatchTranscript stops a session's watcher, if it has one.
func (m *Manager) unwatchTranscript(sessionID string) {
	t := &m.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	if cancel, ok := t.watching[sessionID]; ok {
		cancel()
		delete(t.watching, sessionID)
	}
}

// forgetTranscript lets go of what is kept in memory of an ended
// session's transcript; a session resumed later reads the log for it.
func (m *Manager) forgetTranscript(sessionID string) {
	m.unwatchTranscript(sessionID)
	t := &m.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.relayed, sessionID)
	delete(t.lastText, sessionID)
}

// stopWatching stops every transcript watcher (the daemon stops).
func (t *transcripts) stopWatching() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, cancel := range t.watching {
		cancel()
		delete(t.watching, id)
	}
}

// relayedFromLog notes the transcript lines already relayed for a session,
// as the log holds them.
func (m *Manager) relayedFromLog(ctx context.Context, sessionID string, seen map[string]bool) {
	before := int64(0)
	for {
		events, more, err := m.cfg.Store.SessionEvents(ctx, sessionID, before, wire.MaxHistoryPage, wire.MaxHistoryBytes)
		if err != nil {
			m.cfg.Logger.Warn("reading what a transcript relayed", "session", sessionID, "err", err)
			return
		}
		for _, e := range events {
			if e.Type != wire.TypeUserMessage && e.Type != wire.TypeStreamStart {
				continue
			}
			var env wire.Envelope
			var p struct {
				MessageID string `json:"message_id"`
			}
			if json.Unmarshal(e.Frame, &env) == nil && json.Unmarshal(env.Payload, &p) == nil && p.MessageID != "" {
				seen[p.MessageID] = true
			}
		}
		if !more || len(events) == 0 {
			return
		}
		before = events[0].Seq
	}
}

// lineUUID is the transcript line an entry came from (its message id).
func lineUUID(e Entry) string {
	switch p := e.Payload.(type) {
	case wire.UserMessage:
		return p.MessageID
	case wire.StreamStart:
		return p.MessageID
	}
	return ""
}

// errNotATranscript refuses a path that is not a transcript of this user's
// Claude Code.
var errNotATranscript = errors.New("not a .jsonl file under ~/.claude/projects")

// transcriptRel checks path and returns it relative to ~/.claude/projects,
// symbolic links resolved.
func (m *Manager) transcriptRel(path string) (string, error) {
	projects, err := filepath.EvalSymlinks(filepath.Join(m.cfg.Home, ".claude", "projects"))
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(projects, real)
	if err != nil || !filepath.IsAbs(path) || rel == "." || strings.HasPrefix(rel, "..") || filepath.Ext(rel) != ".jsonl" {
		return "", errNotATranscript
	}
	return rel, nil
}
