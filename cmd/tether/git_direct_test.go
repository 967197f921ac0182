package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tetherdev/tether/gitops"
)

// placeholder matches what `git help --config` writes for a name to fill in.
var placeholder = regexp.MustCompile(`<[^>]*>`)

// TestDirectModeRefusesEveryDocumentedKey proves the allow-list: of every
// configuration key git documents (`git help --config`, placeholders
// filled in), only those of safeDirectKeys are let through without a
// sandbox, and none of those runs a command; then each refused key is
// written in a real repository's configuration and the guard, which asks
// git, refuses it (-short skips that part).
func TestDirectModeRefusesEveryDocumentedKey(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("git", "help", "--config").Output()
	if err != nil {
		t.Fatalf("git help --config: %v", err)
	}
	runs := []string{"core.fsmonitor", "core.hookspath", "core.pager", "core.sshcommand", "core.editor", "core.askpass",
		"diff.external", "filter.x.clean", "filter.x.smudge", "filter.x.process", "diff.x.textconv", "diff.x.command",
		"merge.x.driver", "credential.helper", "alias.x", "include.path", "includeif.gitdir:/x.path", "sequence.editor",
		"gpg.program", "pager.status", "uploadpack.packobjectshook", "protocol.allow", "http.proxy", "core.worktree"}
	documented := strings.Fields(string(out))
	var allowed, refused int
	var refusedKeys []string
	for _, key := range append(documented, runs...) {
		key = placeholder.ReplaceAllString(key, "x")
		key = strings.NewReplacer("<name>", "x", "<remote>", "x", "<driver>", "x", "<url>", "x", "<command>", "x",
			"<tool>", "x", "<branch>", "x", "<subsection>", "x", "<pattern>", "x", "<path>", "x", "*", "x").Replace(key)
		if safeKey(key) {
			allowed++
			for _, bad := range runs {
				if strings.EqualFold(key, bad) {
					t.Errorf("%s runs a command but is allowed", key)
				}
			}
			continue
		}
		refused++
		refusedKeys = append(refusedKeys, key)
	}
	if testing.Short() {
		t.Logf("-short: %d keys refused by the allow-list, not each tried in a repository", refused)
	} else {
		guardRefusesEach(t, refusedKeys)
	}
	if allowed == 0 || refused < 800 {
		t.Fatalf("allowed %d, refused %d of git's documented keys", allowed, refused)
	}
	t.Logf("of %d documented keys, %d are allowed without a sandbox", len(documented), allowed)
}

// guardRefusesEach writes each key, with a value, in a real repository's
// .git/config and runs the direct-mode guard on it: each must be refused.
func guardRefusesEach(t *testing.T, keys []string) {
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	cfg := filepath.Join(dir, ".git", "config")
	base, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := repoPaths(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		first, last := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
		if first <= 0 || last == len(key)-1 {
			continue // not a key git could read ("alias.x" style only)
		}
		section := "[" + key[:first] + "]"
		if first != last {
			section = "[" + key[:first] + " \"" + key[first+1:last] + "\"]"
		}
		entry := section + "\n\t" + key[last+1:] + " = x\n"
		if err := os.WriteFile(cfg, append(append([]byte{}, base...), entry...), 0o644); err != nil {
			t.Fatal(err)
		}
		err := directGuard(context.Background(), gitops.Call{Dir: dir, Env: os.Environ()}, paths)
		if !errors.Is(err, gitops.ErrUnsafeRepository) {
			t.Errorf("%s set by the repository: %v, want ErrUnsafeRepository", key, err)
		}
	}
}

// TestDirectGuard runs the guard on real repositories: a safe one passes;
// one whose configuration (or a file it includes) names a command, and a
// commit with a hook to run, are refused with ErrUnsafeRepository.
func TestDirectGuard(t *testing.T) {
	t.Parallel()
	repo := func(t *testing.T) string {
		dir := t.TempDir()
		gitIn(t, dir, "init", "-q", "-b", "main")
		gitIn(t, dir, "config", "user.name", "A")
		gitIn(t, dir, "config", "remote.origin.url", "https://example.com/r.git")
		return dir
	}
	call := func(dir string, write bool) error {
		paths, err := repoPaths(dir)
		if err != nil {
			t.Fatal(err)
		}
		return directGuard(context.Background(), gitops.Call{Dir: dir, Env: os.Environ(), Write: write}, paths)
	}
	safe := repo(t)
	if err := call(safe, true); err != nil {
		t.Fatalf("a safe repository: %v", err)
	}
	fsmon := repo(t)
	gitIn(t, fsmon, "config", "core.fsmonitor", "touch /tmp/owned")
	included := repo(t)
	os.WriteFile(filepath.Join(included, "evil.cfg"), []byte("[diff]\n\texternal = touch /tmp/owned\n"), 0o644)
	gitIn(t, included, "config", "include.path", "../evil.cfg")
	includeIf := repo(t)
	os.WriteFile(filepath.Join(includeIf, "evil-if.cfg"), []byte("[core]\n\tpager = touch /tmp/owned\n"), 0o644)
	gitIn(t, includeIf, "config", "includeIf.gitdir:"+includeIf+"/.path", filepath.Join(includeIf, "evil-if.cfg"))
	inactive := repo(t)
	gitIn(t, inactive, "config", "includeIf.onbranch:elsewhere.path", "evil.cfg")
	worktree := repo(t)
	gitIn(t, worktree, "config", "extensions.worktreeConfig", "true")
	gitIn(t, worktree, "config", "--worktree", "core.fsmonitor", "touch /tmp/owned")
	hooked := repo(t)
	os.WriteFile(filepath.Join(hooked, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\ntouch /tmp/owned\n"), 0o755)
	for name, tt := range map[string]struct {
		dir   string
		write bool
	}{"fsmonitor": {fsmon, false}, "include": {included, false}, "includeIf": {includeIf, false},
		"includeIf not active now": {inactive, false}, "worktree configuration": {worktree, false}, "hook on commit": {hooked, true}} {
		if err := call(tt.dir, tt.write); !errors.Is(err, gitops.ErrUnsafeRepository) {
			t.Errorf("%s: %v, want ErrUnsafeRepository", name, err)
		}
	}
	if err := call(hooked, false); err != nil {
		t.Errorf("a hook does not matter for reading: %v", err)
	}
}
