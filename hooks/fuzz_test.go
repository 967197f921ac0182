package hooks

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func FuzzDecode(f *testing.F) {
	for _, p := range payloads {
		f.Add([]byte(p))
	}
	f.Add([]byte(`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":null}`))
	f.Add([]byte(`{"session_id":"s","hook_event_name":"Stop","session_id":""}`))
	f.Add([]byte(" {} "))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := Decode(body)
		if err != nil {
			if !errors.Is(err, ErrInvalidJSON) && !errors.Is(err, ErrMissingField) && !errors.Is(err, ErrUnknownEvent) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if ev.SessionID == "" || !known(ev.Name) || (toolEvents[ev.Name] && ev.ToolName == "") || !json.Valid(ev.Raw) {
			t.Fatalf("accepted %q as %+v", body, ev)
		}
		for _, a := range []Answer{{Decision: DecisionAllow, UpdatedInput: ev.ToolInput}, {Decision: DecisionDeny, Reason: ev.ToolName}, {Decision: DecisionAsk}} {
			if b, err := encodeAnswer(ev.Name, a); err == nil && !json.Valid(b) {
				t.Fatalf("answer %q is not JSON", b)
			}
		}
	})
}

// FuzzSettings installs into arbitrary settings files: Install either
// refuses and leaves the file alone, or adds exactly one tether hook per
// event; Uninstall then removes all of them and keeps every other member.
func FuzzSettings(f *testing.F) {
	f.Add(`{}`)
	f.Add(`{"model":"opus","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"x"}]}]}}`)
	f.Add(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"t ` + Marker + `"},{"type":"command","command":"y"}]}]}}`)
	f.Add(`{"hooks":{"Stop":[1,{"hooks":3}]},"a":[{}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		path := filepath.Join(t.TempDir(), "settings.json")
		os.WriteFile(path, []byte(in), 0o644)
		if _, err := Install(path, "tether hook", 600); err != nil {
			if b, _ := os.ReadFile(path); string(b) != in {
				t.Fatalf("refused (%v) but changed the file", err)
			}
			return
		}
		b, _ := os.ReadFile(path)
		if n := countOwn(t, b); n != len(Events) {
			t.Fatalf("%d tether hooks in %s", n, b)
		}
		if _, err := Uninstall(path); err != nil {
			t.Fatalf("uninstall after install: %v", err)
		}
		after, _ := os.ReadFile(path)
		if countOwn(t, after) != 0 {
			t.Fatalf("left behind: %s", after)
		}
		orig, err := parseObject([]byte(in))
		if err != nil {
			return
		}
		got, err := parseObject(after)
		if err != nil {
			t.Fatalf("uninstall wrote %q: %v", after, err)
		}
		if o, g := orig.remove("hooks"), got.remove("hooks"); len(o) != len(g) {
			t.Fatalf("members %v became %v", o, g)
		} else {
			for i := range o {
				if o[i].key != g[i].key || !sameJSON(o[i].val, g[i].val) {
					t.Fatalf("%s: %s became %s: %s", o[i].key, o[i].val, g[i].key, g[i].val)
				}
			}
		}
	})
}

// countOwn counts tether's handlers in a settings file.
func countOwn(t *testing.T, settings []byte) int {
	t.Helper()
	var doc struct {
		Hooks map[string]any
	}
	json.Unmarshal(settings, &doc)
	n := 0
	for _, groups := range doc.Hooks {
		list, _ := groups.([]any)
		for _, g := range list {
			group, _ := g.(map[string]any)
			handlers, _ := group["hooks"].([]any)
			for _, h := range handlers {
				if b, _ := json.Marshal(h); isOwn(b) {
					n++
				}
			}
		}
	}
	return n
}
