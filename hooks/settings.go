package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Marker ends the command of every hook Install adds; Uninstall removes
// exactly the command hooks whose command ends with it. It is a shell
// comment, so the command runs the same with it.
const Marker = "# added by tether hooks install"

// ErrSettings is returned for a settings file whose content Install and
// Uninstall cannot edit without losing something (not a JSON object, or a
// "hooks" entry of the wrong shape); the file is left as it was.
var ErrSettings = errors.New("hooks: settings file is not in Claude Code's format")

// member is one key and its value, kept in file order and as written.
type member struct {
	key string
	val json.RawMessage
}

// object is a JSON object whose members keep their order.
type object []member

func (o object) get(key string) (json.RawMessage, int) {
	for i, m := range o {
		if m.key == key {
			return m.val, i
		}
	}
	return nil, -1
}

// set replaces key's value, or appends it.
func (o object) set(key string, val json.RawMessage) object {
	if _, i := o.get(key); i >= 0 {
		o[i].val = val
		return o
	}
	return append(o, member{key, val})
}

func (o object) remove(key string) object {
	if _, i := o.get(key); i >= 0 {
		return append(o[:i:i], o[i+1:]...)
	}
	return o
}

func parseObject(b []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, ErrSettings
	}
	o := object{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSettings, err)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSettings, err)
		}
		o = append(o, member{t.(string), val})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSettings, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: data after the object", ErrSettings)
	}
	return o, nil
}

func (o object) encode() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// handler is a hook handler of Claude Code's settings.
type handler struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout,omitempty"`
}

func isOwn(raw json.RawMessage) bool {
	var h handler
	return json.Unmarshal(raw, &h) == nil && h.Type == "command" && strings.HasSuffix(h.Command, Marker)
}

// Install adds tether's command hook for every event of Events to the
// Claude Code settings file at settingsPath, running command with the
// given timeout in seconds; everything else in the file stays as it was.
// An existing tether hook is replaced, so Install is idempotent and
// updates the command. The file and its directory are created when
// missing; changed reports whether the file was written.
func Install(settingsPath, command string, timeout int) (changed bool, err error) {
	if strings.TrimSpace(command) == "" {
		return false, errors.New("hooks: install: empty command")
	}
	own, _ := json.Marshal(handler{Type: "command", Command: strings.TrimSpace(command) + " " + Marker, Timeout: timeout})
	return edit(settingsPath, true, func(hooks object) (object, error) {
		hooks, err := removeOwn(hooks)
		if err != nil {
			return nil, err
		}
		for _, ev := range Events {
			group := object{}
			if toolEvents[ev] {
				group = group.set("matcher", json.RawMessage(`"*"`))
			}
			group = group.set("hooks", encodeList([]json.RawMessage{own}))
			groups, _ := hooks.get(ev)
			var list []json.RawMessage
			if groups != nil {
				if err := json.Unmarshal(groups, &list); err != nil {
					return nil, fmt.Errorf("%w: hooks.%s is not a list", ErrSettings, ev)
				}
			}
			hooks = hooks.set(ev, encodeList(append(list, group.encode())))
		}
		return hooks, nil
	})
}

// Uninstall removes from the settings file at settingsPath exactly the
// hooks Install added (command hooks whose command ends with Marker), and
// the lists and objects that only held them. A missing file is left
// missing; changed reports whether the file was written.
func Uninstall(settingsPath string) (changed bool, err error) {
	return edit(settingsPath, false, removeOwn)
}

// removeOwn removes tether's handlers from a hooks object, and the groups
// and event lists that held nothing else.
func removeOwn(hooks object) (object, error) {
	out := object{}
	for _, m := range hooks {
		var groups []json.RawMessage
		if json.Unmarshal(m.val, &groups) != nil {
			out = append(out, m)
			continue
		}
		var kept []json.RawMessage
		touched := false
		for _, g := range groups {
			group, err := parseObject(g)
			if err != nil {
				kept = append(kept, g)
				continue
			}
			raw, _ := group.get("hooks")
			var handlers []json.RawMessage
			if json.Unmarshal(raw, &handlers) != nil {
				kept = append(kept, g)
				continue
			}
			var rest []json.RawMessage
			for _, h := range handlers {
				if !isOwn(h) {
					rest = append(rest, h)
				}
			}
			switch {
			case len(rest) == len(handlers):
				kept = append(kept, g)
			case len(rest) == 0:
				touched = true
			default:
				touched = true
				kept = append(kept, group.set("hooks", encodeList(rest)).encode())
			}
		}
		switch {
		case !touched:
			out = append(out, m)
		case len(kept) > 0:
			out = append(out, member{m.key, encodeList(kept)})
		}
	}
	return out, nil
}

func encodeList(items []json.RawMessage) json.RawMessage {
	b := json.RawMessage{'['}
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// edit applies f to the "hooks" object of the settings file and writes
// the file back when that changed anything. create says whether a missing
// file is created.
func edit(path string, create bool, f func(object) (object, error)) (bool, error) {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target // keep a symlinked settings file (dotfiles) a symlink
	}
	old, err := os.ReadFile(path)
	exists := err == nil
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("hooks: settings: %w", err)
	}
	doc := object{}
	if len(bytes.TrimSpace(old)) > 0 {
		if doc, err = parseObject(old); err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
	}
	hooks := object{}
	raw, _ := doc.get("hooks")
	hadHooks := raw != nil
	if hadHooks {
		if hooks, err = parseObject(raw); err != nil {
			return false, fmt.Errorf("%s: %w: \"hooks\" is not an object", path, ErrSettings)
		}
	}
	newHooks, err := f(hooks)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case len(newHooks) == 0 && !hadHooks:
	case len(newHooks) == 0 && len(hooks) > 0:
		doc = doc.remove("hooks") // it held only tether's hooks
	default:
		doc = doc.set("hooks", newHooks.encode())
	}
	var out bytes.Buffer
	if err := json.Indent(&out, doc.encode(), "", "  "); err != nil {
		return false, fmt.Errorf("hooks: settings: %w", err)
	}
	out.WriteByte('\n')
	if exists && sameJSON(old, out.Bytes()) {
		return false, nil
	}
	if len(bytes.TrimSpace(old)) == 0 && len(newHooks) == 0 {
		return false, nil
	}
	if err := writeAtomic(path, out.Bytes()); err != nil {
		return false, err
	}
	return true, nil
}

func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// writeAtomic replaces path with data through a temporary file in the same
// directory, keeping an existing file's mode (0644 for a new file).
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hooks: settings: %w", err)
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("hooks: settings: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Chmod(mode), tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("hooks: settings: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("hooks: settings: %w", err)
	}
	return nil
}
