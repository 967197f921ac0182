package gitops

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TestGitAttacks sets, in a repository, each knob an agent could use to
// make the daemon's git run a program, every one writing a marker outside
// the repository, and asks for a status, a diff and a commit:
//
//   - the knobs gitops overrides on git's command line (diff.external,
//     GIT_EXTERNAL_DIFF's config twin, core.pager, a textconv driver)
//     run nothing even with git run directly;
//   - the knobs only a sandbox can hold (core.fsmonitor, a clean/smudge
//     filter, core.hooksPath and .git/hooks, include.path and includeIf to
//     a file the agent wrote) run nothing when Exec refuses to start git:
//     gitops starts no git process but through Exec, which is where the
//     daemon puts its sandbox (cmd/tether's TestAgentGitConfigNeverRunsAsTheDaemon
//     runs the same attacks in it).
func TestGitAttacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	outside := t.TempDir()
	mark := func(name string) string {
		return "sh -c 'echo ran > " + filepath.Join(outside, name) + "'"
	}
	hook := func(dir, name string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho ran > "+filepath.Join(outside, name)+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	setup := func(t *testing.T) *testRepo {
		r := newRepo(t)
		r.write("a.txt", "1\n")
		r.write("b.bin", "1\n")
		r.commitAll("first")
		r.write("a.txt", "2\n")
		r.write("b.bin", "2\n")
		r.write("staged.txt", "s\n")
		r.git("add", "staged.txt")
		return r
	}
	commandLine := func(r *testRepo) {
		r.git("config", "diff.external", mark("diff-external"))
		r.git("config", "core.pager", mark("pager"))
		r.git("config", "pager.diff", mark("pager-diff"))
		r.git("config", "diff.conv.textconv", mark("textconv"))
		r.write(".gitattributes", "*.bin diff=conv\n")
	}
	sandboxOnly := func(r *testRepo) {
		r.git("config", "core.fsmonitor", mark("fsmonitor"))
		r.git("config", "filter.evil.clean", mark("clean"))
		r.git("config", "filter.evil.smudge", mark("smudge"))
		r.write(".gitattributes", "* filter=evil\n")
		hooks := filepath.Join(r.dir, "agent-hooks")
		hook(hooks, "pre-commit")
		r.git("config", "core.hooksPath", hooks)
		hook(r.path(".git/hooks"), "post-commit")
		r.write("agent.inc", "[core]\n\tfsmonitor = "+mark("include")+"\n")
		r.git("config", "include.path", r.path("agent.inc"))
		r.write("agent-if.inc", "[core]\n\tpager = "+mark("includeif")+"\n")
		r.git("config", "includeIf.gitdir:"+r.dir+"/.path", r.path("agent-if.inc"))
	}
	check := func(t *testing.T) {
		t.Helper()
		ents, _ := os.ReadDir(outside)
		for _, e := range ents {
			t.Errorf("the agent's %s ran", e.Name())
		}
	}

	t.Run("overridden on the command line", func(t *testing.T) {
		r := setup(t)
		commandLine(r)
		if _, err := direct.Status(ctx, r.dir); err != nil {
			t.Fatal(err)
		}
		for _, cached := range []bool{false, true} {
			d, err := direct.Diff(ctx, r.dir, nil, cached)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Files) == 0 {
				t.Error("empty diff")
			}
		}
		if _, err := direct.Commit(ctx, r.dir, "m", nil); err != nil {
			t.Fatal(err)
		}
		check(t)
	})

	t.Run("only through Exec", func(t *testing.T) {
		r := setup(t)
		sandboxOnly(r)
		var calls atomic.Int32
		refuse := Git{Exec: func(context.Context, Call) (*exec.Cmd, error) {
			calls.Add(1)
			return nil, errors.New("no sandbox in this test")
		}}
		if _, err := refuse.Status(ctx, r.dir); err == nil {
			t.Error("Status succeeded without git")
		}
		if _, err := refuse.Diff(ctx, r.dir, nil, false); err == nil {
			t.Error("Diff succeeded without git")
		}
		if _, err := refuse.Commit(ctx, r.dir, "m", nil); err == nil {
			t.Error("Commit succeeded without git")
		}
		if calls.Load() < 3 {
			t.Errorf("Exec asked %d times", calls.Load())
		}
		check(t)
	})
}
