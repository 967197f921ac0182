package gitops

import (
	"reflect"
	"strings"
	"testing"
)

// seedRepo returns a repository with varied changes, to seed the fuzzers
// with real git output.
func seedRepo(f *testing.F) *testRepo {
	r := newRepo(f)
	r.write("a.txt", lines("a", 20))
	r.write("b.txt", "x\ny")
	r.write("tab\tname", "t\n")
	r.write("bin", "\x00")
	r.write("gone", "g\n")
	r.commitAll("base")
	r.write("a.txt", strings.Replace(lines("a", 20), "a 10\n", "A 10\n", 1))
	r.write("b.txt", "x\nz")
	r.write("tab\tname", "u\n")
	r.write("bin", "\x00\x01")
	r.git("mv", "gone", "moved")
	r.write("new", "n\n")
	return r
}

func FuzzParsePatch(f *testing.F) {
	r := seedRepo(f)
	f.Add(r.gitOut("diff"))
	f.Add(r.gitOut("diff", "--cached"))
	f.Add("diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n")
	f.Add("diff --git a/x b/x\n@@ -1,9223372036854775807 +1,9223372036854775807 @@\n+x\n")
	f.Add("* Unmerged path c\ndiff --git a/c b/c\n--- a/c\n+++ b/c\n@@ -1,0 +1,1 @@ ctx\n+x\n")
	f.Add("diff --git \"a/q\\\"\" \"b/q\\\"\"\nnew file mode 100644\nBinary files /dev/null and \"b/q\\\"\" differ\n")
	f.Fuzz(func(t *testing.T, data string) {
		files, err := parsePatch([]byte(data))
		if err != nil {
			return
		}
		for _, fd := range files {
			if !validStatus(fd.Status) || fd.Path == "" || fd.Hunks == nil {
				t.Fatalf("bad file %+v", fd)
			}
			for _, h := range fd.Hunks {
				checkLineNumbers(t, fd.Path, h)
				// A hunk rendered back parses to itself.
				again, err := parsePatch([]byte("diff --git a/x b/x\n--- a/x\n+++ b/x\n" + renderHunk(h)))
				if err != nil {
					t.Fatalf("rendered hunk does not parse: %v\n%s", err, renderHunk(h))
				}
				if len(again) != 1 || len(again[0].Hunks) != 1 || !reflect.DeepEqual(again[0].Hunks[0], h) {
					t.Fatalf("round trip:\n%+v\n%+v", h, again)
				}
			}
		}
	})
}

func FuzzParsePorcelainV2(f *testing.F) {
	r := seedRepo(f)
	f.Add([]byte(r.gitOut("status", "--porcelain=v2", "-z", "--branch", "-uall")))
	f.Add([]byte("# branch.oid (initial)\x00# branch.head (detached)\x00# branch.ab +1 -2\x00" +
		"u UU N... 100644 100644 100644 100644 a b c d\x00? x\x00! y\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := parsePorcelainV2(data)
		if err != nil {
			return
		}
		if res.Changes == nil || res.Ahead < 0 || res.Behind < 0 || res.IsClean != (len(res.Changes) == 0) {
			t.Fatalf("bad result %+v", res)
		}
		for _, c := range res.Changes {
			if !validStatus(c.Status) {
				t.Fatalf("status %q", c.Status)
			}
		}
	})
}

func FuzzParseRawNumstat(f *testing.F) {
	r := seedRepo(f)
	f.Add([]byte(r.gitOut(worktreeDiffArgs...)))
	f.Add([]byte(r.gitOut(stagedDiffArgs...)))
	f.Add([]byte(":000000 100644 0000000 575a4ab U\x00c\x00:100644 100644 0320aad 0000000 M\x00c\x00" +
		":100644 100644 e8823e1 e8823e1 R100\x00old\x00new\x000\t0\tc\x004\t0\tc\x00-\t-\t\x00old\x00new\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseRawNumstat(data)
		if err != nil {
			return
		}
		for _, e := range entries {
			n := e.n
			if e.path == "" || n.additions < 0 || n.deletions < 0 || (n.binary && n.additions+n.deletions != 0) ||
				(e.oldPath != "") != (e.code == 'R' || e.code == 'C') {
				t.Fatalf("bad entry %+v", e)
			}
		}
		changes, err := mergeChanges(entries, entries)
		if err != nil {
			return
		}
		for _, c := range changes {
			if c.Path == "" || !validStatus(c.Status) {
				t.Fatalf("bad change %+v", c)
			}
		}
	})
}

func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a\tb"`, `"\303\274"`, `"x\"y" rest`, `"bad\9"`, `"open`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, rest, err := unquotePrefix(s)
		if err != nil {
			return
		}
		if !strings.HasSuffix(s, rest) || len(v) > len(s) {
			t.Fatalf("unquotePrefix(%q) = %q, %q", s, v, rest)
		}
		a, b, ok := parseGitHeaderNames(s)
		if ok && (a == "" || b == "") {
			t.Fatalf("empty header names from %q", s)
		}
	})
}

// FuzzCQuote: every name hunkPatch writes reads back as itself with the
// unquoting the patch parser (and git apply) uses.
func FuzzCQuote(f *testing.F) {
	for _, s := range []string{"a.txt", "we\"ird\tnäme", "back\\slash", "\x00\x7f\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := cQuote(s)
		v, rest, err := unquotePrefix(q)
		if err != nil || rest != "" || v != s {
			t.Fatalf("cQuote(%q) = %s reads back as %q, %q, %v", s, q, v, rest, err)
		}
	})
}

// FuzzRemoteText: the parsers of a remote's URL (from .git/config, the
// agent's to write) and of git's progress and tracking output never
// panic, and a URL is only ever local, network, or refused.
func FuzzRemoteText(f *testing.F) {
	for _, s := range []string{"https://h/x", "git@h:x", "ext::sh", "/tmp", "file:///tmp", "-o", "Writing objects:  5% (1/20)", "ahead 3, behind 1", "gone"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		local, path, err := classifyURL(s, dir)
		if err == nil && local == (path == "") {
			t.Fatalf("classifyURL(%q) = %v %q", s, local, path)
		}
		if err == nil && !local && (strings.HasPrefix(s, "-") || strings.ContainsAny(s, "\x00\n")) {
			t.Fatalf("classifyURL(%q) let an option or a control character through", s)
		}
		if p, ok := parseProgress(s); ok && (p.Phase == "" || p.Percent > 999) {
			t.Fatalf("parseProgress(%q) = %+v", s, p)
		}
		parseTrack(s)
		shownURL(s)
	})
}

func FuzzBranchRef(f *testing.F) {
	f.Add([]byte("refs/heads/main\x00abc\x00origin/main\x00ahead 3, behind 2\x00\n"), "main")
	f.Add([]byte("refs/heads/main/x\x00abc\x00\x00\x00\nrefs/heads/main\x00def\x00up\x00gone\x00\n"), "main")
	f.Add([]byte("refs/heads/a\x00abc\x00up\x00behind -1\x00\n"), "a")
	f.Fuzz(func(t *testing.T, out []byte, name string) {
		ref, ok := branchRef(out, name)
		if !ok {
			return
		}
		var res StatusResult
		if err := branchHeader(&res, name, ref); err != nil {
			return
		}
		if res.Ahead < 0 || res.Behind < 0 || (res.HasUpstream && res.Upstream == "") || res.Branch != name {
			t.Fatalf("bad header %+v from %q", res, ref)
		}
	})
}
