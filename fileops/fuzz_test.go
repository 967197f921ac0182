package fileops

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// local reports whether rel is a clean root-relative path.
func local(rel string) bool {
	return rel == "." || (filepath.IsLocal(rel) && filepath.Clean(rel) == rel && !strings.ContainsRune(rel, 0))
}

// FuzzResolve feeds client paths to the path resolution and to List and
// Read in the trap-filled fixture: none may panic, return a path outside
// the root, return an unknown error code, or return content from outside.
func FuzzResolve(f *testing.F) {
	fx := newFixture(f)
	for _, s := range []string{
		"", ".", "/", "..", "../outside/secret.txt", "dir/../a.txt", "rel-out-dir/secret.txt",
		"chain1/sub/deep.txt", "dir/up-link/outside", "loop1", "a\x00b", "\xff", "dirlink-in/sub/c.txt",
		"abs-in", "dir/back", "proc-root/etc/passwd", fx.dir + "/dir", fx.dir + "/../outside",
		fx.base + "/rootevil/secret.txt", "through-up", "dotdot-link/root/a.txt", "a.txt/x",
	} {
		f.Add(s)
	}
	known := map[string]bool{
		CodeOutsideRoot: true, CodeInvalidPath: true, CodeNotFound: true,
		CodeNotDirectory: true, CodeNotFile: true,
	}
	realRoot, err := filepath.EvalSymlinks(fx.dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := fx.root.Rel(p)
		if err == nil && !local(rel) {
			t.Fatalf("Rel(%q) = %q", p, rel)
		}
		if err == nil {
			real, _, err := fx.root.stat(rel)
			if err == nil {
				if !local(real) {
					t.Fatalf("stat(%q) resolved to %q", rel, real)
				}
				ev, err := filepath.EvalSymlinks(filepath.Join(fx.dir, real))
				if err != nil || (ev != realRoot && !strings.HasPrefix(ev, realRoot+"/")) {
					t.Fatalf("stat(%q) resolved to %q, which is %q (%v)", rel, real, ev, err)
				}
			}
		}
		l, err := fx.root.List(p, ListOptions{ShowHidden: true, ShowGit: true})
		if err != nil && !known[Code(err)] {
			t.Fatalf("List(%q): %v", p, err)
		}
		if err == nil {
			for _, e := range l.Entries {
				if !local(e.Path) {
					t.Fatalf("List(%q) entry path %q", p, e.Path)
				}
			}
		}
		r, err := fx.root.Read(p, ReadOptions{})
		if err != nil && !known[Code(err)] {
			t.Fatalf("Read(%q): %v", p, err)
		}
		if err == nil {
			noSecret(t, "Read", r.Content)
			if !local(r.Path) {
				t.Fatalf("Read(%q) path %q", p, r.Path)
			}
		}
	})
}

// FuzzLineScanner feeds random files in random chunk sizes to the line
// scanner and compares what it picks with the reference.
func FuzzLineScanner(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), uint16(1), uint16(1), uint16(1))
	f.Add([]byte("a\r\nb"), uint16(0), uint16(0), uint16(3))
	f.Add([]byte("\n\n"), uint16(5), uint16(2), uint16(64))
	f.Add([]byte(""), uint16(0), uint16(0), uint16(1))
	f.Add([]byte("\xff\xfe\n"), uint16(0), uint16(1), uint16(2))
	f.Fuzz(func(t *testing.T, data []byte, offset, limit, chunk uint16) {
		if len(data) > 1<<10 {
			return // long inputs only slow the search; TestReadRandom covers them
		}
		s := lineScanner{offset: int(offset), limit: int(limit)}
		step := int(chunk%64) + 1
		for i := 0; i < len(data); i += step {
			s.feed(data[i:min(i+step, len(data))])
		}
		var out File
		s.finish(&out, true)
		content, lines, returned, truncated := reference(data, int(offset), int(limit))
		if !utf8.Valid([]byte(content)) {
			content = strings.ToValidUTF8(content, "\uFFFD")
		}
		if out.Content != content || out.Lines != lines || out.ReturnedLines != returned || out.Truncated != truncated || out.LinesPartial {
			t.Fatalf("offset %d limit %d step %d: got %+v; want %q %d %d %v", offset, limit, step, out, content, lines, returned, truncated)
		}
	})
}
