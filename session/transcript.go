package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// A Claude Code session seen through hooks shows the whole conversation:
// the hook payloads name the session's transcript (transcript_path, a JSON
// Lines file Claude Code appends to; docs/claude-transcript.md), and the
// Manager follows it, relaying the user's prompts, the assistant's text and
// its tool calls and results as the events a sandboxed session produces.
//
// The hooks relay tool calls and results too (PreToolUse, PostToolUse):
// each is relayed once, by whichever source the daemon reads first, keyed
// by its tool_use_id. Both give the same event, and each fills what the
// other misses: the transcript has the results of tools that failed or
// were denied (PostToolUse fires only on success) and calls no hook saw;
// the hooks have the calls whose line Claude Code has not written yet.
//
// The file is read from where the last read ended (kept in the store, so a
// restart goes on from there), complete lines only, at each hook event of
// the session and on a ticker while it lives. A file that shrank, or was
// replaced by another one (another inode, or no line end where the last
// read stopped), is read again from its start; what was relayed (by line
// uuid and tool_use_id, kept in memory and read back from the log when the
// session is first seen after a start) is not relayed twice.
//
// The path comes from a hook request: only a .jsonl file under the user's
// ~/.claude/projects (or $CLAUDE_CONFIG_DIR/projects, Config.ClaudeDirs)
// is followed, opened through an os.Root there so that no symbolic link
// leads out of it.

// Bounds of a transcript read.
const (
	// maxTranscriptLine is the longest line relayed; a longer one (a huge
	// tool result) is skipped.
	maxTranscriptLine = 1 << 20
	// maxTranscriptRead bounds one read; the rest waits for the next.
	maxTranscriptRead = 8 << 20
)

// transcripts holds what the Manager knows of the files it follows.
type transcripts struct {
	mu sync.Mutex // one read at a time, so that events stay in file order
	// sessions holds, per observed session, what was read and relayed.
	sessions map[string]*followed
	// turns holds, per observed session, the usage of the API messages
	// read since its last turn ended: its next turn_complete's. Kept
	// apart from sessions, which a quiet session's watcher lets go of in
	// the middle of a long tool call.
	turns map[string]store.Usage
	// watching holds the watchers of live sessions' transcripts.
	watching map[string]context.CancelFunc
}

// followed is what is known of one session's transcript.
type followed struct {
	mark store.TranscriptMark // where the next read starts
	// skipTo, past mark.Offset, is how far a line longer than
	// maxTranscriptRead has been read (and skipped) in the marked file:
	// the next read goes on from there, not from the line's start. Kept
	// in memory only: after a restart the line is read once more.
	skipTo int64
	loaded bool // mark and relayed were read from the store
	// relayed holds the keys (msgKey, callKey, resultKey) of what was
	// relayed, from the transcript or the hooks: those the log held when
	// the session was first seen since the daemon started, and those
	// relayed since.
	relayed map[string]bool
	// tools names the tools of calls whose result is not relayed yet: a
	// transcript's tool_result line does not name its tool.
	tools map[string]string
	// lastText is the last assistant text relayed.
	lastText string
	// model is the model of the last agent_info relayed.
	model string
	// counting is the API message whose usage was counted last, and what
	// was counted of it: a later line of the same message counts only
	// what it reports beyond that.
	counting messageUsage
	// refused are the paths not followed, so that each is logged once (a
	// PreToolUse that waits for its line reads again while later hooks
	// name other paths); at most maxRefused are kept.
	refused map[string]bool
}

// session returns what is known of a session's transcript, without
// loading it; t.mu is held.
func (t *transcripts) session(id string) *followed {
	if t.sessions == nil {
		t.sessions = map[string]*followed{}
	}
	f := t.sessions[id]
	if f == nil {
		f = &followed{relayed: map[string]bool{}, tools: map[string]string{}}
		t.sessions[id] = f
	}
	return f
}

// followedLocked returns what is known of a session's transcript, loaded
// from the store and the log the first time the session is seen since the
// daemon started (or since it was let go); t.mu is held.
func (m *Manager) followedLocked(ctx context.Context, sessionID string) (*followed, error) {
	f := m.transcripts.session(sessionID)
	if f.loaded {
		return f, nil
	}
	mark, _, err := m.cfg.Store.TranscriptMark(ctx, sessionID)
	if err != nil {
		return f, err
	}
	if err := m.relayedFromLog(ctx, sessionID, f.relayed); err != nil {
		return f, err
	}
	f.mark, f.loaded = mark, true
	return f, nil
}

// maxRefused bounds the refused paths a session remembers.
const maxRefused = 16

// The keys by which what a transcript line or a hook means is relayed
// once: a line's uuid for text, the tool_use_id for a call or a result.
// Without an id there is no key ("").
func msgKey(uuid string) string   { return key("msg:", uuid) }
func thinkKey(uuid string) string { return key("think:", uuid) }
func callKey(id string) string    { return key("call:", id) }
func resultKey(id string) string  { return key("result:", id) }

// usageKey is the key of an API message's usage (by its message id), so
// that the several lines of one message count it once.
func usageKey(id string) string { return key("usage:", id) }

func key(kind, id string) string {
	if id == "" {
		return ""
	}
	return kind + id
}

// logKeys are the keys of the logged events that a transcript relays, by
// event type.
var logKeys = map[string]func(string) string{
	wire.TypeUserMessage: msgKey, wire.TypeStreamStart: msgKey, wire.TypeThinkingChunk: thinkKey,
	wire.TypeToolCall: callKey, wire.TypeToolResult: resultKey,
}

// relay is one thing a transcript line means: the events that show it, and
// the key by which it is relayed once.
type relay struct {
	key     string
	entries []Entry
}

// transcriptLine is what the follower reads of a transcript line.
type transcriptLine struct {
	Type      string `json:"type"`
	UUID      string `json:"uuid"`
	Timestamp string `json:"timestamp"`
	// Lines the terminal does not show as the conversation: the expanded
	// text of a slash command (isMeta), a subagent's own conversation
	// (isSidechain), the summary that replaces a compacted conversation.
	IsMeta                    bool `json:"isMeta"`
	IsSidechain               bool `json:"isSidechain"`
	IsCompactSummary          bool `json:"isCompactSummary"`
	IsVisibleInTranscriptOnly bool `json:"isVisibleInTranscriptOnly"`
	Message                   *struct {
		Content json.RawMessage `json:"content"`
		Model   string          `json:"model"`
		// ID and Usage are read apart, so that a malformed one costs
		// only the usage, not the line.
		ID    json.RawMessage `json:"id"`
		Usage json.RawMessage `json:"usage"`
	} `json:"message"`
}

// messageUsage is what an assistant line reports its API message used.
type messageUsage struct {
	id  string
	use store.Usage
}

// maxMessageTokens bounds each count of a message's usage: a line that
// reports more (or less than zero) is not counted. A model's context
// window is a few hundred thousand tokens, a million at most.
const maxMessageTokens = 1 << 30

// lineUsage reads an assistant line's usage: its message id and token
// counts. A line without a message id, or whose counts are not numbers
// between 0 and maxMessageTokens, reports none (ok false).
func lineUsage(rawID, rawUsage json.RawMessage) (u messageUsage, ok bool) {
	var c struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	}
	if json.Unmarshal(rawID, &u.id) != nil || u.id == "" || json.Unmarshal(rawUsage, &c) != nil {
		return messageUsage{}, false
	}
	for _, n := range []int64{c.InputTokens, c.OutputTokens, c.CacheReadInputTokens, c.CacheCreationInputTokens} {
		if n < 0 || n > maxMessageTokens {
			return messageUsage{}, false
		}
	}
	u.use = store.Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
		CacheReadTokens: c.CacheReadInputTokens, CacheCreationTokens: c.CacheCreationInputTokens}
	return u, u.use != store.Usage{}
}

// transcriptBlock is a content block of a transcript message.
type transcriptBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`    // tool_use
	Name      string          `json:"name"`  // tool_use
	Input     json.RawMessage `json:"input"` // tool_use
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // tool_result
	IsError   bool            `json:"is_error"`
	Source    *struct {       // image
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// decodeTranscriptLine turns one transcript line into what it means: a
// user's prompt (text, or text and image blocks) as user_message, with the
// images that pass wire.ValidateAttachments as its attachments, an assistant's
// text block as a stream of one chunk, a tool_use block as tool_call, a
// tool_result block as tool_result (its tool left for the caller to name).
// An assistant line also reports its API message's usage (use, nil when
// it reports none). Lines of other types, and lines the terminal does not
// show as the conversation, mean nothing; ok is false for a line that is
// not a JSON object (the caller counts those). now dates a prompt whose
// line has no time.
func decodeTranscriptLine(sessionID string, line []byte, now time.Time) (out []relay, use *messageUsage, ok bool) {
	var l transcriptLine
	if json.Unmarshal(line, &l) != nil {
		return nil, nil, false
	}
	if l.Message == nil || l.UUID == "" || l.IsMeta || l.IsSidechain || l.IsCompactSummary || l.IsVisibleInTranscriptOnly {
		return nil, nil, true
	}
	// What the message used, unless Claude Code made it up itself
	// (model "<synthetic>", such as an API error's).
	if u, ok := lineUsage(l.Message.ID, l.Message.Usage); ok && l.Type == "assistant" && l.Message.Model != "<synthetic>" {
		use = &u
	}
	var blocks []transcriptBlock
	var text string
	if json.Unmarshal(l.Message.Content, &text) == nil {
		blocks = []transcriptBlock{{Type: "text", Text: text}}
	} else if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return nil, use, true
	}
	var texts []string
	var images []wire.Attachment
	for _, b := range blocks {
		switch {
		case b.Type == "text":
			texts = append(texts, b.Text)
		case b.Type == "image" && l.Type == "user" && b.Source != nil && b.Source.Type == "base64":
			a := wire.Attachment{Type: "image", MediaType: b.Source.MediaType, Data: b.Source.Data}
			if len(images) < wire.MaxAttachments && wire.ValidateAttachments([]wire.Attachment{a}) == nil {
				images = append(images, a)
			}
		case b.Type == "thinking" && l.Type == "assistant" && b.Thinking != "":
			out = append(out, relay{thinkKey(l.UUID), []Entry{{SessionID: sessionID, Type: wire.TypeThinkingChunk, Payload: wire.ThinkingChunk{
				SessionID: sessionID, MessageID: l.UUID, Content: b.Thinking}}}})
		case b.Type == "tool_use" && l.Type == "assistant" && b.ID != "":
			params := nonEmpty(b.Input)
			out = append(out, relay{callKey(b.ID), []Entry{{SessionID: sessionID, Type: wire.TypeToolCall, ID: "call-" + b.ID, Payload: wire.ToolCall{
				SessionID: sessionID, ToolCallID: b.ID, Tool: b.Name, Params: params, Description: describe(b.Name, params)}}}})
		case b.Type == "tool_result" && l.Type == "user" && b.ToolUseID != "":
			body := wire.ToolResultBody{Success: !b.IsError, Content: blockText(b.Content)}
			if b.IsError {
				body.Error = body.Content
			}
			out = append(out, relay{resultKey(b.ToolUseID), []Entry{{SessionID: sessionID, Type: wire.TypeToolResult, ID: "result-" + b.ToolUseID, Payload: wire.ToolResult{
				SessionID: sessionID, ToolCallID: b.ToolUseID, Result: body}}}})
		}
	}
	// The model that wrote an assistant line (Claude Code writes
	// "<synthetic>" for the messages it makes up itself, such as an API
	// error's).
	if model := l.Message.Model; l.Type == "assistant" && model != "" && model != "<synthetic>" {
		out = append([]relay{{"", []Entry{{SessionID: sessionID, Type: wire.TypeAgentInfo, Payload: wire.AgentInfo{SessionID: sessionID, Model: model}}}}}, out...)
	}
	text = strings.Join(texts, "\n")
	switch {
	case l.Type == "user":
		text, shown := terminalInput(text)
		if !shown || strings.TrimSpace(text) == "" && len(images) == 0 {
			return out, use, true
		}
		sent := now
		if t, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
			sent = t
		}
		return append([]relay{{msgKey(l.UUID), []Entry{{SessionID: sessionID, Type: wire.TypeUserMessage, Payload: wire.UserMessage{
			SessionID: sessionID, MessageID: l.UUID, Content: text, DeviceName: "terminal", SentAt: wire.Timestamp(sent), Attachments: images}}}}}, out...), use, true
	case l.Type == "assistant" && strings.TrimSpace(text) != "":
		id := l.UUID
		return append([]relay{{msgKey(id), []Entry{
			{SessionID: sessionID, Type: wire.TypeStreamStart, Payload: wire.StreamStart{SessionID: sessionID, MessageID: id}},
			{SessionID: sessionID, Type: wire.TypeStreamChunk, Payload: wire.StreamChunk{SessionID: sessionID, MessageID: id, Content: text}},
			{SessionID: sessionID, Type: wire.TypeStreamEnd, Payload: wire.StreamEnd{SessionID: sessionID, MessageID: id, FinishReason: "stop"}},
		}}}, out...), use, true
	}
	return out, use, true
}

// TranscriptEvents is what one line of a Claude Code transcript means, as
// the events a live session produces (decodeTranscriptLine, in file order,
// without the keys by which a follower relays each once); sessionID goes
// into every payload. A tool_result does not name its tool: the caller
// takes it from the tool_call before it. ok is false for a line that is not
// a JSON object.
func TranscriptEvents(sessionID string, line []byte, now time.Time) (events []Entry, ok bool) {
	relays, _, ok := decodeTranscriptLine(sessionID, line, now)
	for _, r := range relays {
		events = append(events, r.entries...)
	}
	return events, ok
}

// The tags Claude Code writes into a user line for what the user typed
// other than a prompt: a slash command, a shell command (typed after "!")
// and that command's output.
var (
	commandName = regexp.MustCompile(`<command-name>([^<]*)</command-name>`)
	commandArgs = regexp.MustCompile(`<command-args>([^<]*)</command-args>`)
	bashInput   = regexp.MustCompile(`^<bash-input>([\s\S]*)</bash-input>$`)
)

// terminalInput is what the user typed, as the terminal shows it, for a
// user line's text: a prompt as it is, a slash command as "/name args", a
// shell command as "!command". The output of a shell command or of a local
// command is not the user's (shown is false).
func terminalInput(text string) (typed string, shown bool) {
	t := strings.TrimSpace(text)
	switch {
	case strings.HasPrefix(t, "<bash-stdout>"), strings.HasPrefix(t, "<bash-stderr>"),
		strings.HasPrefix(t, "<local-command-stdout>"), strings.HasPrefix(t, "<local-command-stderr>"):
		return "", false
	case bashInput.MatchString(t):
		return "!" + bashInput.FindStringSubmatch(t)[1], true
	case commandName.MatchString(t) && (strings.HasPrefix(t, "<command-name>") || strings.HasPrefix(t, "<command-message>")):
		typed = commandName.FindStringSubmatch(t)[1]
		if a := commandArgs.FindStringSubmatch(t); a != nil && a[1] != "" {
			typed += " " + a[1]
		}
		return typed, true
	}
	return text, true
}

// followTranscript relays what was added to an observed session's
// transcript since the last read. It reports whether the file can be
// followed at all: false for a path that is not a transcript; true for one
// under the projects directories that does not exist yet.
func (m *Manager) followTranscript(ctx context.Context, sessionID, path string) bool {
	if path == "" {
		return false
	}
	projects, rel, err := m.transcriptRel(path)
	t := &m.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.session(sessionID)
	var file *os.File
	if err == nil {
		file, err = openTranscript(projects, rel)
	}
	if err != nil {
		// A transcript not written yet is followed all the same: Claude
		// Code may create it only after the hook that names it (a first
		// PreToolUse waits for its lines). A refused one is worth a word.
		if errors.Is(err, fs.ErrNotExist) && m.inClaudeDirs(path) {
			return true
		}
		if !errors.Is(err, fs.ErrNotExist) && !f.refused[path] {
			m.cfg.Logger.Warn("not following a transcript", "session", sessionID, "path", path, "err", err)
			if f.refused == nil || len(f.refused) >= maxRefused {
				f.refused = map[string]bool{}
			}
			f.refused[path] = true
		}
		return false
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		m.cfg.Logger.Warn("reading a transcript", "session", sessionID, "err", err)
		return false
	}
	if f, err = m.followedLocked(ctx, sessionID); err != nil {
		m.cfg.Logger.Warn("reading how far a transcript was relayed", "session", sessionID, "err", err)
		return false
	}
	abs := filepath.Join(projects, rel)
	id := FileID(info)
	// Another file, or one that no longer ends a line where the last read
	// stopped, is read again from its start, relaying only what is new.
	from := int64(0)
	marked := f.mark.Path == abs && (f.mark.FileID == "" || f.mark.FileID == id) && f.mark.Offset <= info.Size() && endsLine(file, f.mark.Offset)
	if marked {
		from = f.mark.Offset
	}
	skipping := marked && f.skipTo > from && f.skipTo <= info.Size()
	if skipping {
		from = f.skipTo
	}
	f.skipTo = 0
	if from == info.Size() {
		f.skipTo = from
		return true
	}
	buf, err := io.ReadAll(io.NewSectionReader(file, from, min(info.Size()-from, maxTranscriptRead)))
	if err != nil {
		m.cfg.Logger.Warn("reading a transcript", "session", sessionID, "err", err)
		return true
	}
	overlong, malformed := 0, 0
	if skipping {
		// The rest of a line too long to relay, up to its end.
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			f.skipTo = from + int64(len(buf))
			return true
		}
		from, buf = from+int64(i)+1, buf[i+1:] // logged when its skip began
	}
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		if len(buf) < maxTranscriptLine {
			if skipping {
				m.markTranscriptLocked(ctx, sessionID, f, store.TranscriptMark{Path: abs, FileID: id, Offset: from})
			}
			return true // a line still being written
		}
		// A line past the bound, not ended within this read: skipped, and
		// the next read goes on after what was read of it.
		f.skipTo = from + int64(len(buf))
		if !skipping {
			m.cfg.Logger.Warn("transcript lines skipped", "session", sessionID, "path", path, "over_bound", 1, "bound", maxTranscriptLine)
		}
		return true
	}
	for line := range bytes.SplitSeq(buf[:end], []byte{'\n'}) {
		if len(line) > maxTranscriptLine {
			overlong++
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		relays, use, ok := decodeTranscriptLine(sessionID, line, m.cfg.Now())
		if !ok {
			malformed++
		}
		for _, r := range relays {
			m.relayLocked(f, r)
		}
		if use != nil {
			m.countLocked(ctx, sessionID, f, *use)
		}
	}
	if overlong > 0 || malformed > 0 {
		m.cfg.Logger.Warn("transcript lines skipped", "session", sessionID, "path", path,
			"over_bound", overlong, "malformed", malformed, "bound", maxTranscriptLine)
	}
	m.markTranscriptLocked(ctx, sessionID, f, store.TranscriptMark{Path: abs, FileID: id, Offset: from + int64(end) + 1})
	return true
}

// markTranscriptLocked records where the next read of a transcript starts.
func (m *Manager) markTranscriptLocked(ctx context.Context, sessionID string, f *followed, mark store.TranscriptMark) {
	f.mark = mark
	if err := m.cfg.Store.SetTranscriptMark(ctx, sessionID, f.mark); err != nil {
		m.cfg.Logger.Warn("recording a transcript's offset", "session", sessionID, "err", err)
	}
}

// openTranscript opens rel as a transcript (OpenTranscript).
func openTranscript(projects, rel string) (*os.File, error) {
	file, _, err := OpenTranscript(projects, rel)
	if errors.Is(err, ErrNotRegular) {
		return nil, errNotATranscript
	}
	return file, err
}

// ClaudeProjectDir is the name of a working directory's transcripts'
// directory under Claude Code's projects (sandbox.ClaudeProjectDir).
func ClaudeProjectDir(workDir string) string { return sandbox.ClaudeProjectDir(workDir) }

// ClaudeProjectDirShared reports whether another existing directory's
// transcripts' directory is named as workDir's
// (sandbox.ClaudeProjectDirShared).
func ClaudeProjectDirShared(workDir string) bool { return sandbox.ClaudeProjectDirShared(workDir) }

// LookAlikes answers ClaudeProjectDirShared for many working directories
// in one pass (sandbox.LookAlikes).
type LookAlikes = sandbox.LookAlikes

// ErrNotRegular is a transcript's path that names no regular file.
var ErrNotRegular = errors.New("not a regular file")

// OpenTranscript opens rel, a regular file, through an os.Root at dir, so
// that no symbolic link swapped in since the path was checked leads out of
// it, and without blocking: an agent can make a named pipe where a
// transcript would be, which a plain open would wait on for ever.
func OpenTranscript(dir, rel string) (*os.File, os.FileInfo, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	file, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := file.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = ErrNotRegular
	}
	if err != nil {
		file.Close()
		return nil, nil, err
	}
	return file, info, nil
}

// relayLocked appends r's events unless its key was relayed already (r
// without a key is appended), and keeps what later lines need (tool names,
// the last text); t.mu is held.
func (m *Manager) relayLocked(f *followed, r relay) {
	if r.key != "" {
		if f.relayed[r.key] {
			return
		}
		f.relayed[r.key] = true
	}
	for _, e := range r.entries {
		switch p := e.Payload.(type) {
		case wire.ToolCall:
			f.tools[p.ToolCallID] = p.Tool
		case wire.ToolResult:
			if p.Tool == "" {
				p.Tool = f.tools[p.ToolCallID]
				e.Payload = p
			}
			delete(f.tools, p.ToolCallID)
		case wire.StreamChunk:
			f.lastText = p.Content
		case wire.AgentInfo:
			// Said when the model changes, not for every line.
			if p.Model == f.model {
				continue
			}
			f.model = p.Model
		}
		m.append(e)
	}
}

// countLocked adds what an API message used to its session's usage and to
// the running turn's, once a message: the several lines of one message
// report the same usage, and a later line counts only what it reports
// beyond an earlier one's; t.mu is held.
func (m *Manager) countLocked(ctx context.Context, sessionID string, f *followed, u messageUsage) {
	k := usageKey(u.id)
	var before store.Usage
	switch {
	case f.counting.id == u.id:
		before = f.counting.use
	case f.relayed[k]:
		return
	}
	f.relayed[k] = true
	add := store.Usage{InputTokens: max(u.use.InputTokens-before.InputTokens, 0), OutputTokens: max(u.use.OutputTokens-before.OutputTokens, 0),
		CacheReadTokens: max(u.use.CacheReadTokens-before.CacheReadTokens, 0), CacheCreationTokens: max(u.use.CacheCreationTokens-before.CacheCreationTokens, 0)}
	f.counting = messageUsage{u.id, store.Usage{InputTokens: before.InputTokens + add.InputTokens, OutputTokens: before.OutputTokens + add.OutputTokens,
		CacheReadTokens: before.CacheReadTokens + add.CacheReadTokens, CacheCreationTokens: before.CacheCreationTokens + add.CacheCreationTokens}}
	if add == (store.Usage{}) {
		return
	}
	t := &m.transcripts
	if t.turns == nil {
		t.turns = map[string]store.Usage{}
	}
	t.turns[sessionID] = sumUsage(t.turns[sessionID], add)
	if _, err := m.cfg.Store.AddSessionUsage(ctx, sessionID, add); err != nil {
		m.cfg.Logger.Warn("recording a terminal session's usage", "session", sessionID, "err", err)
	}
}

// sumUsage adds two counts.
func sumUsage(a, b store.Usage) store.Usage {
	return store.Usage{Turns: a.Turns + b.Turns, InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens,
		CacheReadTokens: a.CacheReadTokens + b.CacheReadTokens, CacheCreationTokens: a.CacheCreationTokens + b.CacheCreationTokens,
		CostUSD: a.CostUSD + b.CostUSD}
}

// terminalTurn is the turn_complete of an observed session's turn (its
// Stop): answer is its last text; its usage is that of the API messages
// read since the last one, and the session's usage counts one turn more.
func (m *Manager) terminalTurn(ctx context.Context, sessionID, answer string) wire.TurnComplete {
	t := &m.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.turns[sessionID]
	delete(t.turns, sessionID)
	turn, _ := json.Marshal(map[string]int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_read_input_tokens": u.CacheReadTokens, "cache_creation_input_tokens": u.CacheCreationTokens})
	tc := wire.TurnComplete{SessionID: sessionID, Subtype: "success", Result: answer, Usage: turn}
	total, err := m.cfg.Store.AddSessionUsage(ctx, sessionID, store.Usage{Turns: 1})
	if err != nil {
		m.cfg.Logger.Warn("recording a terminal session's turn", "session", sessionID, "err", err)
		return tc
	}
	tc.SessionUsage = usageTotals(total)
	return tc
}

// relayOnce appends a hook's tool call or result unless the transcript
// relayed it first (by key, from its tool_use_id).
func (m *Manager) relayOnce(ctx context.Context, sessionID, key string, e Entry) {
	t := &m.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := m.followedLocked(ctx, sessionID)
	if err != nil {
		m.cfg.Logger.Warn("reading how far a transcript was relayed", "session", sessionID, "err", err)
	}
	m.relayLocked(f, relay{key, []Entry{e}})
}

// endsLine reports whether offset is the start of the file or just after
// a line's end in it.
func endsLine(f *os.File, offset int64) bool {
	if offset == 0 {
		return true
	}
	var b [1]byte
	_, err := f.ReadAt(b[:], offset-1)
	return err == nil && b[0] == '\n'
}

// FileID names a file by its device and inode: a transcript replaced by
// another file under the same name is told apart.
func FileID(info os.FileInfo) string {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// How the follower keeps up with a file Claude Code writes on its own
// schedule: a hook may fire before the lines that precede it are written.
const (
	// hookWait is how long a hook event waits for the transcript lines
	// that precede it, so that the text before a tool call (or the turn's
	// last answer) is shown before the event.
	hookWait = 500 * time.Millisecond
	// hookPoll is how often the transcript is read during that wait.
	hookPoll = 10 * time.Millisecond
	// transcriptPoll is how often the transcript of a live observed
	// session is read between hook events (text that no hook follows: the
	// last answer of a turn, written after Stop fired).
	transcriptPoll = 250 * time.Millisecond
	// transcriptQuiet ends the polling of a transcript that has not grown
	// for this long; the next hook event starts it again.
	transcriptQuiet = 10 * time.Minute
)

// followUntil reads the transcript until done holds of what was relayed
// (or hookWait passed), then returns: the caller appends the hook's event
// after the lines that led to it (PreToolUse: the tool_use line; Stop: the
// last answer's).
func (m *Manager) followUntil(ctx context.Context, sessionID, path string, done func(*followed) bool) {
	t := &m.transcripts
	held := func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return done(t.session(sessionID))
	}
	tick := time.NewTicker(hookPoll)
	defer tick.Stop()
	deadline := time.After(hookWait)
	for ok := m.followTranscript(ctx, sessionID, path); ok && !held(); ok = m.followTranscript(ctx, sessionID, path) {
		select {
		case <-tick.C:
		case <-deadline:
			return
		case <-ctx.Done():
			return
		}
	}
}

// watchTranscript polls an observed session's transcript until the
// session ends, the daemon stops, the file cannot be followed, or it stays
// quiet for transcriptQuiet. One watcher a session.
func (m *Manager) watchTranscript(sessionID, path string) {
	if path == "" {
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
		var last store.TranscriptMark
		quietSince := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !m.followTranscript(ctx, sessionID, path) {
				return // the next hook event tries again
			}
			t.mu.Lock()
			mark := t.session(sessionID).mark
			t.mu.Unlock()
			if mark != last {
				last, quietSince = mark, time.Now()
			} else if time.Since(quietSince) > transcriptQuiet {
				// A session that went quiet is let go (-p sessions end
				// without SessionEnd); its next event loads it again.
				t.mu.Lock()
				delete(t.sessions, sessionID)
				t.mu.Unlock()
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
// session's transcript; a session resumed later reads the store and the
// log for it.
func (m *Manager) forgetTranscript(sessionID string) {
	m.unwatchTranscript(sessionID)
	t := &m.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, sessionID)
	delete(t.turns, sessionID)
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

// relayedFromLog notes the transcript lines, tool calls and tool results
// already relayed for a session, as the log holds them.
func (m *Manager) relayedFromLog(ctx context.Context, sessionID string, seen map[string]bool) error {
	before := int64(0)
	for {
		events, more, err := m.cfg.Store.SessionEvents(ctx, sessionID, before, wire.MaxHistoryPage, wire.MaxHistoryBytes)
		if err != nil {
			return err
		}
		for _, e := range events {
			key := logKeys[e.Type]
			if key == nil {
				continue
			}
			var env wire.Envelope
			var p struct {
				MessageID  string `json:"message_id"`
				ToolCallID string `json:"tool_call_id"`
			}
			if json.Unmarshal(e.Frame, &env) != nil || json.Unmarshal(env.Payload, &p) != nil {
				continue
			}
			id := p.MessageID
			if e.Type == wire.TypeToolCall || e.Type == wire.TypeToolResult {
				id = p.ToolCallID
			}
			if k := key(id); k != "" {
				seen[k] = true
			}
		}
		if !more || len(events) == 0 {
			return nil
		}
		before = events[0].Seq
	}
}

// errNotATranscript refuses a path that is not a transcript of this user's
// Claude Code.
var errNotATranscript = errors.New("not a .jsonl file under ~/.claude/projects (or $CLAUDE_CONFIG_DIR/projects)")

// transcriptRel checks path and returns the projects directory of
// Claude Code's configuration it is in, and path relative to it, symbolic
// links resolved.
func (m *Manager) transcriptRel(path string) (projects, rel string, err error) {
	if !filepath.IsAbs(path) || filepath.Ext(path) != ".jsonl" {
		return "", "", errNotATranscript
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", "", err
	}
	for _, dir := range m.claudeDirs() {
		projects, err := filepath.EvalSymlinks(filepath.Join(dir, "projects"))
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(projects, real)
		if err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && filepath.Ext(rel) == ".jsonl" {
			return projects, rel, nil
		}
	}
	return "", "", errNotATranscript
}

// inClaudeDirs reports whether path names a transcript under one of the
// projects directories, by its text alone (it may not exist yet).
func (m *Manager) inClaudeDirs(path string) bool {
	if !filepath.IsAbs(path) || filepath.Ext(path) != ".jsonl" {
		return false
	}
	path = filepath.Clean(path)
	for _, dir := range m.claudeDirs() {
		if rel, err := filepath.Rel(filepath.Join(dir, "projects"), path); err == nil && !strings.HasPrefix(rel, "..") && rel != "." {
			return true
		}
	}
	return false
}

// claudeDirs are the Claude Code configuration directories whose
// transcripts are followed.
func (m *Manager) claudeDirs() []string {
	if len(m.cfg.ClaudeDirs) > 0 {
		return m.cfg.ClaudeDirs
	}
	if m.cfg.Home == "" {
		return nil
	}
	return []string{filepath.Join(m.cfg.Home, ".claude")}
}

// skipTranscript moves a session's mark to the end of its transcript
// without relaying or counting: what was written there since is already
// in the log and the session's usage (a terminal session's bridge relayed
// it while the phone drove it).
func (m *Manager) skipTranscript(sessionID string) {
	ctx := context.Background()
	t := &m.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := m.followedLocked(ctx, sessionID)
	if err != nil {
		return
	}
	path := f.mark.Path
	if path == "" {
		// Nothing was read of it yet: the terminal's claude had not been
		// prompted, and the phone's claude started the conversation under
		// the session's id, which names its transcript.
		for _, dir := range m.claudeDirs() {
			if found, _ := filepath.Glob(filepath.Join(dir, "projects", "*", sessionID+".jsonl")); len(found) > 0 {
				path = found[0]
				break
			}
		}
	}
	if path == "" {
		return
	}
	projects, rel, err := m.transcriptRel(path)
	if err != nil {
		return
	}
	file, err := openTranscript(projects, rel)
	if err != nil {
		return
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil || !endsLine(file, info.Size()) {
		return
	}
	f.mark = store.TranscriptMark{Path: filepath.Join(projects, rel), FileID: FileID(info), Offset: info.Size()}
	if err := m.cfg.Store.SetTranscriptMark(ctx, sessionID, f.mark); err != nil {
		m.cfg.Logger.Warn("recording a transcript's offset", "session", sessionID, "err", err)
	}
}
