package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// CommitResult describes a new commit, the reply to git_commit.
type CommitResult struct {
	// Hash is the new commit's full hash.
	Hash string
	// Branch is the branch the commit was made on.
	Branch string
	// Summary is the commit message's subject, as git shows it.
	Summary string
	// Status is the repository's status after the commit.
	Status *StatusResult
}

// commitHookNames are the hooks that can refuse a commit.
var commitHookNames = []string{"pre-commit", "prepare-commit-msg", "commit-msg"}

// Commit records a commit on the current branch of the repository
// containing dir, with git's own `git commit`, and returns it with the
// repository's fresh status.
//
// With files nil it commits what is staged, like `git commit`; during a
// merge that concludes the merge. With files (paths relative to the
// repository's top level, taken literally) it commits exactly those paths as
// they are in the working tree, like `git commit --only -- files`:
// modifications, deletions and untracked files that are named are committed,
// anything not named (staged or not, tracked or not) stays out of the commit
// and stays as it was in the index. Naming either path of a rename commits
// both. An empty, non-nil files commits nothing (ErrNothingToCommit): the
// phone sends the files the user ticked, and none ticked must not mean
// "everything staged".
//
// The repository's hooks run as they do for `git commit` (pre-commit,
// prepare-commit-msg, commit-msg, post-commit), so a phone cannot bypass
// checks the developer set up; a hook that refuses the commit yields
// ErrHookFailed, wrapping the hook's output. Author and committer come from
// git as usual: GIT_AUTHOR_*/GIT_COMMITTER_* in the daemon's environment,
// then the repository's, then the global configuration; ErrNoIdentity when
// git has none.
//
// Commit refuses with ErrDetachedHead when HEAD is not on a branch: such a
// commit belongs to no branch, the phone could not show where it went, and
// it is lost (left to garbage collection) as soon as the developer checks out
// a branch; a detached HEAD also means a rebase or bisect is in progress,
// which the developer should finish at the terminal. Other refusals:
// ErrEmptyMessage, ErrNothingToCommit, ErrUnmergedPaths, ErrMergeInProgress
// (named files during a merge, cherry-pick or revert), ErrInvalidPath and ErrPathNotFound for named
// paths. On any error the index, the working tree and the refs are as they
// were before the call (hooks aside: what a failing hook itself changed is its
// own doing).
//
// Commit does not serialise itself with other calls: callers must not run two
// Commits on the same repository at once. git's index lock protects against
// the developer's own git commands, which make Commit fail with ErrGit.
func (g Git) Commit(ctx context.Context, dir, message string, files []string) (*CommitResult, error) {
	if strings.TrimSpace(message) == "" {
		return nil, ErrEmptyMessage
	}
	r, err := g.openRepo(ctx, dir, true)
	if err != nil {
		return nil, err
	}
	paths, err := r.namedPaths(files)
	if err != nil {
		return nil, err
	}
	var (
		wg        sync.WaitGroup
		st        *StatusResult
		errStatus error
		errIdent  [2]error
	)
	wg.Go(func() { st, errStatus = r.status(ctx) })
	for i, v := range []string{"GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"} {
		wg.Go(func() { _, errIdent[i] = r.git(ctx, nil, "var", v) })
	}
	wg.Wait()
	if errStatus != nil {
		return nil, errStatus
	}
	if err := errors.Join(errIdent[:]...); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s", ErrNoIdentity, stderrOf(err))
	}
	if st.Detached {
		return nil, fmt.Errorf("%w: %s", ErrDetachedHead, st.Branch)
	}
	for _, c := range st.Changes {
		if c.Conflicted {
			return nil, fmt.Errorf("%w: %s", ErrUnmergedPaths, c.Path)
		}
	}
	var args, intentToAdd []string
	if files == nil {
		for _, c := range st.Changes {
			if c.Staged && !r.within(c.Path) {
				return nil, fmt.Errorf("%w: staged %q is outside the session's directory %s: name the files to commit", ErrInvalidPath, c.Path, r.prefix)
			}
		}
		// A merge may be concluded with no change against HEAD.
		if !hasStaged(st) && st.State != StateMerging {
			return nil, fmt.Errorf("%w: no staged changes", ErrNothingToCommit)
		}
		args = []string{"commit", "--quiet", "--file=-"}
	} else {
		switch st.State {
		case StateMerging, StateCherryPicking, StateReverting:
			return nil, fmt.Errorf("%w (%s)", ErrMergeInProgress, st.State)
		}
		var only []string
		if only, intentToAdd, err = r.resolveNamed(ctx, st, paths); err != nil {
			return nil, err
		}
		args = append([]string{"commit", "--quiet", "--file=-", "--only", "--"}, literal(only)...)
	}
	if len(intentToAdd) > 0 {
		addArgs := append([]string{"add", "--intent-to-add", "--"}, literal(intentToAdd)...)
		if _, err := r.git(ctx, nil, addArgs...); err != nil {
			return nil, err
		}
	}
	if _, err := r.git(ctx, strings.NewReader(message), args...); err != nil {
		return nil, r.commitFailed(ctx, err, intentToAdd)
	}
	out, err := r.git(ctx, nil, "log", "-1", "--format=%H%n%s", "HEAD")
	if err != nil {
		return nil, err
	}
	hash, summary, _ := strings.Cut(strings.TrimSuffix(string(out), "\n"), "\n")
	after, err := r.status(ctx)
	if err != nil {
		return nil, err
	}
	r.limit(after)
	return &CommitResult{Hash: hash, Branch: st.Branch, Summary: summary, Status: after}, nil
}

// hasStaged reports whether st has a change in the index.
func hasStaged(st *StatusResult) bool {
	for _, c := range st.Changes {
		if c.Staged {
			return true
		}
	}
	return false
}

// resolveNamed checks the paths named for a commit against the status and
// returns the pathspecs for `git commit --only` and the untracked paths that
// must be made known to git first.
func (r *repo) resolveNamed(ctx context.Context, st *StatusResult, paths []string) (only, untracked []string, err error) {
	byPath := make(map[string][]Change)
	for _, c := range st.Changes {
		byPath[c.Path] = append(byPath[c.Path], c)
		if c.Status == StatusRenamed {
			byPath[c.OldPath] = append(byPath[c.OldPath], c)
		}
	}
	seen := make(map[string]bool)
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			only = append(only, p)
		}
	}
	var unknown []string
	for _, p := range paths {
		cs := byPath[p]
		if len(cs) == 0 {
			unknown = append(unknown, p)
			continue
		}
		for _, c := range cs {
			switch c.Status {
			case StatusUntracked:
				if !seen[c.Path] {
					untracked = append(untracked, c.Path)
				}
			case StatusRenamed:
				add(c.OldPath)
			}
			add(c.Path)
		}
	}
	if err := r.checkTracked(ctx, unknown); err != nil {
		return nil, nil, err
	}
	if len(only) == 0 {
		return nil, nil, fmt.Errorf("%w: the named files have no changes", ErrNothingToCommit)
	}
	if st.Head == "" {
		return only, untracked, nil
	}
	// A named file whose working tree copy matches HEAD again (changed in
	// the index, changed back in the working tree) commits nothing.
	diffArgs := append([]string{"diff", "--quiet", "--no-ext-diff", "--no-textconv", "HEAD", "--"}, literal(only)...)
	_, err = r.git(ctx, nil, diffArgs...)
	switch {
	case err == nil && len(untracked) == 0:
		return nil, nil, fmt.Errorf("%w: the named files match HEAD", ErrNothingToCommit)
	case err != nil && exitCode(err) != 1:
		return nil, nil, err
	}
	return only, untracked, nil
}

// checkTracked fails with ErrPathNotFound unless every path is a tracked
// file (one without changes, which a commit of it leaves out).
func (r *repo) checkTracked(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	out, err := r.git(ctx, nil, append([]string{"ls-files", "-z", "--"}, literal(paths)...)...)
	if err != nil {
		return err
	}
	tracked := make(map[string]bool)
	for _, p := range strings.Split(string(out), "\x00") {
		tracked[p] = true
	}
	for _, p := range paths {
		if !tracked[p] {
			return fmt.Errorf("%w: %s", ErrPathNotFound, p)
		}
	}
	return nil
}

// commitFailed undoes the intent-to-add entries Commit made and explains a
// failed `git commit`: every other cause was ruled out before, so with a
// commit hook present the hook refused.
func (r *repo) commitFailed(ctx context.Context, err error, intentToAdd []string) error {
	cleanupCtx := context.WithoutCancel(ctx)
	if len(intentToAdd) > 0 {
		rmArgs := append([]string{"rm", "--cached", "--quiet", "--force", "--"}, literal(intentToAdd)...)
		if _, rmErr := r.git(cleanupCtx, nil, rmArgs...); rmErr != nil {
			return errors.Join(err, fmt.Errorf("gitops: undo intent-to-add: %w", rmErr))
		}
	}
	if ctx.Err() != nil {
		return err
	}
	if hooks := r.commitHooks(cleanupCtx); len(hooks) > 0 {
		return fmt.Errorf("%w (%s): %s", ErrHookFailed, strings.Join(hooks, ", "), stderrOf(err))
	}
	return err
}

// commitHooks lists the executable hooks in commitHookNames that git would
// run, honouring core.hooksPath.
func (r *repo) commitHooks(ctx context.Context) []string {
	out, err := r.git(ctx, nil, "rev-parse", "--git-path", "hooks")
	if err != nil {
		return nil
	}
	dir := strings.TrimSuffix(string(out), "\n")
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(r.top, dir)
	}
	var found []string
	for _, name := range commitHookNames {
		info, err := os.Stat(filepath.Join(dir, name))
		if err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			found = append(found, name)
		}
	}
	return found
}
