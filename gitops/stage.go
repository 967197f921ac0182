package gitops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Errors of staging and discarding.
var (
	// ErrChanged: the file is not as the client showed it (its
	// fingerprint differs); nothing was changed. Show the diff again.
	ErrChanged = errors.New("gitops: the file changed since its diff was shown; refresh and try again")
	// ErrNoChange: the named file has no change of the kind asked about
	// (nothing unstaged to stage or discard, nothing staged to unstage).
	ErrNoChange = errors.New("gitops: the file has no such change")
	// ErrNoHunk: the hunk index is not one of the file's hunks.
	ErrNoHunk = errors.New("gitops: no such hunk")
	// ErrHunkUnsupported: the file's change cannot be taken hunk by hunk
	// (binary, cut, a rename, a change of kind, a submodule, a conflict);
	// stage, unstage or discard the whole file.
	ErrHunkUnsupported = errors.New("gitops: this change cannot be split into hunks; use the whole file")
)

// DiscardKeep is how long the content Discard throws away stays
// recoverable under refs/tether/discarded/.
const DiscardKeep = 30 * 24 * time.Hour

// discardRefs is the namespace of the refs that keep discarded content.
const discardRefs = "refs/tether/discarded/"

// HunkRef names one hunk of one file's diff as a client showed it.
type HunkRef struct {
	// Path is the file's path, relative to the repository's top level.
	Path string
	// Fingerprint is FileDiff.Fingerprint of the diff shown.
	Fingerprint string
	// Hunk is the hunk's index in FileDiff.Hunks.
	Hunk int
}

// Stage adds the named files' working-tree state to the index, as `git
// add --all -- files` does: modifications, deletions and untracked files.
// It returns the fresh status.
func (g Git) Stage(ctx context.Context, dir string, files []string) (*StatusResult, error) {
	return g.pathsOp(ctx, dir, files, "add", "--all", "--")
}

// Unstage puts the named files' index entries back to HEAD's (removes
// them from the index on a branch with no commit yet), as `git reset --
// files` does; the working tree is not touched.
func (g Git) Unstage(ctx context.Context, dir string, files []string) (*StatusResult, error) {
	return g.pathsOp(ctx, dir, files, "reset", "--quiet", "--")
}

func (g Git) pathsOp(ctx context.Context, dir string, files []string, args ...string) (*StatusResult, error) {
	r, err := g.openRepo(ctx, dir, true)
	if err != nil {
		return nil, err
	}
	paths, err := r.namedPaths(files)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no file named", ErrInvalidPath)
	}
	if _, err := r.git(ctx, nil, append(args, literal(paths)...)...); err != nil {
		if strings.Contains(stderrOf(err), "did not match any file") {
			return nil, fmt.Errorf("%w: %w", ErrPathNotFound, err)
		}
		return nil, lockError(err)
	}
	return r.limitedStatus(ctx)
}

// StageHunk adds one hunk of a file's unstaged diff to the index;
// UnstageHunk takes one hunk of its staged diff out of the index. The
// rest of the file stays as it was. Both refuse with ErrChanged when the
// file's diff is no longer the one shown.
func (g Git) StageHunk(ctx context.Context, dir string, h HunkRef) (*StatusResult, error) {
	return g.hunkOp(ctx, dir, h, false, "--cached")
}

// UnstageHunk: see StageHunk.
func (g Git) UnstageHunk(ctx context.Context, dir string, h HunkRef) (*StatusResult, error) {
	return g.hunkOp(ctx, dir, h, true, "--cached", "--reverse")
}

func (g Git) hunkOp(ctx context.Context, dir string, h HunkRef, cached bool, applyArgs ...string) (*StatusResult, error) {
	r, err := g.openRepo(ctx, dir, true)
	if err != nil {
		return nil, err
	}
	fd, err := r.shownDiff(ctx, h.Path, h.Fingerprint, cached)
	if err != nil {
		return nil, err
	}
	patch, err := hunkPatch(fd, h.Hunk)
	if err != nil {
		return nil, err
	}
	if err := r.apply(ctx, patch, applyArgs...); err != nil {
		return nil, err
	}
	return r.limitedStatus(ctx)
}

// shownDiff is the one diff of path (unstaged, or with cached staged), if
// its fingerprint is the one shown.
func (r *repo) shownDiff(ctx context.Context, path, fp string, cached bool) (FileDiff, error) {
	paths, err := r.namedPaths([]string{path})
	if err != nil {
		return FileDiff{}, err
	}
	res, err := r.diff(ctx, paths, cached)
	if err != nil {
		return FileDiff{}, err
	}
	for _, fd := range res.Files {
		if fd.Path == paths[0] || fd.OldPath == paths[0] {
			if fd.Fingerprint != fp {
				return FileDiff{}, fmt.Errorf("%w: %s", ErrChanged, path)
			}
			return fd, nil
		}
	}
	return FileDiff{}, fmt.Errorf("%w: %s", ErrNoChange, path)
}

// apply runs git apply on patch with args; a patch that no longer applies
// means the file changed meanwhile.
func (r *repo) apply(ctx context.Context, patch string, args ...string) error {
	args = append([]string{"apply", "--whitespace=nowarn", "--recount"}, args...)
	if _, err := r.git(ctx, strings.NewReader(patch), append(args, "-")...); err != nil {
		if msg := stderrOf(err); strings.Contains(msg, "patch does not apply") || strings.Contains(msg, "does not exist in index") ||
			strings.Contains(msg, "already exists") || strings.Contains(msg, "does not match index") {
			return fmt.Errorf("%w: %w", ErrChanged, err)
		}
		return lockError(err)
	}
	return nil
}

// hunkPatch is a patch of fd's hunk i alone, for git apply.
func hunkPatch(fd FileDiff, i int) (string, error) {
	if fd.Binary || fd.Truncated || fd.TypeChanged || fd.Conflicted || fd.Path != fd.OldPath ||
		fd.OldMode == "160000" || fd.NewMode == "160000" {
		return "", fmt.Errorf("%w: %s", ErrHunkUnsupported, fd.Path)
	}
	if i < 0 || i >= len(fd.Hunks) {
		return "", fmt.Errorf("%w: %d of %d", ErrNoHunk, i, len(fd.Hunks))
	}
	var b strings.Builder
	a, z := cQuote("a/"+fd.Path), cQuote("b/"+fd.Path)
	fmt.Fprintf(&b, "diff --git %s %s\n", a, z)
	switch fd.Status {
	case StatusAdded, StatusUntracked:
		fmt.Fprintf(&b, "new file mode %s\n--- /dev/null\n+++ %s\n", fd.NewMode, z)
	case StatusDeleted:
		fmt.Fprintf(&b, "deleted file mode %s\n--- %s\n+++ /dev/null\n", fd.OldMode, a)
	default:
		fmt.Fprintf(&b, "--- %s\n+++ %s\n", a, z)
	}
	h := fd.Hunks[i]
	b.WriteString(hunkHeader(h) + "\n")
	for _, l := range h.Lines {
		switch l.Type {
		case LineAdded:
			b.WriteByte('+')
		case LineRemoved:
			b.WriteByte('-')
		default:
			b.WriteByte(' ')
		}
		b.WriteString(l.Content + "\n")
		if l.NoNewline {
			b.WriteString("\\ No newline at end of file\n")
		}
	}
	return b.String(), nil
}

// cQuote writes s as a double-quoted, C-style escaped name, which git
// apply reads whatever s holds.
func cQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Discarded tells where discarded content can be recovered from.
type Discarded struct {
	// Ref holds a commit whose tree has the discarded files as they were
	// in the working tree; "" when nothing needed keeping (a file restored
	// from a deletion). `git restore --source=REF -- FILE` brings one back.
	Ref  string
	Hash string
	// Until is when the ref is deleted (the next Discard after it).
	Until time.Time
}

// Discard throws away the unstaged changes of the named files: a tracked
// file goes back to its staged (index) state, an untracked one is deleted.
// Each file must be given with the fingerprint of the unstaged diff the
// user saw (ErrChanged otherwise); staged changes stay. The working-tree
// content is first kept under refs/tether/discarded/ for DiscardKeep.
func (g Git) Discard(ctx context.Context, dir string, fingerprints map[string]string) (*Discarded, *StatusResult, error) {
	if len(fingerprints) == 0 {
		return nil, nil, fmt.Errorf("%w: no file named", ErrInvalidPath)
	}
	r, err := g.openRepo(ctx, dir, true)
	if err != nil {
		return nil, nil, err
	}
	var tracked, untracked []string
	for path, fp := range fingerprints {
		fd, err := r.shownDiff(ctx, path, fp, false)
		if err != nil {
			return nil, nil, err
		}
		if fd.Conflicted {
			return nil, nil, fmt.Errorf("%w: %s", ErrUnmergedPaths, path)
		}
		if fd.Status == StatusUntracked {
			untracked = append(untracked, fd.Path)
		} else {
			tracked = append(tracked, fd.Path)
		}
	}
	kept, err := r.keep(ctx, append(tracked, untracked...), "discarded "+strconv.Itoa(len(fingerprints))+" file(s)")
	if err != nil {
		return nil, nil, err
	}
	if len(tracked) > 0 {
		if _, err := r.git(ctx, nil, append([]string{"checkout", "--quiet", "--"}, literal(tracked)...)...); err != nil {
			return nil, nil, lockError(err)
		}
	}
	if len(untracked) > 0 {
		if _, err := r.git(ctx, nil, append([]string{"clean", "--quiet", "--force", "--"}, literal(untracked)...)...); err != nil {
			return nil, nil, lockError(err)
		}
	}
	st, err := r.limitedStatus(ctx)
	return kept, st, err
}

// DiscardHunk throws away one hunk of a file's unstaged changes (for an
// untracked file, its one hunk is the whole file, which is deleted), after
// keeping the file's working-tree content as Discard does.
func (g Git) DiscardHunk(ctx context.Context, dir string, h HunkRef) (*Discarded, *StatusResult, error) {
	r, err := g.openRepo(ctx, dir, true)
	if err != nil {
		return nil, nil, err
	}
	fd, err := r.shownDiff(ctx, h.Path, h.Fingerprint, false)
	if err != nil {
		return nil, nil, err
	}
	patch, err := hunkPatch(fd, h.Hunk)
	if err != nil {
		return nil, nil, err
	}
	kept, err := r.keep(ctx, []string{fd.Path}, "discarded hunk "+strconv.Itoa(h.Hunk+1)+" of "+fd.Path)
	if err != nil {
		return nil, nil, err
	}
	if fd.Status == StatusUntracked {
		_, err = r.git(ctx, nil, "clean", "--quiet", "--force", "--", literal([]string{fd.Path})[0])
		err = lockError(err)
	} else {
		err = r.apply(ctx, patch, "--reverse")
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := r.limitedStatus(ctx)
	return kept, st, err
}

// keep records the working-tree content of paths (those that exist) in a
// commit under refs/tether/discarded/, through an index of its own, and
// deletes the refs older than DiscardKeep.
func (r *repo) keep(ctx context.Context, paths []string, subject string) (*Discarded, error) {
	var present []string
	root, err := os.OpenRoot(r.top)
	if err != nil {
		return nil, fmt.Errorf("gitops: %w", err)
	}
	for _, p := range paths {
		if _, err := root.Lstat(filepath.FromSlash(p)); err == nil {
			present = append(present, p)
		}
	}
	root.Close()
	r.pruneDiscarded(ctx)
	if len(present) == 0 {
		return &Discarded{}, nil
	}
	var id [4]byte
	rand.Read(id[:])
	index := filepath.Join(r.gitDir, "tether-discard-"+hex.EncodeToString(id[:])+".index")
	defer os.Remove(index)
	env := []string{"GIT_INDEX_FILE=" + index}
	if _, err := r.gitWith(ctx, env, nil, append([]string{"update-index", "--add", "--"}, present...)...); err != nil {
		return nil, lockError(err)
	}
	tree, err := r.gitWith(ctx, env, nil, "write-tree")
	if err != nil {
		return nil, err
	}
	args := []string{"commit-tree", strings.TrimSpace(string(tree)), "-m", "tether: " + subject}
	if head, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", "HEAD"); err == nil {
		args = append(args, "-p", strings.TrimSpace(string(head)))
	}
	now := time.Now()
	identity := []string{"GIT_AUTHOR_NAME=tether", "GIT_AUTHOR_EMAIL=tether@localhost",
		"GIT_COMMITTER_NAME=tether", "GIT_COMMITTER_EMAIL=tether@localhost"}
	commit, err := r.gitWith(ctx, identity, nil, args...)
	if err != nil {
		return nil, err
	}
	d := &Discarded{
		Ref:   discardRefs + strconv.FormatInt(now.Unix(), 10) + "-" + hex.EncodeToString(id[:]),
		Hash:  strings.TrimSpace(string(commit)),
		Until: now.Add(DiscardKeep).UTC().Truncate(time.Second),
	}
	if _, err := r.git(ctx, nil, "update-ref", "-m", "tether: "+subject, d.Ref, d.Hash, ""); err != nil {
		return nil, lockError(err)
	}
	return d, nil
}

// pruneDiscarded deletes the refs of discarded content older than
// DiscardKeep (their names start with the Unix time they were made). A
// failure leaves them for the next time.
func (r *repo) pruneDiscarded(ctx context.Context) {
	out, err := r.git(ctx, nil, "for-each-ref", "--format=%(refname)", discardRefs)
	if err != nil {
		return
	}
	var del strings.Builder
	cutoff := time.Now().Add(-DiscardKeep).Unix()
	for ref := range strings.Lines(string(out)) {
		ref = strings.TrimSpace(ref)
		stamp, _, _ := strings.Cut(strings.TrimPrefix(ref, discardRefs), "-")
		if t, err := strconv.ParseInt(stamp, 10, 64); err == nil && t < cutoff {
			fmt.Fprintf(&del, "delete %s\n", ref)
		}
	}
	if del.Len() > 0 {
		_, _ = r.git(ctx, strings.NewReader(del.String()), "update-ref", "--stdin") // a failure leaves them for the next time
	}
}

// gitWith runs git in the repository's top level with env added to its
// environment.
func (r *repo) gitWith(ctx context.Context, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	out, over, err := r.g.run(ctx, Call{Dir: r.top, Args: args, Env: append(gitEnv(), env...), Write: r.write}, runOpts{stdin: stdin, limit: maxOutput})
	if err == nil && over {
		err = fmt.Errorf("%w: git %s printed more than %d bytes", ErrGit, args[0], maxOutput)
	}
	return out, err
}
