package hooks

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cmd = "/usr/local/bin/tether hook"

// hooksOf decodes the settings file's hooks: event → groups.
func hooksOf(t *testing.T, path string) map[string][]struct {
	Matcher *string
	Hooks   []handler
} {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks map[string][]struct {
			Matcher *string
			Hooks   []handler
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	return doc.Hooks
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestInstallWritesEveryEvent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "project", ".claude", "settings.json")
	changed, err := Install(path, cmd, 600)
	if err != nil || !changed {
		t.Fatalf("install: %v %v", changed, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("new file: %v %v", fi, err)
	}
	h := hooksOf(t, path)
	if len(h) != len(Events) {
		t.Fatalf("%d events: %v", len(h), h)
	}
	for _, ev := range Events {
		g := h[ev]
		if len(g) != 1 || len(g[0].Hooks) != 1 {
			t.Fatalf("%s: %+v", ev, g)
		}
		hd := g[0].Hooks[0]
		if hd.Type != "command" || hd.Command != cmd+" "+Marker || hd.Timeout != 600 {
			t.Fatalf("%s: %+v", ev, hd)
		}
		if hasMatcher := g[0].Matcher != nil; hasMatcher != toolEvents[ev] || (hasMatcher && *g[0].Matcher != "*") {
			t.Fatalf("%s matcher %v", ev, g[0].Matcher)
		}
	}
	// Again: nothing to do.
	b1, _ := os.ReadFile(path)
	if changed, err := Install(path, cmd, 600); err != nil || changed {
		t.Fatalf("second install: %v %v", changed, err)
	}
	if b2, _ := os.ReadFile(path); string(b1) != string(b2) {
		t.Fatal("an idempotent install rewrote the file")
	}
	// A new command or timeout replaces tether's hooks, never adds more.
	if changed, err := Install(path, "/opt/tether/bin/tether hook", 300); err != nil || !changed {
		t.Fatalf("reinstall: %v %v", changed, err)
	}
	for ev, g := range hooksOf(t, path) {
		if len(g) != 1 || g[0].Hooks[0].Command != "/opt/tether/bin/tether hook "+Marker || g[0].Hooks[0].Timeout != 300 {
			t.Fatalf("%s after reinstall: %+v", ev, g)
		}
	}
	if changed, err := Uninstall(path); err != nil || !changed {
		t.Fatalf("uninstall: %v %v", changed, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{}\n" {
		t.Fatalf("after uninstall: %q", b)
	}
}

// TestInstallKeepsExistingContent installs and uninstalls on files with
// content of their own: Install changes nothing else, Uninstall restores
// the file.
func TestInstallKeepsExistingContent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		// wantOrder lists top-level keys in the order they must appear
		// after Install.
		wantOrder []string
		// after is the file after Uninstall when it is not the input.
		after string
	}{
		{"empty file", "", []string{"hooks"}, ""},
		{"whitespace only", " \n", []string{"hooks"}, ""},
		{"empty object", "{}\n", []string{"hooks"}, ""},
		{"other settings", `{
  "model": "opus",
  "permissions": {
    "allow": [
      "Bash(npm run test:*)"
    ],
    "deny": [
      "Read(./.env)"
    ]
  },
  "env": {
    "FOO": "<bar> & baz"
  }
}
`, []string{"model", "permissions", "env", "hooks"}, ""},
		{"hooks first, with the user's own", `{
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/bin/lint-bash.sh",
            "timeout": 5
          }
        ]
      }
    ],
    "UserPromptCustom": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "echo hi"
          }
        ]
      }
    ]
  },
  "model": "sonnet",
  "unicode": "\u00e9t\u00e9 ✓"
}
`, []string{"hooks", "model", "unicode"}, ""},
		{"empty hooks object", `{
  "hooks": {},
  "z": [
    1,
    2.50,
    1e3,
    null,
    true
  ]
}
`, []string{"hooks", "z"}, `{
  "z": [
    1,
    2.50,
    1e3,
    null,
    true
  ]
}
`},
		{"duplicate keys kept", `{
  "a": 1,
  "a": 2
}
`, []string{"a", "a", "hooks"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			writeFile(t, path, c.in, 0o600)
			if changed, err := Install(path, cmd, 600); err != nil || !changed {
				t.Fatalf("install: %v %v", changed, err)
			}
			b, _ := os.ReadFile(path)
			doc, err := parseObject(b)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, m := range doc {
				keys = append(keys, m.key)
			}
			if strings.Join(keys, ",") != strings.Join(c.wantOrder, ",") {
				t.Fatalf("keys %v, want %v:\n%s", keys, c.wantOrder, b)
			}
			// Every other member is unchanged.
			if strings.TrimSpace(c.in) != "" {
				orig, _ := parseObject([]byte(c.in))
				for i, m := range orig {
					if m.key != "hooks" && !sameJSON(m.val, doc[i].val) {
						t.Fatalf("%s changed: %s → %s", m.key, m.val, doc[i].val)
					}
				}
			}
			// The user's own hooks are still there, before tether's.
			if strings.Contains(c.in, "lint-bash") {
				g := hooksOf(t, path)[EventPreToolUse]
				if len(g) != 2 || g[0].Hooks[0].Command != "~/bin/lint-bash.sh" || *g[0].Matcher != "Bash" || !strings.HasSuffix(g[1].Hooks[0].Command, Marker) {
					t.Fatalf("PreToolUse groups: %+v", g)
				}
				if _, ok := hooksOf(t, path)["UserPromptCustom"]; !ok {
					t.Fatal("an unknown event's hooks were dropped")
				}
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v", fi.Mode())
			}
			if changed, err := Uninstall(path); err != nil || !changed {
				t.Fatalf("uninstall: %v %v", changed, err)
			}
			after, _ := os.ReadFile(path)
			want := c.in
			switch {
			case c.after != "":
				want = c.after
			case strings.TrimSpace(c.in) == "":
				want = "{}\n"
			}
			if string(after) != want {
				t.Fatalf("after uninstall:\n%s\nwant:\n%s", after, want)
			}
			if changed, err := Uninstall(path); err != nil || changed {
				t.Fatalf("second uninstall: %v %v", changed, err)
			}
		})
	}
}

// TestUninstallRemovesOnlyTethers handles tether's handler sharing a group
// with the user's.
func TestUninstallRemovesOnlyTethers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "settings.json")
	in := `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"},{"type":"command","command":"tether hook ` + Marker + `","timeout":600}]}],` +
		`"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"tether hook ` + Marker + `"}]},{"matcher":"Edit","hooks":[{"type":"http","url":"http://127.0.0.1:1/x"}]}],` +
		`"Notification":[{"hooks":[{"type":"command","command":"tether hook"}]}]}}`
	writeFile(t, path, in, 0o644)
	if changed, err := Uninstall(path); err != nil || !changed {
		t.Fatalf("uninstall: %v %v", changed, err)
	}
	b, _ := os.ReadFile(path)
	want := `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]}],"PreToolUse":[{"matcher":"Edit","hooks":[{"type":"http","url":"http://127.0.0.1:1/x"}]}],` +
		`"Notification":[{"hooks":[{"type":"command","command":"tether hook"}]}]}}`
	if !sameJSON(b, []byte(want)) {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

func TestSettingsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in string }{
		{"array", `[]`},
		{"string", `"hooks"`},
		{"not json", `{hooks: 1}`},
		{"truncated", `{"model": "opus"`},
		{"two objects", `{} {}`},
		{"hooks a list", `{"hooks": []}`},
		{"event not a list", `{"hooks": {"PreToolUse": {"matcher": "*"}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			writeFile(t, path, c.in, 0o644)
			if _, err := Install(path, cmd, 600); !errors.Is(err, ErrSettings) || !strings.Contains(err.Error(), path) {
				t.Fatalf("install: %v", err)
			}
			if b, _ := os.ReadFile(path); string(b) != c.in {
				t.Fatalf("the refused file changed: %q", b)
			}
		})
	}
	for _, c := range cases[:5] {
		path := filepath.Join(t.TempDir(), "settings.json")
		writeFile(t, path, c.in, 0o644)
		if _, err := Uninstall(path); !errors.Is(err, ErrSettings) {
			t.Fatalf("uninstall %s: %v", c.name, err)
		}
	}
}

func TestUninstallMissingFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, ".claude", "settings.json")
	if changed, err := Uninstall(path); err != nil || changed {
		t.Fatalf("%v %v", changed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".claude")); !os.IsNotExist(err) {
		t.Fatal("uninstall created the directory")
	}
	if _, err := Install(path, "  ", 600); err == nil {
		t.Fatal("an empty command was installed")
	}
}

func TestInstallThroughSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles", "claude-settings.json")
	writeFile(t, real, `{"model":"opus"}`, 0o640)
	link := filepath.Join(dir, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(link, cmd, 600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced")
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if len(hooksOf(t, real)) != len(Events) {
		t.Fatal("the target was not written")
	}
}
