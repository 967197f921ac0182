package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tetherdev/tether/gitops"
	"github.com/tetherdev/tether/sandbox"
)

// sessionGit is the git the daemon runs for sessions' working directories,
// which agents write, .git included. Every call runs in a sandbox of its
// own (sandbox.Command): the repository read-only (read-write for a
// commit), a copy of the user's git configuration with only identity and
// what shapes status and diff (userGitConfig), the data directory
// hidden, no network, no Unix sockets, only git's environment. So whatever
// the repository's configuration, hooks or attributes make git run (an
// fsmonitor, a filter, a diff driver, a hook, an include the agent wrote)
// runs there, with no more reach than the agent itself has, never as the
// daemon. Without bubblewrap git runs directly, and then only for
// repositories whose configuration sets nothing that runs a command
// (directGuard).
func sessionGit(cfg *config, caps *sandbox.Capabilities, home string) *gitops.Git {
	private := filepath.Join(os.TempDir(), fmt.Sprintf("tether-%d", os.Getuid()))
	userConfig := &userGitConfig{home: home, dir: filepath.Join(private, "git")}
	// Push and pull make their repositories (gitops.Git.Net, the default,
	// runs git there on this machine with the user's credentials) next to
	// the configuration's copy.
	return &gitops.Git{TempDir: filepath.Join(private, "remote"), Exec: func(ctx context.Context, c gitops.Call) (*exec.Cmd, error) {
		gitConfig, gitFiles, err := userConfig.file()
		if err != nil {
			return nil, err
		}
		paths, err := repoPaths(c.Dir)
		if err != nil {
			return nil, err
		}
		for _, p := range paths[1:] {
			if !underAnyRoot(p, cfg.Roots) || underAnyRoot(p, []string{cfg.DataDir}) {
				return nil, fmt.Errorf("%w: its git directory %s lies outside the session roots", gitops.ErrUnsafeRepository, p)
			}
		}
		spec := sandbox.CommandSpec{
			Dir:          c.Dir,
			ReadOnly:     append([]string{gitConfig}, gitFiles...),
			Hide:         []string{cfg.DataDir},
			Env:          append(gitSandboxEnv(c.Env, home), "GIT_CONFIG_GLOBAL="+gitConfig),
			Capabilities: caps,
		}
		// The further directories of a push or pull: the daemon's own
		// shadow repository, the session's repository, a remote on this
		// machine. The remote's path is the agent's to write (its URL): it
		// must lie in the roots, as the session does, or a pull would bring
		// any of the user's repositories into the agent's reach, and a
		// push write into it.
		var beyond bool
		for _, p := range append(slices.Clone(c.ReadOnly), c.Writable...) {
			switch {
			case underAnyRoot(p, []string{private}):
			case !underAnyRoot(p, cfg.Roots) || underAnyRoot(p, []string{cfg.DataDir}) || underAnyRoot(cfg.DataDir, []string{p}):
				return nil, fmt.Errorf("%w: %s lies outside the session roots", gitops.ErrUnsafeRemote, p)
			default:
				beyond = beyond || !slices.ContainsFunc(paths, func(q string) bool { return underAnyRoot(p, []string{q}) })
			}
		}
		spec.ReadOnly = append(spec.ReadOnly, c.ReadOnly...)
		spec.Writable = c.Writable
		if c.Write {
			spec.Writable = append(spec.Writable, paths...)
		} else {
			spec.ReadOnly = append(spec.ReadOnly, paths...)
		}
		cmd, isolated, err := sandbox.Command(ctx, spec, append([]string{"git"}, c.Args...))
		if err != nil {
			return nil, err
		}
		switch {
		case isolated:
		case len(c.Writable) > 0 || beyond:
			// Without a sandbox a remote on this machine would run its
			// own hooks and configuration as the daemon.
			return nil, fmt.Errorf("%w: without bubblewrap, a remote on this machine is not reached", gitops.ErrUnsafeRemote)
		case underAnyRoot(c.Dir, []string{private}):
			// The daemon's own shadow repository: its configuration is
			// the daemon's.
		default:
			if err := directGuard(ctx, c, paths); err != nil {
				return nil, err
			}
		}
		return cmd, nil
	}}
}

// repoPaths is what git needs of the repository dir belongs to: its top
// level, then the git directory and common directory a .git file names (a
// linked worktree's, a submodule's) when they lie outside the top level.
// Without a repository it is dir alone, and git says so.
func repoPaths(dir string) ([]string, error) {
	loc, ok, err := gitops.Locate(dir)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return []string{dir}, nil
	}
	paths := []string{loc.Top}
	for _, p := range []string{loc.GitDir, loc.CommonDir} {
		if p != "" && !underAnyRoot(p, paths[:1]) && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// gitSandboxEnv is the environment of git in its sandbox: the locale, PATH
// and git's own variables of env, HOME, and nothing else of the daemon's
// (no agent keys, no tokens).
func gitSandboxEnv(env []string, home string) []string {
	out := []string{"HOME=" + home}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_CONFIG") {
			continue // the sandbox's git reads only the copy it is given
		}
		if name == "PATH" || name == "LANG" || name == "TZ" || name == "XDG_CONFIG_HOME" || strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "GIT_") {
			out = append(out, kv)
		}
	}
	return out
}

// safeDirectKeys are the repository-level configuration keys (of
// .git/config, config.worktree and the files they include) that make git
// run nothing: without a sandbox, a repository that sets any other key is
// refused. An allow-list, because git has hundreds of keys and adds more,
// and many run commands (core.fsmonitor, core.hooksPath, core.pager,
// core.sshCommand, diff.external, filter.*, credential.helper, alias.*,
// include paths …). Patterns: "*" stands for one subsection name.
var safeDirectKeys = []string{
	"core.repositoryformatversion", "core.bare", "core.filemode", "core.logallrefupdates",
	"core.ignorecase", "core.precomposeunicode", "core.symlinks", "core.autocrlf", "core.eol",
	"core.safecrlf", "core.quotepath", "core.untrackedcache", "core.splitindex", "core.commitgraph",
	"core.sparsecheckout", "core.sparsecheckoutcone",
	"extensions.objectformat", "extensions.worktreeconfig", "extensions.refstorage",
	"extensions.preciousobjects", "extensions.partialclone",
	"remote.*.url", "remote.*.pushurl", "remote.*.fetch", "remote.*.push", "remote.*.tagopt",
	"remote.*.prune", "remote.*.mirror", "remote.*.promisor", "remote.*.partialclonefilter",
	"branch.*.remote", "branch.*.merge", "branch.*.rebase", "branch.*.pushremote", "branch.*.description",
	"user.name", "user.email", "user.useconfigonly",
	"init.defaultbranch", "index.version", "index.skiphash", "feature.manyfiles", "gc.auto",
	"pull.rebase", "pull.ff", "push.default", "push.autosetupremote", "fetch.prune",
	"submodule.active", "submodule.*.url", "submodule.*.active", "submodule.*.branch",
	"lfs.repositoryformatversion", "maintenance.auto", "maintenance.strategy",
}

// directGuard is the check of a git call that runs without a sandbox: the
// repository's own configuration must be in safeDirectKeys, and a commit
// must find no hook to run.
func directGuard(ctx context.Context, c gitops.Call, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	// `git config` reads configuration and runs nothing it names. Every
	// scope is listed and the repository's are kept: "local" (.git/config
	// and what it includes, active or not) and "worktree" (config.worktree,
	// which --local leaves out). With -z, scope and key are NUL-separated.
	cmd := exec.CommandContext(ctx, "git", "config", "--list", "--includes", "--show-scope", "--name-only", "-z")
	cmd.Dir, cmd.Env = c.Dir, c.Env
	out, err := cmd.Output()
	switch {
	case err == nil, isExit(err, 1): // 1: no key at all
	case errors.Is(err, exec.ErrNotFound):
		// git itself reports it for the real call.
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		// Outside a repository `git config --list` succeeds: a failure is
		// a configuration git cannot read (a bad key, a core.worktree
		// that is not a directory), which is refused rather than trusted.
		return fmt.Errorf("%w: its configuration cannot be read: %w", gitops.ErrUnsafeRepository, err)
	}
	fields := bytes.Split(out, []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		scope, key := string(fields[i]), string(fields[i+1])
		if (scope == "local" || scope == "worktree") && !safeKey(key) {
			return fmt.Errorf("%w: the repository's configuration sets %s, and without bubblewrap git would run it as the daemon", gitops.ErrUnsafeRepository, key)
		}
	}
	if c.Write {
		if hook := firstHook(paths); hook != "" {
			return fmt.Errorf("%w: a commit would run the hook %s, and without bubblewrap it would run as the daemon", gitops.ErrUnsafeRepository, hook)
		}
	}
	return nil
}

// safeKey reports whether key (lower-cased section and name, as `git
// config --list` prints them) matches safeDirectKeys.
func safeKey(key string) bool {
	key = strings.ToLower(key)
	for _, pat := range safeDirectKeys {
		if pat == key {
			return true
		}
		if before, after, ok := strings.Cut(pat, ".*."); ok {
			if rest, ok := strings.CutPrefix(key, before+"."); ok && strings.HasSuffix(rest, "."+after) && len(rest) > len(after)+1 {
				return true
			}
		}
	}
	return false
}

// firstHook names an executable hook in the repository's git directories.
func firstHook(paths []string) string {
	for _, p := range paths {
		for _, dir := range []string{filepath.Join(p, ".git", "hooks"), filepath.Join(p, "hooks")} {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".sample") {
					continue
				}
				if info, err := e.Info(); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
					return filepath.Join(dir, e.Name())
				}
			}
		}
	}
	return ""
}

func isExit(err error, code int) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}

// existing are those of paths that exist.
func existing(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func xdgConfigHome(home string) string {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return x
	}
	return filepath.Join(home, ".config")
}

// underAnyRoot reports whether p is one of roots or lies below one.
func underAnyRoot(p string, roots []string) bool {
	for _, r := range roots {
		if rel, err := filepath.Rel(r, p); err == nil && filepath.IsLocal(rel) {
			return true
		}
	}
	return false
}
