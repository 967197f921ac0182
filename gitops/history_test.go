package gitops

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// historyFile returns code-like content with function headers, so that
// hunks carry function context.
func historyFile(rng *rand.Rand, n int) []string {
	var ls []string
	for i := 0; i < n; i++ {
		if i%12 == 0 {
			ls = append(ls, fmt.Sprintf("func f%d() {", rng.IntN(1000)))
			continue
		}
		ls = append(ls, fmt.Sprintf("\tv%d := %d", i, rng.IntN(100)))
	}
	return ls
}

// buildHistory makes a repository with a history of varied commits:
// edits, insertions and deletions at several places, new and deleted files,
// renames with edits, mode changes, binary files, files without a final
// newline and symbolic links.
func buildHistory(t *testing.T, commits int) (*testRepo, []string) {
	r := newRepo(t)
	rng := rand.New(rand.NewPCG(7, 11))
	files := map[string][]string{}
	noEOL := map[string]bool{}
	save := func(name string) {
		content := strings.Join(files[name], "\n")
		if !noEOL[name] {
			content += "\n"
		}
		r.write(name, content)
	}
	for i := range 12 {
		name := fmt.Sprintf("src/pkg%d/file%d.go", i%3, i)
		files[name] = historyFile(rng, 20+rng.IntN(60))
		save(name)
	}
	r.commitAll("initial")
	var hashes []string
	hashes = append(hashes, strings.TrimSpace(r.git("rev-parse", "HEAD")))
	names := func() []string {
		var ns []string
		for n := range files {
			ns = append(ns, n)
		}
		sort.Strings(ns)
		return ns
	}
	for c := 1; c <= commits; c++ {
		ns := names()
		for range 3 {
			name := ns[rng.IntN(len(ns))]
			ls := files[name]
			at := rng.IntN(len(ls))
			switch rng.IntN(3) {
			case 0:
				ls[at] = ls[at] + " // edited"
			case 1:
				ls = append(ls[:at], append(historyFile(rng, 1+rng.IntN(5)), ls[at:]...)...)
			default:
				end := min(len(ls), at+1+rng.IntN(4))
				if len(ls)-(end-at) > 2 {
					ls = append(ls[:at], ls[end:]...)
				}
			}
			files[name] = ls
			noEOL[name] = rng.IntN(4) == 0
			save(name)
		}
		added := fmt.Sprintf("src/new/c%d.go", c)
		files[added] = historyFile(rng, 5+rng.IntN(20))
		save(added)
		switch c % 4 {
		case 0:
			victim := ns[rng.IntN(len(ns))]
			delete(files, victim)
			r.remove(victim)
		case 1:
			from := ns[rng.IntN(len(ns))]
			to := fmt.Sprintf("moved/m%d.go", c)
			files[to] = append(append([]string{}, files[from]...), "// moved")
			delete(files, from)
			r.remove(from)
			save(to)
		case 2:
			name := ns[rng.IntN(len(ns))]
			mode := os.FileMode(0o755)
			if info, err := os.Stat(r.path(name)); err == nil && info.Mode().Perm()&0o100 != 0 {
				mode = 0o644
			}
			if err := os.Chmod(r.path(name), mode); err != nil {
				t.Fatal(err)
			}
		case 3:
			r.write(fmt.Sprintf("assets/blob%d.bin", c%2), fmt.Sprintf("\x00\x01binary %d", c))
			link := fmt.Sprintf("links/l%d", c%2)
			os.Remove(r.path(link))
			if err := os.MkdirAll(r.path("links"), 0o755); err != nil {
				t.Fatal(err)
			}
			r.symlink(fmt.Sprintf("../src/target%d", c), link)
		}
		r.commitAll(fmt.Sprintf("commit %d", c))
		hashes = append(hashes, strings.TrimSpace(r.git("rev-parse", "HEAD")))
	}
	return r, hashes
}

// TestHistoryAgreesWithGit replays each commit of a generated history in a
// clone, half staged and half not, and compares Status and both Diffs with
// the git CLI at every step.
func TestHistoryAgreesWithGit(t *testing.T) {
	src, hashes := buildHistory(t, 8)
	clone := &testRepo{t: t, dir: t.TempDir()}
	clone.git("clone", "-q", "--no-local", src.dir, ".")
	clone.git("config", "user.name", "Test User")
	clone.git("config", "user.email", "test@example.com")
	ctx := context.Background()
	seen := make(map[string]bool)
	for i := 1; i < len(hashes); i++ {
		prev, next := hashes[i-1], hashes[i]
		t.Run(fmt.Sprintf("commit %d", i), func(t *testing.T) {
			clone.t = t
			clone.git("checkout", "-q", "-f", "-B", "replay", prev)
			clone.git("clean", "-q", "-fdx")
			patch := clone.git("diff", "--binary", prev, next)
			apply := exec.Command("git", "apply")
			apply.Dir = clone.dir
			apply.Stdin = strings.NewReader(patch)
			if out, err := apply.CombinedOutput(); err != nil {
				t.Fatalf("git apply: %v\n%s", err, out)
			}
			changed := strings.Fields(clone.git("diff", "--name-only", "--no-renames", prev, next))
			for j, p := range changed {
				if j%2 == 0 {
					clone.git("add", "-A", "--", p)
				}
			}
			if len(changed) > 0 {
				if _, err := os.Stat(clone.path(changed[0])); err == nil {
					f, err := os.OpenFile(clone.path(changed[0]), os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					fmt.Fprintln(f, "// also unstaged")
					f.Close()
				}
			}
			st, err := direct.Status(ctx, clone.dir)
			if err != nil {
				t.Fatal(err)
			}
			compareChanges(t, st.Changes, oracleChanges(t, clone))
			for _, c := range st.Changes {
				seen[fmt.Sprintf("%s staged=%v", c.Status, c.Staged)] = true
				seen[fmt.Sprintf("binary=%v", c.Binary)] = true
			}
			for _, cached := range []bool{false, true} {
				diffs, err := direct.diffFiles(ctx, clone.dir, nil, cached)
				if err != nil {
					t.Fatal(err)
				}
				compareDiff(t, clone, diffs, cached)
				for _, d := range diffs {
					if d.OldMode != "" && d.NewMode != "" && d.OldMode != d.NewMode {
						seen["mode change"] = true
					}
				}
			}
		})
	}
	for _, kind := range []string{"modified staged=true", "modified staged=false", "added staged=true",
		"deleted staged=true", "deleted staged=false", "renamed staged=true", "untracked staged=false",
		"binary=true", "mode change"} {
		if !seen[kind] {
			t.Errorf("the replayed history never produced %q; seen %v", kind, seen)
		}
	}
}
