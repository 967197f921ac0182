package history

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/wire"
)

// A Claude Code transcript (docs/claude-transcript.md) is summarised by one
// pass over its lines, most of a line looked at only in its first lineHead
// bytes, where Claude Code writes the message's role and its first block's
// type (observed: a tool result's line is mostly its output, twice):
//
//   - the project is the cwd of the first line that has one;
//   - the prompts are the user_message events of its user lines that do
//     not hold a tool_result, as session.TranscriptEvents renders them for
//     a live session: the first is the title, all of them (up to
//     maxPrompts bytes) are what a search looks through;
//   - the messages are its prompts, and its assistant lines and tool
//     results outside subagents (answers, thinking, tool calls, results);
//   - the start and the last activity are the times of its first and last
//     lines of at most smallLine bytes that have one (a huge tool result's
//     line is not searched for its time).

// lineHead is how much of a line is looked at for its role and kind.
const lineHead = 1 << 10

// smallLine is the longest line searched for its time.
const smallLine = 8 << 10

// maxPrompts bounds, per session, the prompt text kept for searches.
const maxPrompts = 4 << 10

// maxTitle bounds a title, in bytes.
const maxTitle = 200

// summary is what the index knows of one conversation's file.
type summary struct {
	cwd      string
	title    string // the first prompt, cut to maxTitle
	prompts  string // every prompt, lower case, up to maxPrompts bytes
	messages int
	started  time.Time
	last     time.Time
	// malformed and overlong count the lines skipped.
	malformed, overlong int
}

var (
	userRole      = []byte(`"role":"user"`)
	assistantRole = []byte(`"role":"assistant"`)
	sidechainLine = []byte(`"isSidechain":true`)
	toolResult    = []byte(`"tool_result"`)
	cwdField      = []byte(`"cwd":`)
	timeField     = []byte(`"timestamp":`)
)

// claudeLine is what a summary decodes of a line.
type claudeLine struct {
	Cwd       string `json:"cwd"`
	Timestamp string `json:"timestamp"`
}

// scanClaude reads a transcript's lines from offset from (s holding what
// the lines before it gave) and adds them to s; it returns the offset just
// after the last complete line.
func scanClaude(id string, r io.Reader, from int64, s *summary) (int64, error) {
	var lastTimed []byte
	end, overlong, err := eachLine(r, from, func(line []byte, _ int64) bool {
		if len(bytes.TrimSpace(line)) == 0 {
			return true
		}
		if line[0] != '{' {
			s.malformed++
			return true
		}
		if s.cwd == "" && bytes.Contains(line, cwdField) {
			var l claudeLine
			if json.Unmarshal(line, &l) == nil && filepath.IsAbs(l.Cwd) {
				s.cwd = filepath.Clean(l.Cwd)
			}
		}
		if len(line) <= smallLine && bytes.Contains(line, timeField) {
			if s.started.IsZero() {
				s.started = lineTime(line)
			}
			lastTimed = append(lastTimed[:0], line...)
		}
		head := line[:min(len(line), lineHead)]
		switch {
		case bytes.Contains(head, sidechainLine):
		case bytes.Contains(head, assistantRole):
			s.messages++
		case !bytes.Contains(head, userRole):
		case bytes.Contains(head, toolResult):
			s.messages++
		default:
			events, ok := session.TranscriptEvents(id, line, time.Time{})
			if !ok {
				s.malformed++
			}
			for _, e := range events {
				if p, ok := e.Payload.(wire.UserMessage); ok {
					s.addPrompt(p.Content)
					s.messages++
				}
			}
		}
		return true
	})
	s.overlong += overlong
	if lastTimed != nil {
		if t := lineTime(lastTimed); t.After(s.last) {
			s.last = t
		}
	}
	// Lines are not written in time order (the UI's state lines carry
	// earlier times): the last activity is never before the start.
	if s.last.Before(s.started) {
		s.last = s.started
	}
	return end, err
}

// lineTime is the timestamp of a line, zero when it has none.
func lineTime(line []byte) time.Time {
	var l claudeLine
	if json.Unmarshal(line, &l) != nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, l.Timestamp)
	if err != nil {
		return time.Time{}
	}
	return t
}

// addPrompt notes a prompt: the first is the title; each is searchable
// while the bound allows.
func (s *summary) addPrompt(text string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	if s.title == "" {
		s.title = cut(strings.Join(strings.Fields(text), " "), maxTitle)
	}
	if room := maxPrompts - len(s.prompts); room > 1 {
		s.prompts += cut(strings.ToLower(text), room-1) + "\n"
	}
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// claudePage renders the lines of a transcript before offset before (0:
// all of it) as the events a live session produces (page).
func claudePage(historyID string, r io.ReaderAt, size, before int64, limit int, modTime time.Time) (frames []json.RawMessage, from int64, more bool, err error) {
	return page(r, size, before, limit, modTime, func(raw []byte, _ int64) ([]session.Entry, time.Time) {
		events, _ := session.TranscriptEvents(historyID, raw, modTime)
		if len(events) == 0 {
			return nil, time.Time{}
		}
		return events, lineTime(raw)
	})
}

// page reads the lines of a file before offset before (0: all of it),
// decode turning each into events and its time, and returns the frames of
// the last limit events or a few more (a line's events stay on one page).
// from is the offset of the page's first line: the page before it ends
// there; more says there is one. A tool_result is given the tool of its
// call, and agent_info is kept only where the model changes (as far as
// the lines read show). Only the whole lines of the maxPageRead bytes
// before before are read: a window with none ends the pages.
func page(r io.ReaderAt, size, before int64, limit int, modTime time.Time, decode func(raw []byte, at int64) ([]session.Entry, time.Time)) (frames []json.RawMessage, from int64, more bool, err error) {
	if before <= 0 || before > size {
		before = size
	}
	start := max(before-maxPageRead, 0)
	if start > 0 {
		// The window's first whole line starts after a '\n' (the one
		// just before the window counts).
		after, ok, err := nextLine(r, start-1, before)
		if err != nil || !ok {
			return nil, 0, false, err
		}
		start = after
	}
	type line struct {
		at     int64
		ts     time.Time
		frames []json.RawMessage
	}
	var lines []line
	kept := 0
	tools := map[string]string{}
	model := ""
	firstLine := int64(-1)
	_, _, err = eachLine(io.NewSectionReader(r, start, before-start), start, func(raw []byte, at int64) bool {
		if firstLine < 0 {
			firstLine = at
		}
		events, ts := decode(raw, at)
		if len(events) == 0 {
			return true
		}
		if ts.IsZero() {
			ts = modTime
		}
		l := line{at: at, ts: ts}
		for _, e := range events {
			switch p := e.Payload.(type) {
			case wire.ToolCall:
				tools[p.ToolCallID] = p.Tool
			case wire.ToolResult:
				if p.Tool == "" {
					p.Tool = tools[p.ToolCallID]
					e.Payload = p
				}
				delete(tools, p.ToolCallID)
			case wire.AgentInfo:
				if p.Model == model {
					continue
				}
				model = p.Model
			}
			if frame, err := frameOf(e, ts); err == nil {
				l.frames = append(l.frames, frame)
			}
		}
		if len(l.frames) == 0 {
			return true
		}
		lines = append(lines, l)
		kept += len(l.frames)
		// Only the newest lines are kept: enough for the page.
		for len(lines) > 1 && kept-len(lines[0].frames) >= limit {
			kept -= len(lines[0].frames)
			lines = lines[1:]
			more = true
		}
		return true
	})
	switch {
	case err != nil || firstLine < 0:
		return nil, 0, false, err
	case len(lines) == 0:
		// Whole lines, none shown: the page before, if the window
		// began after the file's start, ends at the first.
		return nil, firstLine, start > 0, nil
	}
	more = more || start > 0
	// Within the page, lines go in the order of their times: Claude Code
	// has been seen to append a turn's answer before its prompt, on a
	// loaded machine. The page itself is cut by offset, so that pages
	// neither overlap nor leave a line out.
	from = lines[0].at
	slices.SortStableFunc(lines, func(a, b line) int { return a.ts.Compare(b.ts) })
	for _, l := range lines {
		frames = append(frames, l.frames...)
	}
	return frames, from, more, nil
}

// frameOf is the frame of an event read from a file: the envelope a live
// session's event has, dated by its line, without a seq (it is not in the
// event log).
func frameOf(e session.Entry, at time.Time) (json.RawMessage, error) {
	p, err := json.Marshal(e.Payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(wire.Envelope{Type: e.Type, ID: e.ID, Timestamp: wire.Timestamp(at), Payload: p})
}
