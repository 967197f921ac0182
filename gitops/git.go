// Package gitops answers a phone's git questions about one working directory:
// the status of its repository, a structured diff and a commit of chosen files.
//
// Every operation runs the git command-line tool (found on PATH) and parses its
// machine-readable output (`git diff --raw --numstat -z`, `git ls-files -z`,
// `git status --porcelain=v2 -z`, unified patches). The trade-off, chosen deliberately over go-git:
//
//   - Agreement: the answers are git's own, so they match what the developer's
//     terminal shows, including rename detection, .gitignore and
//     .gitattributes handling, submodules, sparse checkouts, the fsmonitor and
//     the untracked cache, and hunk boundaries (Myers with git's indent
//     heuristic), which go-git's own diff does not reproduce exactly.
//   - Speed: go-git's worktree status is known to be slow on large trees;
//     git's own stat-matching against the index (with the fsmonitor and the
//     untracked cache when the developer enabled them) keeps Status and Diff
//     close to the CLI's own time. They run their git processes concurrently.
//   - Cost: Status starts five short-lived processes, Diff three, Commit
//     about a dozen; the machine needs git installed; and the results depend
//     on parsing git's output, whose porcelain v2, numstat and unified patch
//     formats are stable by design.
//
// Commands run from the repository's top-level directory, with the user's git
// configuration but with every setting that changes the shape of the output
// overridden (colour, prefixes, diff algorithm, context lines, renames, pagers,
// external diff drivers, text conversion), and with GIT_OPTIONAL_LOCKS=0 so
// that reading never takes the index lock away from the developer's own git
// commands. Paths in results and arguments are relative to the repository's
// top-level directory, whatever subdirectory dir names, and are taken
// literally (no globbing).
//
// Errors for expected situations are sentinel errors (ErrNotRepository,
// ErrBareRepository, ErrNothingToCommit, …) to be tested with errors.Is; their
// wrapped text may contain git's own messages and local paths, which are meant
// for logs rather than for remote clients.
package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Sentinel errors for the situations a client can cause or fix.
var (
	// ErrNotRepository: the directory is not inside a git working tree.
	ErrNotRepository = errors.New("gitops: not a git repository")
	// ErrBareRepository: the directory is a bare repository, which has no
	// working tree to report on or commit from.
	ErrBareRepository = errors.New("gitops: bare repository has no working tree")
	// ErrUnsafeRepository: git would run, unconfined, something the
	// repository names (its configuration, its hooks), or the repository
	// reaches outside where sessions may work.
	ErrUnsafeRepository = errors.New("gitops: this repository's git cannot run safely here")
	// ErrGitNotInstalled: the git command was not found on PATH.
	ErrGitNotInstalled = errors.New("gitops: git is not installed")
	// ErrInvalidPath: a named path is empty, absolute, leaves the
	// repository's top-level directory or points into .git.
	ErrInvalidPath = errors.New("gitops: invalid path (empty, absolute, outside the repository or in .git)")
	// ErrPathNotFound: a named path is neither a changed path nor a tracked
	// file.
	ErrPathNotFound = errors.New("gitops: no such changed or tracked file")
	// ErrNothingToCommit: the commit would record no change.
	ErrNothingToCommit = errors.New("gitops: nothing to commit")
	// ErrEmptyMessage: the commit message is empty or only white space.
	ErrEmptyMessage = errors.New("gitops: empty commit message")
	// ErrDetachedHead: HEAD is not on a branch, see Commit.
	ErrDetachedHead = errors.New("gitops: HEAD is detached, not on a branch")
	// ErrUnmergedPaths: the index has unresolved merge conflicts.
	ErrUnmergedPaths = errors.New("gitops: unmerged paths, resolve conflicts first")
	// ErrMergeInProgress: a partial commit (named files) was asked for while a
	// merge, cherry-pick or revert is being concluded; git only commits
	// those as a whole.
	ErrMergeInProgress = errors.New("gitops: cannot commit chosen files during a merge, cherry-pick or revert")
	// ErrNoIdentity: git has no author or committer name and e-mail.
	ErrNoIdentity = errors.New("gitops: git author identity unknown (set user.name and user.email)")
	// ErrHookFailed: a pre-commit, prepare-commit-msg or commit-msg hook
	// refused the commit.
	ErrHookFailed = errors.New("gitops: commit hook refused the commit")
	// ErrGit: git failed for a reason not covered by another error.
	ErrGit = errors.New("gitops: git failed")
)

// scrubbedEnv lists environment variables that would redirect git away from
// the directory it is asked about or change the shape of its output.
var scrubbedEnv = map[string]bool{
	"GIT_DIR":                          true,
	"GIT_WORK_TREE":                    true,
	"GIT_INDEX_FILE":                   true,
	"GIT_OBJECT_DIRECTORY":             true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
	"GIT_COMMON_DIR":                   true,
	"GIT_NAMESPACE":                    true,
	"GIT_PREFIX":                       true,
	"GIT_LITERAL_PATHSPECS":            true,
	"GIT_GLOB_PATHSPECS":               true,
	"GIT_NOGLOB_PATHSPECS":             true,
	"GIT_ICASE_PATHSPECS":              true,
	"GIT_EXTERNAL_DIFF":                true,
	"GIT_DIFF_OPTS":                    true,
	"GIT_PAGER":                        true,
	"GIT_EDITOR":                       true,
	"GIT_SEQUENCE_EDITOR":              true,
	"GIT_OPTIONAL_LOCKS":               true,
	"GIT_TERMINAL_PROMPT":              true,
	"GIT_FLUSH":                        true,
	"GIT_ALLOW_PROTOCOL":               true,
	"GIT_SSH":                          true,
	"GIT_SSH_COMMAND":                  true,
	"GIT_ASKPASS":                      true,
}

// gitEnv is the environment git runs with: the daemon's own, minus
// scrubbedEnv, plus settings that keep git non-interactive.
func gitEnv() []string {
	env := make([]string, 0, len(os.Environ())+4)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if scrubbedEnv[name] {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_TERMINAL_PROMPT=0",
		// An empty list allows no transport: gitops never fetches, and a
		// submodule or promisor remote must not reach out either.
		"GIT_ALLOW_PROTOCOL=",
		"GIT_EDITOR=:",
		"GIT_PAGER=cat",
	)
}

// gitConfig overrides settings that change the output gitops parses.
var gitConfig = []string{
	"-c", "color.ui=false",
	"-c", "core.quotePath=true",
	"-c", "diff.noprefix=false",
	"-c", "diff.mnemonicPrefix=false",
	"-c", "diff.suppressBlankEmpty=false",
	"-c", "diff.relative=false",
	"-c", "status.relativePaths=false",
}

// Git runs the git command-line tool for this package's operations. Its
// zero value runs git directly on this machine, which runs whatever the
// repository's configuration and hooks say: only for repositories whose
// content the caller trusts. For a repository an agent could write, Exec
// runs git where that cannot harm (cmd/tether: in the session's sandbox).
type Git struct {
	// Exec makes, without starting it, the command of one git invocation;
	// nil means DirectExec.
	Exec func(ctx context.Context, c Call) (*exec.Cmd, error)
	// Net makes the command of a git invocation that reaches a remote
	// over the network (a push's, a pull's fetch) with the user's own
	// credentials; nil means DirectNetExec. It only ever runs in a
	// repository this package made (see Push), never in the session's.
	Net func(ctx context.Context, c Call) (*exec.Cmd, error)
	// TempDir is where Push and Pull make their own repositories; "" is
	// os.TempDir().
	TempDir string
}

// Call is one git invocation.
type Call struct {
	// Dir is the working directory: the directory asked about, or the
	// repository's top level.
	Dir string
	// Args are git's arguments.
	Args []string
	// Env is the environment git must run with.
	Env []string
	// Write is true when the call may write the repository (a commit's).
	Write bool
	// ReadOnly and Writable are further directories the call reads, or
	// writes: a push's or pull's own repository and a local remote.
	ReadOnly, Writable []string
}

// DirectExec runs git from PATH in c.Dir on this machine.
func DirectExec(ctx context.Context, c Call) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, "git", c.Args...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	// SIGTERM first so that git removes its lock files; SIGKILL if it lingers.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// maxOutput bounds what the daemon reads of one git command's output (and
// of its standard error): a repository an agent wrote can make git print
// without end.
const maxOutput = 64 << 20

// git runs git in dir with args and returns its standard output. A failure is
// returned as an error wrapping ErrGit (or ErrGitNotInstalled) with git's
// standard error text; the exit code is available through exitCode. Output
// beyond maxOutput is an error.
func (g Git) git(ctx context.Context, dir string, write bool, stdin io.Reader, args ...string) ([]byte, error) {
	out, over, err := g.gitCapped(ctx, dir, write, stdin, maxOutput, args...)
	if err == nil && over {
		err = fmt.Errorf("%w: git %s printed more than %d bytes", ErrGit, args[0], maxOutput)
	}
	return out, err
}

// gitCapped is git keeping at most limit bytes of the output; over tells
// that there was more (git runs to its end all the same).
func (g Git) gitCapped(ctx context.Context, dir string, write bool, stdin io.Reader, limit int, args ...string) (out []byte, over bool, err error) {
	return g.run(ctx, Call{Dir: dir, Args: args, Env: gitEnv(), Write: write}, runOpts{stdin: stdin, limit: limit})
}

// runOpts are what one git process reads and how much of its output is
// kept.
type runOpts struct {
	stdin io.Reader
	limit int
	// progress, when set, receives each line (or carriage-return-ended
	// update) git writes to its standard error.
	progress func(string)
	// net runs the call through Net rather than Exec.
	net bool
}

// run starts git for c (its Args without the options this package adds)
// through Exec, or Net, and returns its output.
func (g Git) run(ctx context.Context, c Call, o runOpts) (out []byte, over bool, err error) {
	args := c.Args
	c.Args = append(append([]string{"--no-pager"}, gitConfig...), args...)
	exe := g.Exec
	switch {
	case o.net && g.Net != nil:
		exe = g.Net
	case o.net:
		exe = DirectNetExec
	case exe == nil:
		exe = DirectExec
	}
	cmd, err := exe(ctx, c)
	if err != nil {
		return nil, false, err
	}
	cmd.Stdin = o.stdin
	stdout, stderr := &capped{limit: o.limit}, &capped{limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if o.progress != nil {
		cmd.Stderr = &lineSplitter{w: stderr, line: o.progress}
	}
	err = cmd.Run()
	// Files Exec handed the process (a sandbox's seccomp filter) are the
	// child's now.
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, false, fmt.Errorf("%w: %w", ErrGitNotInstalled, err)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, false, fmt.Errorf("git %s: %w", args[0], ctxErr)
		}
		return stdout.Bytes(), stdout.over, &gitError{args: args, err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.Bytes(), stdout.over, nil
}

// lineSplitter passes what it is written to w, and each line of it, ended
// by a newline or a carriage return (git's progress updates), to line.
type lineSplitter struct {
	w       io.Writer
	line    func(string)
	partial []byte
}

func (s *lineSplitter) Write(p []byte) (int, error) {
	_, _ = s.w.Write(p) // a capped buffer: it takes everything
	for _, b := range p {
		if b != '\n' && b != '\r' {
			if len(s.partial) < 1024 {
				s.partial = append(s.partial, b)
			}
			continue
		}
		if len(s.partial) > 0 {
			s.line(string(s.partial))
			s.partial = s.partial[:0]
		}
	}
	return len(p), nil
}

// capped keeps the first limit bytes written to it and drops the rest.
type capped struct {
	bytes.Buffer
	limit int
	over  bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.limit - c.Len(); room < len(p) {
		c.over = true
		c.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

// gitError is a failed git command.
type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	msg := fmt.Sprintf("%v: git %s: %v", ErrGit, e.args[0], e.err)
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}

func (e *gitError) Unwrap() []error { return []error{ErrGit, e.err} }

// exitCode returns git's exit code in err, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// stderrOf returns the standard error text of a failed git command in err.
func stderrOf(err error) string {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.stderr
	}
	return ""
}

// repo is a non-bare repository's working tree.
type repo struct {
	g     Git
	write bool   // its calls may write (a commit's)
	top   string // absolute top-level directory of the working tree
	// prefix is the directory asked about, relative to top in git's form;
	// "" for top itself. Results stay inside it.
	prefix string
	gitDir string // absolute git directory (per worktree for linked worktrees)
}

// git runs git in the repository's top level.
func (r *repo) git(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	return r.g.git(ctx, r.top, r.write, stdin, args...)
}

// openRepo finds the repository dir belongs to; write marks its calls as
// ones that may write it.
func (g Git) openRepo(ctx context.Context, dir string, write bool) (*repo, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory", ErrNotRepository)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRepository, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNotRepository, dir)
	}
	out, err := g.git(ctx, dir, false, nil, "rev-parse", "--is-bare-repository", "--absolute-git-dir", "--show-toplevel")
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 0 && lines[0] == "true" {
		return nil, fmt.Errorf("%w: %s", ErrBareRepository, dir)
	}
	if err != nil {
		if exitCode(err) == 128 {
			return nil, fmt.Errorf("%w: %s: %s", ErrNotRepository, dir, stderrOf(err))
		}
		return nil, err
	}
	if len(lines) != 3 || lines[1] == "" || lines[2] == "" {
		return nil, fmt.Errorf("%w: unexpected rev-parse output %q", ErrGit, out)
	}
	top := filepath.Clean(lines[2])
	// The directory asked about must lie in the working tree: a
	// core.worktree (or GIT_WORK_TREE) that points elsewhere would have
	// this package read and report another directory.
	if !inside(realOrSelf(dir), realOrSelf(top)) {
		return nil, fmt.Errorf("%w: its working tree %s does not contain %s", ErrUnsafeRepository, top, dir)
	}
	return &repo{g: g, write: write, top: top, prefix: prefixOf(top, dir), gitDir: filepath.Clean(lines[1])}, nil
}

// prefixOf is dir relative to top in git's form, "" for top itself.
func prefixOf(top, dir string) string {
	prefix, _ := filepath.Rel(realOrSelf(top), realOrSelf(dir))
	if prefix = filepath.ToSlash(prefix); prefix == "." {
		prefix = ""
	}
	return prefix
}

// openRepoAnd opens the repository dir belongs to and runs ask on it,
// without waiting for git to confirm the repository first: ask starts at
// once in the top level Locate finds (where git's is, unless the
// configuration puts the working tree elsewhere) while openRepo's
// rev-parse runs, which saves a process start (a sandbox's) on the way.
// openRepo's error comes first; when git's top level is another
// directory, ask runs again there. ask must use only the repository's top
// level, prefix and git directory (Locate's, compared with git's after).
func openRepoAnd[T any](ctx context.Context, g Git, dir string, ask func(*repo, context.Context) (T, error)) (*repo, T, error) {
	var zero T
	loc, ok, err := Locate(dir)
	if err != nil || !ok {
		r, err := g.openRepo(ctx, dir, false)
		if err != nil {
			return nil, zero, err
		}
		v, err := ask(r, ctx)
		return r, v, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		r       *repo
		errOpen error
		opened  = make(chan struct{})
	)
	go func() {
		defer close(opened)
		if r, errOpen = g.openRepo(ctx, dir, false); errOpen != nil {
			cancel()
		}
	}()
	guess := &repo{g: g, top: loc.Top, prefix: prefixOf(loc.Top, dir), gitDir: loc.GitDir}
	v, err := ask(guess, ctx)
	<-opened
	switch {
	case errOpen != nil:
		return nil, zero, errOpen
	case realOrSelf(r.top) != loc.Top || r.prefix != guess.prefix || realOrSelf(r.gitDir) != loc.GitDir:
		v, err = ask(r, ctx)
	}
	return r, v, err
}

// within reports whether a repository-relative path lies in the directory
// asked about.
func (r *repo) within(path string) bool {
	return r.prefix == "" || path == r.prefix || strings.HasPrefix(path, r.prefix+"/")
}

// namedPaths checks paths a client named: clean, and inside the directory
// asked about (ErrInvalidPath otherwise). Nil stays nil.
func (r *repo) namedPaths(files []string) ([]string, error) {
	if files == nil {
		return nil, nil
	}
	paths, err := cleanPaths(files)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if !r.within(p) {
			return nil, fmt.Errorf("%w: %q is outside the session's directory %s", ErrInvalidPath, p, r.prefix)
		}
	}
	return paths, nil
}

// realOrSelf resolves symbolic links in p, or returns p.
func realOrSelf(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return p
}

// inside reports whether p is dir or lies below it.
func inside(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel)
}

// literal turns repository-relative paths into literal pathspecs, so that
// names with glob characters match only themselves. The magic is per
// pathspec so that it does not leak into hooks through the environment.
func literal(paths []string) []string {
	specs := make([]string, len(paths))
	for i, p := range paths {
		specs[i] = ":(literal)" + p
	}
	return specs
}

// cleanPath checks a path named by a client and returns it relative to the
// repository's top level, in git's slash-separated form.
func cleanPath(p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: %q", ErrInvalidPath, p)
	}
	if filepath.IsAbs(p) || !filepath.IsLocal(p) {
		return "", fmt.Errorf("%w: %q", ErrInvalidPath, p)
	}
	c := filepath.ToSlash(filepath.Clean(p))
	if c == "." || c == ".git" || strings.HasPrefix(c, ".git/") {
		return "", fmt.Errorf("%w: %q", ErrInvalidPath, p)
	}
	return c, nil
}

// cleanPaths applies cleanPath to each path and drops duplicates.
func cleanPaths(paths []string) ([]string, error) {
	seen := make(map[string]bool, len(paths))
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		c, err := cleanPath(p)
		if err != nil {
			return nil, err
		}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out, nil
}
