package history

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetherdev/tether/store"
)

// TestLookAlikeDirectoriesDoNotResume: <root>/a-b and <root>/a/b keep their
// transcripts in one directory, which a sandboxed agent in either can
// write, and a transcript there may name either as its working directory.
// While both exist, none of those transcripts resumes from the history,
// however its lines name its directory; each is listed under the directory
// it names. Once <root>/a/b is gone, those naming <root>/a-b resume again,
// unless the store says a sandboxed session worked in <root>/a/b (an agent
// there may have written them).
func TestLookAlikeDirectoriesDoNotResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	dashed, nested := filepath.Join(root, "a-b"), filepath.Join(root, "a", "b")
	for _, d := range []string{dashed, nested} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	prompt := func(text, cwd string) []byte {
		return []byte(`{"type":"user","message":{"role":"user","content":"` + text + `"},"uuid":"u1","timestamp":"2026-01-01T00:00:00Z","cwd":"` + cwd + `"}` + "\n")
	}
	const own, planted, nestedOwn = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"
	f := newFixture(t, nil)
	f.transcript(dashed, own, prompt("the project's own", dashed))
	f.transcript(nested, planted, prompt("planted from the look-alike", dashed))
	f.transcript(nested, nestedOwn, prompt("the look-alike's own", nested))
	resumable := func(x *Index) map[string]bool {
		t.Helper()
		if err := x.Scan(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := x.List(ctx, Query{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, s := range p.Sessions {
			l, ok, err := x.Lookup(ctx, s.ID)
			if err != nil || !ok || l.Resumable != s.Resumable {
				t.Fatalf("Lookup(%s) = %+v, %v, %v; listed %+v", s.ID, l, ok, err, s)
			}
			out[s.AgentSessionID+" "+s.Project] = s.Resumable
		}
		return out
	}
	want := func(got map[string]bool, dashedOnes, nestedOne bool) {
		t.Helper()
		if len(got) != 3 || got[own+" "+dashed] != dashedOnes || got[planted+" "+dashed] != dashedOnes || got[nestedOwn+" "+nested] != nestedOne {
			t.Fatalf("resumable %v, want those of %s %v, that of %s %v", got, dashed, dashedOnes, nested, nestedOne)
		}
	}
	want(resumable(f.index), false, false)
	if p := f.list(Query{Project: nested}); len(p.Sessions) != 1 || p.Sessions[0].AgentSessionID != nestedOwn {
		t.Fatalf("the look-alike's list: %+v", p.Sessions)
	}

	if err := os.RemoveAll(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	claude := []string{filepath.Join(f.home, ".claude")}
	want(resumable(New(Config{ClaudeDirs: claude})), true, false)

	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "tether.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	if err := st.CreateSession(ctx, store.Session{ID: "gone", Agent: "claude-code", Source: store.SourceSandbox, WorkingDirectory: nested,
		Status: store.StatusClosed, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	got := resumable(New(Config{ClaudeDirs: claude, Store: st}))
	delete(got, " "+nested) // the store's session, which has no transcript of its own
	want(got, false, false)
}
