package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// LogCommit is one commit of a history page.
type LogCommit struct {
	Hash    string
	Parents []string
	Author  string
	Email   string
	// Date is the author date, RFC 3339 with its zone.
	Date    string
	Subject string
	Body    string
	// Files are the files the commit changed against its first parent
	// (its whole tree for a root commit), renames as a deletion and an
	// addition; Additions and Deletions count lines, 0 for binary files.
	Files []LogFile
}

// LogFile is a file a commit changed.
type LogFile struct {
	Path      string
	Additions int
	Deletions int
}

// LogResult is a page of history, newest first.
type LogResult struct {
	Commits []LogCommit
	// HasMore says older commits remain: ask again with After the last
	// commit's hash.
	HasMore bool
}

// Sizes of a history page.
const (
	DefaultLogPage = 50
	MaxLogPage     = 200
	// maxLogOutput bounds git log's output for a page; a page it cuts is
	// shorter and has more.
	maxLogOutput = 16 << 20
)

// ErrUnknownCommit: the commit a page should continue after is not in the
// repository.
var ErrUnknownCommit = errors.New("gitops: no such commit")

// logFormat separates commits by RS and fields by US; --numstat -z lists
// the files after it, NUL-terminated and unquoted.
const logFormat = "--format=%x1e%H%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%s%x1f%b%x1f"

// Log returns up to limit commits of HEAD's history in git log's order,
// newest first, as `git log` shows them; after, when set, is the hash of the
// last commit of the previous page, and the page continues from there. A
// session in a subdirectory sees the commits that touched it, and only its
// files.
func (g Git) Log(ctx context.Context, dir, after string, limit int) (*LogResult, error) {
	if limit <= 0 {
		limit = DefaultLogPage
	}
	limit = min(limit, MaxLogPage)
	from := "HEAD"
	if after != "" {
		if len(after) != 40 || strings.Trim(after, "0123456789abcdef") != "" {
			return nil, fmt.Errorf("%w: %q is not a commit's hash", ErrUnknownCommit, after)
		}
		from = after
	}
	r, err := g.openRepo(ctx, dir, false)
	if err != nil {
		return nil, err
	}
	args := []string{"log", "-z", "--no-renames", "--numstat", "--no-show-signature", "-n", strconv.Itoa(limit + 2), logFormat, "--end-of-options", from}
	if r.prefix != "" {
		args = append(args, "--", r.prefix)
	}
	out, over, err := r.g.gitCapped(ctx, r.top, false, nil, maxLogOutput, args...)
	if err != nil {
		if exitCode(err) != 128 {
			return nil, err
		}
		if after != "" {
			return nil, fmt.Errorf("%w: %s", ErrUnknownCommit, after)
		}
		// HEAD names no commit yet.
		if _, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", "HEAD"); err != nil {
			return &LogResult{Commits: []LogCommit{}}, nil
		}
		return nil, err
	}
	commits := parseLog(out, over)
	if after != "" && len(commits) > 0 && commits[0].Hash == after {
		commits = commits[1:]
	}
	res := &LogResult{Commits: commits, HasMore: over}
	if len(commits) > limit {
		res.Commits, res.HasMore = commits[:limit], true
	}
	for i := range res.Commits {
		res.Commits[i].Files = r.limitFiles(res.Commits[i].Files)
	}
	return res, nil
}

// parseLog reads logFormat's output; cut says the output was cut short,
// and its last commit is dropped.
func parseLog(out []byte, cut bool) []LogCommit {
	commits := []LogCommit{}
	records := bytes.Split(out, []byte{0x1e})[1:]
	if cut && len(records) > 0 {
		records = records[:len(records)-1]
	}
	for _, rec := range records {
		f := bytes.SplitN(rec, []byte{0x1f}, 8)
		if len(f) != 8 {
			continue
		}
		c := LogCommit{
			Hash: string(f[0]), Parents: strings.Fields(string(f[1])), Author: string(f[2]), Email: string(f[3]),
			Date: string(f[4]), Subject: string(f[5]), Body: strings.TrimSpace(string(f[6])), Files: []LogFile{},
		}
		if c.Parents == nil {
			c.Parents = []string{}
		}
		for entry := range bytes.SplitSeq(f[7], []byte{0}) {
			parts := bytes.SplitN(bytes.TrimLeft(entry, "\n"), []byte{'\t'}, 3)
			if len(parts) != 3 {
				continue
			}
			add, _ := strconv.Atoi(string(parts[0])) // "-" for a binary file: 0
			del, _ := strconv.Atoi(string(parts[1]))
			c.Files = append(c.Files, LogFile{Path: string(parts[2]), Additions: add, Deletions: del})
		}
		commits = append(commits, c)
	}
	return commits
}

// limitFiles keeps the files inside the directory asked about.
func (r *repo) limitFiles(files []LogFile) []LogFile {
	if r.prefix == "" {
		return files
	}
	kept := files[:0]
	for _, f := range files {
		if r.within(f.Path) {
			kept = append(kept, f)
		}
	}
	return kept
}

// emptyTree is git's empty tree, the parent a root commit is shown against.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// Show returns one commit's changes against its first parent (the empty
// tree for a root commit) as a structured diff, in Diff's shape and under
// its bounds; the files in the directory asked about only.
func (g Git) Show(ctx context.Context, dir, hash string) (*DiffResult, error) {
	if len(hash) != 40 || strings.Trim(hash, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("%w: %q is not a commit's hash", ErrUnknownCommit, hash)
	}
	r, err := g.openRepo(ctx, dir, false)
	if err != nil {
		return nil, err
	}
	out, err := r.git(ctx, nil, "rev-list", "--parents", "-n", "1", "--end-of-options", hash+"^{commit}")
	if err != nil {
		if exitCode(err) == 128 {
			return nil, fmt.Errorf("%w: %s", ErrUnknownCommit, hash)
		}
		return nil, err
	}
	parent := emptyTree
	if f := strings.Fields(string(out)); len(f) > 1 {
		parent = f[1]
	}
	args := showArgs(parent, hash)
	if r.prefix != "" {
		args = append(args, literal([]string{r.prefix})...)
	}
	patch, over, err := r.g.gitCapped(ctx, r.top, false, nil, 2*MaxDiffBytes, args...)
	if err != nil {
		return nil, err
	}
	diffs, err := parsePatch(wholeFiles(patch, over))
	if err != nil {
		return nil, err
	}
	return bound(diffs, over), nil
}

// showArgs compares two commits with the options Diff pins.
func showArgs(from, to string) []string {
	args := diffArgs(false, nil)
	// diffArgs ends with the work tree's "-2 --"; a commit's diff names the
	// two commits instead.
	args = args[:len(args)-2]
	return append(args, "--end-of-options", from, to, "--")
}
