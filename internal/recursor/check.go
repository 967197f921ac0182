package recursor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ErrDropped is wrapped by every error of ParseFrame: the app's
// BridgeMessage.fromJson throws inside a try/catch and the frame vanishes.
var ErrDropped = errors.New("the app drops this frame")

// Frame is one server frame as the app's BridgeMessage.fromJson reads it.
type Frame struct {
	// Type is the frame's "type".
	Type string
	// ID is the frame's "id"; "" when absent or null.
	ID string
	// Timestamp is the frame's "timestamp"; "" when absent or null.
	Timestamp string
	// Payload is the frame's "payload" with numbers kept as json.Number;
	// empty when absent or null.
	Payload map[string]any
	// Raw is the frame as received.
	Raw []byte
}

// ParseFrame applies BridgeMessage.fromJson's frame-level rules to a text
// frame: one JSON object; "type" a string; "id" a string or null;
// "timestamp" absent, null or a string DateTime.parse accepts; "payload" an
// object, absent or null. An error wraps ErrDropped.
func ParseFrame(data []byte) (Frame, error) {
	f := Frame{Raw: data}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return f, fmt.Errorf("%w: not JSON: %w", ErrDropped, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return f, fmt.Errorf("%w: more than one JSON value", ErrDropped)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return f, fmt.Errorf("%w: not a JSON object", ErrDropped)
	}
	if f.Type, ok = m["type"].(string); !ok {
		return f, fmt.Errorf("%w: \"type\" is not a string", ErrDropped)
	}
	if f.ID, ok = optString(m, "id"); !ok {
		return f, fmt.Errorf("%w: \"id\" is not a string", ErrDropped)
	}
	if f.Timestamp, ok = optString(m, "timestamp"); !ok {
		return f, fmt.Errorf("%w: \"timestamp\" is not a string", ErrDropped)
	}
	if ts, ok := m["timestamp"].(string); ok && !DateTimeParses(ts) {
		return f, fmt.Errorf("%w: DateTime.parse rejects timestamp %q", ErrDropped, ts)
	}
	switch p := m["payload"].(type) {
	case nil:
	case map[string]any:
		f.Payload = p
	default:
		return f, fmt.Errorf("%w: \"payload\" is not an object", ErrDropped)
	}
	return f, nil
}

func optString(m map[string]any, key string) (string, bool) {
	switch v := m[key].(type) {
	case nil:
		return "", true
	case string:
		return v, true
	default:
		return "", false
	}
}

// Violation is one way a frame breaks the app's parser for its type.
type Violation struct {
	// Path locates the field, e.g. "payload.changes[2].status".
	Path string
	// Problem says what the app requires there.
	Problem string
}

func (v Violation) String() string { return v.Path + ": " + v.Problem }

// CheckError lists the violations of one frame.
type CheckError struct {
	Type       string
	Violations []Violation
}

func (e *CheckError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return e.Type + ": " + strings.Join(parts, "; ")
}

// Enumerations the app decodes with $enumDecode: any other value throws.
var (
	ChangeStatuses = []string{"modified", "added", "deleted", "untracked", "renamed"}
	LineTypes      = []string{"context", "added", "removed"}
	EntryTypes     = []string{"file", "directory"}
	RiskLevels     = []string{"low", "medium", "high", "critical"}
)

// Check validates f's payload against the app's parser for f.Type (section
// (b) of the contract): required fields, JSON types, enumerations. A nil
// result means the app reads the frame fully; a *CheckError lists what it
// would drop, throw on or misread. Types the app does not know pass: it
// delivers them as errors, which its listeners ignore.
func Check(f Frame) error {
	c := &checker{}
	p := f.Payload
	switch f.Type {
	case "connection_ack":
		c.optString(p, "payload", "purpose")
		for _, k := range []string{"connection_mode", "connection_mode_description", "bridge_url"} {
			c.str(p, "payload", k) // cast `as String` in HealthVerificationScreen.build
		}
		for i, s := range c.optList(p, "payload", "active_sessions") {
			path := fmt.Sprintf("payload.active_sessions[%d]", i)
			if m := c.obj(s, path); m != nil {
				c.str(m, path, "session_id")
				c.str(m, path, "status")
			}
		}
	case "connection_error", "error":
		c.optString(p, "payload", "message")
	case "health_status":
		c.optMap(p, "payload", "checks")
		c.optList(p, "payload", "warnings")
		c.optString(p, "payload", "connection_mode")
		// Not ready: the app enters only through acknowledge_warning.
		if p["ready"] != true && p["requires_acknowledgment"] != true {
			c.add("payload.ready", "must be true to enter the app")
		}
	case "session_ready", "stream_start", "stream_end":
		c.nonEmpty(p, "payload", "session_id")
	case "stream_chunk":
		c.nonEmpty(p, "payload", "session_id")
		c.str(p, "payload", "content")
	case "approval_required":
		c.str(p, "payload", "tool_call_id")
		c.str(p, "payload", "session_id")
		c.optMap(p, "payload", "params")
		for _, k := range []string{"source", "tool", "description", "reasoning", "risk_level"} {
			c.optString(p, "payload", k)
		}
		if r, ok := p["risk_level"].(string); ok && !slices.Contains(RiskLevels, r) {
			c.add("payload.risk_level", fmt.Sprintf("%q is shown as low", r))
		}
	case "tool_result":
		c.nonEmpty(p, "payload", "session_id")
		if r := c.obj(p["result"], "payload.result"); r != nil {
			c.str(r, "payload.result", "content")
			c.optBool(r, "payload.result", "success")
			c.optString(r, "payload.result", "error")
			c.optString(r, "payload.result", "diff")
			c.optInt(r, "payload.result", "duration_ms")
		}
	case "claude_event":
		checkClaudeEvent(c, p)
	case "session_end":
		c.str(p, "payload", "session_id")
	case "git_status_response":
		checkGitStatus(c, p)
	case "git_diff_response":
		for i, fd := range c.optList(p, "payload", "files") {
			checkDiffFile(c, fd, fmt.Sprintf("payload.files[%d]", i))
		}
	case "file_list_response":
		c.optString(p, "payload", "path")
		c.optString(p, "payload", "currentPath")
		entries := c.optList(p, "payload", "entries")
		if _, ok := p["entries"]; !ok {
			entries = c.optList(p, "payload", "nodes")
		}
		for i, e := range entries {
			checkFileNode(c, e, fmt.Sprintf("payload.entries[%d]", i))
		}
	case "file_read_response":
		c.optString(p, "payload", "content")
	case "notification":
		for _, k := range []string{"notification_type", "priority", "notification_id", "session_id", "title", "body"} {
			c.optString(p, "payload", k)
		}
		c.optMap(p, "payload", "data")
		if id, _ := p["notification_id"].(string); id == "" && f.ID == "" {
			c.add("payload.notification_id", "no notification id and no envelope id: never acknowledged")
		}
	}
	if len(c.v) == 0 {
		return nil
	}
	return &CheckError{Type: f.Type, Violations: c.v}
}

func checkClaudeEvent(c *checker, p map[string]any) {
	c.nonEmpty(p, "payload", "event_type")
	c.nonEmpty(p, "payload", "session_id")
	inner := c.optMap(p, "payload", "payload")
	const path = "payload.payload"
	switch p["event_type"] {
	case "SessionStart":
		for _, k := range []string{"working_directory", "title", "branch"} {
			c.optString(inner, path, k)
		}
	case "PreToolUse":
		c.optString(inner, path, "tool")
		c.optString(inner, path, "tool_name")
		c.optMap(inner, path, "params")
		c.optMap(inner, path, "tool_input")
	case "PostToolUse":
		if r := c.optMap(inner, path, "result"); r != nil {
			c.optBool(r, path+".result", "success")
			c.optString(r, path+".result", "content")
			c.optString(r, path+".result", "error")
		}
	case "Notification":
		for _, k := range []string{"title", "notification_type", "body", "message"} {
			c.optString(inner, path, k)
		}
	case "SessionEnd", "Stop":
		c.optString(inner, path, "reason")
	}
}

func checkGitStatus(c *checker, p map[string]any) {
	c.str(p, "payload", "branch")
	c.num(p, "payload", "ahead")
	c.num(p, "payload", "behind")
	c.optBool(p, "payload", "is_clean")
	c.optBool(p, "payload", "isClean")
	c.optNum(p, "payload", "additions")
	c.optNum(p, "payload", "deletions")
	c.optString(p, "payload", "diff")
	for i, ch := range c.optList(p, "payload", "changes") {
		path := fmt.Sprintf("payload.changes[%d]", i)
		if m := c.obj(ch, path); m != nil {
			c.str(m, path, "path")
			c.enum(m, path, "status", ChangeStatuses)
			c.optNum(m, path, "additions")
			c.optNum(m, path, "deletions")
		}
	}
}

func checkDiffFile(c *checker, v any, path string) {
	m := c.obj(v, path)
	if m == nil {
		return
	}
	c.str(m, path, "path")
	c.enum(m, path, "status", ChangeStatuses)
	c.num(m, path, "additions")
	c.num(m, path, "deletions")
	for _, k := range []string{"oldPath", "old_path", "newPath", "new_path", "oldMode", "old_mode", "newMode", "new_mode"} {
		c.optString(m, path, k)
	}
	for i, h := range c.optList(m, path, "hunks") {
		hp := fmt.Sprintf("%s.hunks[%d]", path, i)
		hm := c.obj(h, hp)
		if hm == nil {
			continue
		}
		c.str(hm, hp, "header")
		for _, k := range []string{"oldStart", "old_start", "oldLines", "old_lines", "newStart", "new_start", "newLines", "new_lines"} {
			c.optNum(hm, hp, k)
		}
		for j, l := range c.optList(hm, hp, "lines") {
			lp := fmt.Sprintf("%s.lines[%d]", hp, j)
			if lm := c.obj(l, lp); lm != nil {
				c.enum(lm, lp, "type", LineTypes)
				c.str(lm, lp, "content")
				for _, k := range []string{"oldLineNumber", "old_line_number", "newLineNumber", "new_line_number"} {
					c.optNum(lm, lp, k)
				}
			}
		}
	}
}

func checkFileNode(c *checker, v any, path string) {
	m := c.obj(v, path)
	if m == nil {
		return
	}
	c.str(m, path, "name")
	c.str(m, path, "path")
	c.enum(m, path, "type", EntryTypes)
	c.optNum(m, path, "size")
	c.optString(m, path, "content")
	for _, k := range []string{"modifiedAt", "modified"} {
		if s, ok := c.optString(m, path, k); ok && s != "" && !DateTimeParses(s) {
			c.add(path+"."+k, fmt.Sprintf("DateTime.parse rejects %q", s))
		}
	}
	for i, ch := range c.optList(m, path, "children") {
		checkFileNode(c, ch, fmt.Sprintf("%s.children[%d]", path, i))
	}
}

// checker collects violations; each method reads one field under the
// Dart cast named after it.
type checker struct{ v []Violation }

func (c *checker) add(path, problem string) { c.v = append(c.v, Violation{path, problem}) }

// obj is `v as Map`: required.
func (c *checker) obj(v any, path string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		c.add(path, "must be an object")
	}
	return m
}

// str is `as String`.
func (c *checker) str(m map[string]any, path, key string) {
	if _, ok := m[key].(string); !ok {
		c.add(path+"."+key, "must be a string")
	}
}

// nonEmpty is a required, non-empty String.
func (c *checker) nonEmpty(m map[string]any, path, key string) {
	if s, _ := m[key].(string); s == "" {
		c.add(path+"."+key, "must be a non-empty string")
	}
}

// optString is `as String?`; ok is false when absent or null.
func (c *checker) optString(m map[string]any, path, key string) (string, bool) {
	switch v := m[key].(type) {
	case nil:
		return "", false
	case string:
		return v, true
	default:
		c.add(path+"."+key, "must be a string or null")
		return "", false
	}
}

func (c *checker) optBool(m map[string]any, path, key string) {
	if v, ok := m[key]; ok && v != nil {
		if _, ok := v.(bool); !ok {
			c.add(path+"."+key, "must be a boolean or null")
		}
	}
}

// num is `as num`.
func (c *checker) num(m map[string]any, path, key string) {
	if _, ok := m[key].(json.Number); !ok {
		c.add(path+"."+key, "must be a number")
	}
}

func (c *checker) optNum(m map[string]any, path, key string) {
	if v, ok := m[key]; ok && v != nil {
		if _, ok := v.(json.Number); !ok {
			c.add(path+"."+key, "must be a number or null")
		}
	}
}

// optInt is `as int?`: no fraction, no exponent.
func (c *checker) optInt(m map[string]any, path, key string) {
	if v, ok := m[key]; ok && v != nil {
		if n, ok := v.(json.Number); !ok || !isDartInt(n) {
			c.add(path+"."+key, fmt.Sprintf("must be an integer literal (as int), got %v", v))
		}
	}
}

func (c *checker) optMap(m map[string]any, path, key string) map[string]any {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	mm, ok := v.(map[string]any)
	if !ok {
		c.add(path+"."+key, "must be an object or null")
	}
	return mm
}

func (c *checker) optList(m map[string]any, path, key string) []any {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		c.add(path+"."+key, "must be a list or null")
	}
	return l
}

// enum is $enumDecode: throws on null and on any value outside values.
func (c *checker) enum(m map[string]any, path, key string, values []string) {
	s, ok := m[key].(string)
	if !ok || !slices.Contains(values, s) {
		c.add(path+"."+key, fmt.Sprintf("must be one of %v, got %v", values, m[key]))
	}
}
