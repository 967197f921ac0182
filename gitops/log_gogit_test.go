package gitops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/diff"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// goGitLog is Log written again with go-git, reading the objects
// in-process: the oracle TestLogMatchesGoGit checks Log against, and the
// other side of BenchmarkLogFirstPage. (go-git was measured for Log itself:
// 8 times slower than git log on a 10,000-commit history; see
// docs/ARCHITECTURE.md.)
func goGitLog(ctx context.Context, dir, after string, limit int) (*LogResult, error) {
	loc, ok, err := Locate(dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotRepository
	}
	repo, err := git.PlainOpenWithOptions(loc.Top, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRepository, err)
	}
	var from plumbing.Hash
	if after != "" {
		if !plumbing.IsHash(after) {
			return nil, ErrUnknownCommit
		}
		from = plumbing.NewHash(after)
		if _, err := repo.CommitObject(from); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrUnknownCommit, after)
		}
	} else {
		head, err := repo.Head()
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return &LogResult{Commits: []LogCommit{}}, nil // no commit yet
		}
		if err != nil {
			return nil, err
		}
		from = head.Hash()
	}
	iter, err := repo.Log(&git.LogOptions{From: from, Order: git.LogOrderCommitterTime})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	res := &LogResult{Commits: []LogCommit{}}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := iter.Next()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return nil, err
		}
		if after != "" && c.Hash == from {
			continue
		}
		if len(res.Commits) == limit {
			res.HasMore = true
			return res, nil
		}
		lc, err := goGitCommit(ctx, c)
		if err != nil {
			return nil, err
		}
		res.Commits = append(res.Commits, lc)
	}
}

func goGitCommit(ctx context.Context, c *object.Commit) (LogCommit, error) {
	subject, body, _ := strings.Cut(strings.TrimRight(c.Message, "\n"), "\n")
	lc := LogCommit{
		Hash: c.Hash.String(), Parents: []string{}, Author: c.Author.Name, Email: c.Author.Email,
		Date: c.Author.When.Format(time.RFC3339), Subject: subject, Body: strings.TrimLeft(body, "\n"), Files: []LogFile{},
	}
	for _, p := range c.ParentHashes {
		lc.Parents = append(lc.Parents, p.String())
	}
	files, err := changedFiles(ctx, c)
	if err != nil {
		return LogCommit{}, err
	}
	lc.Files = files
	return lc, nil
}

// changedFiles counts the lines each file gained and lost against the
// commit's first parent, as `git log --numstat --no-renames` does; go-git's
// own Commit.Stats leaves binary files out.
func changedFiles(ctx context.Context, c *object.Commit) ([]LogFile, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	parent := &object.Tree{}
	if c.NumParents() > 0 {
		p, err := c.Parent(0)
		if err != nil {
			return nil, err
		}
		if parent, err = p.Tree(); err != nil {
			return nil, err
		}
	}
	// No rename detection: a rename is a deletion and an addition, as
	// --no-renames shows it (and no time spent pairing files).
	changes, err := object.DiffTreeWithOptions(ctx, parent, tree, &object.DiffTreeOptions{})
	if err != nil {
		return nil, err
	}
	out := []LogFile{}
	for _, ch := range changes {
		from, to, err := ch.Files()
		if err != nil {
			return nil, err
		}
		f := LogFile{Path: ch.To.Name}
		if f.Path == "" {
			f.Path = ch.From.Name
		}
		if from != nil || to != nil {
			patch, err := ch.PatchContext(ctx)
			if err != nil {
				return nil, err
			}
			for _, fp := range patch.FilePatches() {
				if fp.IsBinary() {
					continue
				}
				for _, chunk := range fp.Chunks() {
					n := strings.Count(chunk.Content(), "\n")
					if !strings.HasSuffix(chunk.Content(), "\n") {
						n++
					}
					switch chunk.Type() {
					case diff.Add:
						f.Additions += n
					case diff.Delete:
						f.Deletions += n
					}
				}
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// goGitStatus is the working tree's list of changes as go-git computes it
// in-process, for BenchmarkStatus.
func goGitStatus(dir string) (git.Status, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return nil, err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, err
	}
	return wt.Status()
}
