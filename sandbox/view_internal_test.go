package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestToolchains binds what PATH needs below the home and no more: a
// tool's own hidden tree whole, elsewhere the directory (and a lib beside
// a bin), never the rest of ~/.config or a projects directory, and never
// cargo's registry token.
func TestToolchains(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{".pyenv/shims", ".pyenv/versions", ".config/tool/bin", ".config/gh", ".local/bin", ".local/lib",
		".local/share", "go/bin", "go/pkg", ".cargo/bin", "Projects/x/node_modules/.bin", "Projects/secret"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".cargo/credentials.toml"), []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := func(p string) string { return filepath.Join(home, p) }
	path := strings.Join([]string{h(".pyenv/shims"), h(".config/tool/bin"), h(".local/bin"), h("go/bin"), h(".cargo/bin"),
		h("Projects/x/node_modules/.bin"), home, "/usr/bin", "relative/bin", h("missing/bin")}, ":")
	got := view{home: home, path: path}.toolchains()
	want := []Bind{
		{Src: h(".pyenv")}, {Src: h(".config/tool/bin")}, {Src: h(".local/bin")}, {Src: h(".local/lib")},
		{Src: h("go/bin")}, {Src: h(".cargo")}, {Src: h("Projects/x/node_modules/.bin")},
		{Src: os.DevNull, Dst: h(".cargo/credentials.toml")},
	}
	if !slices.Equal(got, want) {
		t.Errorf("toolchains:\n got %+v\nwant %+v", got, want)
	}
}

// TestViewHidesLast covers a hidden directory after a bind that contains
// it, and binds the daemon places below it after that.
func TestViewHidesLast(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(home, ".local/share/tether")
	state := filepath.Join(data, "sessions/s1")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	a := strings.Join(view{home: home, binds: []Bind{{Src: home, Writable: true}, {Src: state, Writable: true}}, hide: []string{data}}.args(), " ")
	homeMask, work, hide, stateBind := strings.Index(a, "--tmpfs "+home+" "), strings.Index(a, "--bind "+home+" "),
		strings.Index(a, "--tmpfs "+data), strings.Index(a, "--bind "+state)
	if homeMask < 0 || !(homeMask < work && work < hide && hide < stateBind) {
		t.Errorf("order: home mask %d, working directory %d, data hidden %d, state %d in\n%s", homeMask, work, hide, stateBind, a)
	}
}
