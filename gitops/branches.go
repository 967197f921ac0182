package gitops

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors of branch operations.
var (
	// ErrInvalidBranchName: a name git would not accept as a branch.
	ErrInvalidBranchName = errors.New("gitops: invalid branch name")
	// ErrUnknownBranch: no local branch, and no single remote-tracking
	// branch, has that name; or a start point names no commit.
	ErrUnknownBranch = errors.New("gitops: no such branch or commit")
	// ErrBranchExists: a branch of that name exists already.
	ErrBranchExists = errors.New("gitops: a branch of that name exists already")
	// ErrWouldOverwrite: the working tree has changes (or untracked files)
	// that the operation would overwrite; nothing was changed.
	ErrWouldOverwrite = errors.New("gitops: local changes would be overwritten; commit or discard them first")
	// ErrLocked: another git process holds the repository's index or a
	// ref lock (the agent's, the developer's); try again.
	ErrLocked = errors.New("gitops: another git process is working in this repository; try again")
)

// MaxBranches bounds the branches Branches lists, local and remote-tracking
// each: an agent can create refs without end.
const MaxBranches = 1000

// BranchInfo is one branch of a BranchesResult.
type BranchInfo struct {
	// Name is the short name: "main", or "origin/main" for a
	// remote-tracking branch.
	Name string
	// Hash is the commit the branch points at.
	Hash string
	// Current marks the checked-out branch.
	Current bool
	// Upstream is a local branch's upstream ("origin/main"), if it has one;
	// Ahead and Behind count the commits it has that the upstream has not,
	// and the other way round; UpstreamGone means the upstream is
	// configured but its remote-tracking branch no longer exists.
	Upstream     string
	Ahead        int
	Behind       int
	UpstreamGone bool
	// Remote is a remote-tracking branch's remote.
	Remote string
	// Date is the Unix time of the branch's last commit; Subject its
	// subject.
	Date    int64
	Subject string
}

// BranchesResult is the reply to git_branches.
type BranchesResult struct {
	// Current is the checked-out branch; "" when HEAD is detached.
	Current string
	// Detached is true when HEAD is not on a branch; Head is the commit
	// HEAD names ("" on a branch with no commit yet).
	Detached bool
	Head     string
	// Local and Remote are the local and remote-tracking branches, by name.
	Local  []BranchInfo
	Remote []BranchInfo
	// Remotes are the repository's remotes with their URLs as written in
	// its configuration (credentials left out): what a push or pull would
	// reach, for the user to check (see RemoteOptions.URL).
	Remotes []RemoteInfo
	// Truncated is true when one of the lists stopped at MaxBranches.
	Truncated bool
}

// RemoteInfo is one remote of BranchesResult.
type RemoteInfo struct {
	Name string
	URL  string
	// PushURL is where a push goes when it differs from URL.
	PushURL string
}

// branchFormat is for-each-ref's format for Branches: NUL-separated
// fields, a NUL and a newline after each ref (a subject holds no newline).
const branchFormat = "--format=%(refname)%00%(objectname)%00%(HEAD)%00%(upstream:short)%00%(upstream:track,nobracket)%00%(symref)%00%(committerdate:unix)%00%(subject)%00"

// Branches lists the local and remote-tracking branches of the repository
// containing dir, with the current one, and each local branch's distance
// from its upstream as `git branch -vv` shows it.
func (g Git) Branches(ctx context.Context, dir string) (*BranchesResult, error) {
	r, err := g.openRepo(ctx, dir, false)
	if err != nil {
		return nil, err
	}
	out, over, err := r.g.gitCapped(ctx, r.top, false, nil, maxOutput, "for-each-ref", "--sort=refname", branchFormat, "refs/heads/", "refs/remotes/")
	if err != nil {
		return nil, err
	}
	res := &BranchesResult{Local: []BranchInfo{}, Remote: []BranchInfo{}, Remotes: []RemoteInfo{}, Truncated: over}
	for _, rec := range strings.Split(string(out), "\x00\n") {
		f := strings.Split(rec, "\x00")
		if len(f) != 8 || f[5] != "" { // a symbolic ref (origin/HEAD) is no branch
			continue
		}
		b := BranchInfo{Hash: f[1], Current: f[2] == "*", Upstream: f[3], Subject: f[7]}
		b.Date, _ = strconv.ParseInt(f[6], 10, 64)
		b.Ahead, b.Behind, b.UpstreamGone = parseTrack(f[4])
		list := &res.Local
		if name, ok := strings.CutPrefix(f[0], "refs/heads/"); ok {
			b.Name = name
		} else {
			b.Name = strings.TrimPrefix(f[0], "refs/remotes/")
			b.Remote, _, _ = strings.Cut(b.Name, "/")
			list = &res.Remote
		}
		if !validBranch(b.Name) {
			continue
		}
		if len(*list) == MaxBranches {
			res.Truncated = true
			continue
		}
		if b.Current {
			res.Current = b.Name
		}
		*list = append(*list, b)
	}
	res.Remotes = r.remotes(ctx)
	head, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", "HEAD")
	if err == nil {
		res.Head = strings.TrimSpace(string(head))
	}
	if res.Current == "" {
		// Detached, or a branch with no commit yet (which for-each-ref
		// does not list).
		if ref, err := r.git(ctx, nil, "symbolic-ref", "--quiet", "--short", "HEAD"); err == nil {
			res.Current = strings.TrimSpace(string(ref))
		} else {
			res.Detached = true
		}
	}
	return res, nil
}

// remotes lists the remotes' URLs and push URLs, in the order of the
// configuration; none when git config finds none.
func (r *repo) remotes(ctx context.Context) []RemoteInfo {
	out, _ := r.git(ctx, nil, "config", "--null", "--get-regexp", `^remote\..*\.(url|pushurl)$`)
	list := []RemoteInfo{}
	index := map[string]int{}
	for entry := range strings.SplitSeq(string(out), "\x00") {
		key, value, ok := strings.Cut(entry, "\n")
		dot := strings.LastIndexByte(key, '.')
		if !ok || !strings.HasPrefix(key, "remote.") || dot <= len("remote.") || len(list) == MaxBranches {
			continue
		}
		name, kind := key[len("remote."):dot], key[dot+1:]
		if checkBranchName(name) != nil {
			continue
		}
		i, seen := index[name]
		if !seen {
			i, index[name] = len(list), len(list)
			list = append(list, RemoteInfo{Name: name})
		}
		if kind == "pushurl" {
			list[i].PushURL = shownURL(value)
		} else {
			list[i].URL = shownURL(value)
		}
	}
	return list
}

// parseTrack reads %(upstream:track,nobracket): "ahead 2, behind 1",
// "gone", or "".
func parseTrack(s string) (ahead, behind int, gone bool) {
	if s == "gone" {
		return 0, 0, true
	}
	for part := range strings.SplitSeq(s, ", ") {
		switch word, n, _ := strings.Cut(part, " "); word {
		case "ahead":
			ahead, _ = strconv.Atoi(n)
		case "behind":
			behind, _ = strconv.Atoi(n)
		}
	}
	return ahead, behind, false
}

// checkBranchName refuses names git would not take as a branch, and names
// an option parser could take for an option.
func checkBranchName(name string) error {
	if !validBranch(name) || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "/") ||
		strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//") ||
		strings.Contains(name, "/.") || strings.HasPrefix(name, ".") || name == "@" || name == "HEAD" {
		return fmt.Errorf("%w: %q", ErrInvalidBranchName, name)
	}
	return nil
}

// Checkout switches the repository containing dir to an existing branch,
// as `git switch` does: a local branch, or, when no local branch has the
// name and exactly one remote has a branch of it, a new local branch
// tracking that one. Local changes that the switch does not touch are
// carried along; when it would overwrite any (or an untracked file) it
// refuses with ErrWouldOverwrite and changes nothing. The repository's
// post-checkout hook runs as it does for `git switch`.
func (g Git) Checkout(ctx context.Context, dir, branch string) (*StatusResult, error) {
	if err := checkBranchName(branch); err != nil {
		return nil, err
	}
	r, err := g.openRepo(ctx, dir, true)
	if err != nil {
		return nil, err
	}
	if _, err := r.git(ctx, nil, "switch", "--guess", "--no-progress", "--end-of-options", branch); err != nil {
		return nil, switchError(err)
	}
	return r.limitedStatus(ctx)
}

// CreateBranch creates a branch named name at start (a branch, tag or
// commit; "" for HEAD) in the repository containing dir, and with checkout
// switches to it as `git switch -c` does.
func (g Git) CreateBranch(ctx context.Context, dir, name, start string, checkout bool) (*StatusResult, error) {
	if err := checkBranchName(name); err != nil {
		return nil, err
	}
	if strings.HasPrefix(start, "-") || strings.ContainsAny(start, "\x00\n") {
		return nil, fmt.Errorf("%w: %q", ErrUnknownBranch, start)
	}
	r, err := g.openRepo(ctx, dir, true)
	if err != nil {
		return nil, err
	}
	if _, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+name); err == nil {
		return nil, fmt.Errorf("%w: %q", ErrBranchExists, name)
	}
	args := []string{"branch", "--no-track", "--end-of-options", name}
	if checkout {
		args = []string{"switch", "--no-track", "--no-progress", "-c", name, "--end-of-options"}
	}
	if start != "" {
		if _, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", start+"^{commit}"); err != nil {
			return nil, fmt.Errorf("%w: %q", ErrUnknownBranch, start)
		}
		args = append(args, start)
	}
	if _, err := r.git(ctx, nil, args...); err != nil {
		return nil, switchError(err)
	}
	return r.limitedStatus(ctx)
}

// switchError names the refusals of git switch and git branch that a phone
// can act on.
func switchError(err error) error {
	msg := stderrOf(err)
	switch {
	case strings.Contains(msg, "would be overwritten"):
		return fmt.Errorf("%w: %w", ErrWouldOverwrite, err)
	case strings.Contains(msg, "invalid reference") || strings.Contains(msg, "not a commit") ||
		strings.Contains(msg, "matched multiple") || strings.Contains(msg, "a branch is expected"):
		return fmt.Errorf("%w: %w", ErrUnknownBranch, err)
	case strings.Contains(msg, "already exists"):
		return fmt.Errorf("%w: %w", ErrBranchExists, err)
	case strings.Contains(msg, "resolve your current index") || strings.Contains(msg, "needs merge"):
		return fmt.Errorf("%w: %w", ErrUnmergedPaths, err)
	}
	return lockError(err)
}

// lockError is ErrLocked for a git that found the index or a ref locked,
// err otherwise.
func lockError(err error) error {
	if msg := stderrOf(err); strings.Contains(msg, ".lock': File exists") || strings.Contains(msg, "cannot lock ref") {
		return fmt.Errorf("%w: %w", ErrLocked, err)
	}
	return err
}
