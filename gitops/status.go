package gitops

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ChangeStatus is the kind of a change, as the phone app accepts it: only
// the five values below exist in the protocol (wire.ChangeModified, …).
type ChangeStatus string

// The five change kinds. Type changes and conflicts are "modified" with a
// flag; copies are "added" with OldPath naming the source.
const (
	StatusModified  ChangeStatus = "modified"
	StatusAdded     ChangeStatus = "added"
	StatusDeleted   ChangeStatus = "deleted"
	StatusUntracked ChangeStatus = "untracked"
	StatusRenamed   ChangeStatus = "renamed"
)

// State names an operation in progress in the repository.
type State string

// States of the repository; StateNone is no operation.
const (
	StateNone          State = ""
	StateMerging       State = "merging"
	StateRebasing      State = "rebasing"
	StateApplying      State = "applying" // git am
	StateCherryPicking State = "cherry-picking"
	StateReverting     State = "reverting"
	StateBisecting     State = "bisecting"
)

// StatusResult is the status of a repository; the bridge sends it as
// wire.GitStatus.
type StatusResult struct {
	// Branch is the current branch's short name; when HEAD is detached it
	// reads "HEAD (detached at abc1234)".
	Branch string
	// Detached is true when HEAD is not on a branch.
	Detached bool
	// Head is the full hash of the HEAD commit; empty before the first
	// commit.
	Head string
	// Upstream is the configured upstream branch (e.g. "origin/main").
	Upstream string
	// HasUpstream is true when an upstream is configured and exists.
	HasUpstream bool
	// Ahead and Behind count commits relative to the upstream; 0 without
	// one.
	Ahead  int
	Behind int
	// State is the operation in progress (merging, rebasing, …), if any.
	State State
	// IsClean is true when there is no change at all, untracked files
	// included.
	IsClean bool
	// Changes lists every change, in git's order; never nil.
	Changes []Change
}

// Change is one changed path. A path changed both in the index and in the
// working tree appears twice, once with Staged true and once false.
type Change struct {
	// Path is the path relative to the repository's top level (the new path
	// of a rename).
	Path string
	// OldPath is the source of a rename or copy.
	OldPath string
	// Status is one of the five ChangeStatus values.
	Status ChangeStatus
	// Staged is true for a change between HEAD and the index, false for a
	// change between the index and the working tree (and untracked files).
	Staged bool
	// Conflicted marks an unmerged path (Status is "modified").
	Conflicted bool
	// TypeChanged marks a change of kind: file, symbolic link or submodule
	// (Status is "modified").
	TypeChanged bool
	// Binary is true when git considers the content binary; Additions and
	// Deletions are then 0.
	Binary bool
	// Additions and Deletions count lines, as `git diff --numstat` does;
	// an untracked file counts all its lines as additions. For a conflicted
	// path they compare the working tree with our side of the merge.
	Additions int
	Deletions int
}

// Status reports the status of the repository that contains dir: branch,
// upstream, operation in progress and every change, with line counts.
//
// It agrees with `git status --porcelain=v2 --untracked-files=all` for the
// list of changes and with `git diff --numstat` (staged: `--cached`;
// conflicted paths: `-2`, against our side) for the counts. Untracked files
// are listed one by one, never collapsed into their directory, and counted
// like `git diff --no-index /dev/null FILE` would (binary when their first
// 8000 bytes hold a NUL byte; .gitattributes are not consulted for them).
// Two settings git status would follow are not: diff.ignoreSubmodules (a
// submodule is reported as status reports it without that setting), and
// for a staged submodule commit whose submodule.<name>.ignore is "all" the
// counts are the diff's when told to compare submodules (1 and 1) where
// `git diff --cached --numstat` would leave the path out.
//
// It fails with ErrNotRepository or ErrBareRepository when dir has no
// working tree.
func (g Git) Status(ctx context.Context, dir string) (*StatusResult, error) {
	r, out, err := openRepoAnd(ctx, g, dir, (*repo).statusGit)
	if err != nil {
		return nil, err
	}
	res, err := r.statusFrom(out)
	if err != nil {
		return nil, err
	}
	r.limit(res)
	return res, nil
}

// limitedStatus is the status of the directory asked about.
func (r *repo) limitedStatus(ctx context.Context) (*StatusResult, error) {
	res, err := r.status(ctx)
	if err != nil {
		return nil, err
	}
	r.limit(res)
	return res, nil
}

// limit keeps the changes inside the directory asked about: a session in a
// subdirectory sees nothing of the rest of the repository.
func (r *repo) limit(res *StatusResult) {
	if r.prefix == "" {
		return
	}
	kept := res.Changes[:0]
	for _, c := range res.Changes {
		if r.within(c.Path) {
			if !r.within(c.OldPath) {
				c.OldPath = "" // a name from outside stays outside
			}
			kept = append(kept, c)
		}
	}
	res.Changes = kept
	res.IsClean = len(kept) == 0
}

// status asks git four questions at once and merges the answers: the
// working tree against the index (`git diff --raw --numstat`, the only
// pass of lstat over the tracked files), the index against HEAD (the
// same, --cached, which reads no file of the working tree), the untracked
// files (`git ls-files --others`, a walk of the directories) and the
// branch (branchGit: `git for-each-ref` of the branch HEAD names, else `git
// status --branch` with a pathspec that matches nothing, so that it
// neither lstats nor walks). Together they are what `git status
// --porcelain=v2 --untracked-files=all` lists, with the counts of `git
// diff --numstat`: a status and separate numstats would lstat every
// tracked file twice.
func (r *repo) status(ctx context.Context) (*StatusResult, error) {
	out, err := r.statusGit(ctx)
	if err != nil {
		return nil, err
	}
	return r.statusFrom(out)
}

// statusOutput is what git answered to status's four questions.
type statusOutput struct {
	wt, staged, others []byte
	// branch is the header of a branch-only `git status`, or, when HEAD
	// names a branch (headBranch), `git for-each-ref` of that branch.
	branch     []byte
	headBranch string
}

// statusGit asks git status's four questions at once, in r.top.
func (r *repo) statusGit(ctx context.Context) (statusOutput, error) {
	var (
		wg                     sync.WaitGroup
		out                    statusOutput
		errB, errW, errS, errU error
	)
	wg.Go(func() { out.wt, errW = r.git(ctx, nil, worktreeDiffArgs...) })
	wg.Go(func() { out.staged, errS = r.git(ctx, nil, stagedDiffArgs...) })
	wg.Go(func() { out.others, errU = r.git(ctx, nil, "ls-files", "-z", "--others", "--exclude-standard") })
	wg.Go(func() { out.headBranch, out.branch, errB = r.branchGit(ctx) })
	wg.Wait()
	return out, errors.Join(errW, errS, errU, errB)
}

// branchGit asks git for the branch, its commit and its upstream. When the
// HEAD file names a branch, `git for-each-ref` of that branch answers
// without reading the index (2 ms against 10 for a status, on the 50,000
// files' index); it returns the branch's name with that answer. Otherwise
// (detached, a branch without a commit, HEAD not a plain branch) it is a
// status limited to a pathspec that matches nothing.
func (r *repo) branchGit(ctx context.Context) (string, []byte, error) {
	if b, err := readSmall(filepath.Join(r.gitDir, "HEAD")); err == nil {
		name, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/")
		if ok && validBranch(name) {
			out, err := r.git(ctx, nil, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(upstream:short)%00%(upstream:track,nobracket)%00",
				"--", "refs/heads/"+name)
			if err != nil {
				return "", nil, err
			}
			if _, ok := branchRef(out, name); ok {
				return name, out, nil
			}
		}
	}
	out, err := r.git(ctx, nil, branchStatusArgs...)
	return "", out, err
}

// branchRef finds refs/heads/name in the output of branchGit's
// for-each-ref: its object name, upstream and the upstream's track.
func branchRef(out []byte, name string) ([]string, bool) {
	f := strings.Split(string(out), "\x00")
	for i := 0; i+4 < len(f); i += 4 {
		ref := strings.TrimPrefix(f[i], "\n")
		if ref == "refs/heads/"+name {
			return f[i+1 : i+4], true
		}
	}
	return nil, false
}

// branchHeader fills res's branch fields from branchRef's fields, as
// `git status --porcelain=v2 --branch` reports them: the upstream when one
// is configured, and ahead/behind only when it exists.
func branchHeader(res *StatusResult, name string, ref []string) error {
	res.Branch, res.Head, res.Upstream = name, ref[0], ref[1]
	track := ref[2]
	if res.Upstream == "" || track == "gone" {
		return nil
	}
	res.HasUpstream = true
	for part := range strings.SplitSeq(track, ", ") {
		if part == "" {
			continue
		}
		key, n, ok := strings.Cut(part, " ")
		v, err := strconv.Atoi(n)
		switch {
		case !ok || err != nil || v < 0:
			return fmt.Errorf("%w: upstream track %q", errParse, track)
		case key == "ahead":
			res.Ahead = v
		case key == "behind":
			res.Behind = v
		default:
			return fmt.Errorf("%w: upstream track %q", errParse, track)
		}
	}
	return nil
}

// statusFrom merges git's answers into the status, with the untracked
// files' counts and the operation in progress.
func (r *repo) statusFrom(out statusOutput) (*StatusResult, error) {
	var (
		res *StatusResult
		err error
	)
	if out.headBranch != "" {
		ref, _ := branchRef(out.branch, out.headBranch)
		res = &StatusResult{}
		err = branchHeader(res, out.headBranch, ref)
	} else {
		res, err = parsePorcelainV2(out.branch)
	}
	if err != nil {
		return nil, err
	}
	wtEntries, err := parseRawNumstat(out.wt)
	if err != nil {
		return nil, err
	}
	stagedEntries, err := parseRawNumstat(out.staged)
	if err != nil {
		return nil, err
	}
	res.Changes, err = mergeChanges(stagedEntries, wtEntries)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(r.top)
	if err != nil {
		return nil, fmt.Errorf("gitops: %w", err)
	}
	defer root.Close()
	for _, p := range bytes.Split(out.others, []byte{0}) {
		if len(p) == 0 {
			continue
		}
		c := Change{Path: string(p), Status: StatusUntracked}
		n, err := countFile(root, filepath.FromSlash(c.Path))
		switch {
		case err == nil:
			c.Additions, c.Deletions, c.Binary = n.additions, n.deletions, n.binary
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
		res.Changes = append(res.Changes, c)
	}
	res.IsClean = len(res.Changes) == 0
	res.State = r.state()
	return res, nil
}

// The arguments of Status's git calls. The worktree diff and the staged
// diff report submodules as `git status` does: a submodule's untracked
// files count as a change of it in the working tree (a diff leaves them
// out unless told), and a staged submodule commit shows whatever
// submodule.<name>.ignore says. A stat-only change (a touched file) is no
// change, as for status, whatever diff.autoRefreshIndex says.
var (
	worktreeDiffArgs = []string{"-c", "diff.ignoreSubmodules=none", "-c", "diff.autoRefreshIndex=true",
		"diff", "--raw", "--numstat", "-z", "--find-renames", "--no-ext-diff", "--no-textconv", "--no-relative",
		"--ita-invisible-in-index", "-2"}
	stagedDiffArgs = []string{"diff", "--raw", "--numstat", "-z", "--find-renames", "--no-ext-diff", "--no-textconv",
		"--no-relative", "--ita-invisible-in-index", "--ignore-submodules=dirty", "--cached"}
	// branchStatusArgs: no index entry can be named .git, so the status
	// compares nothing, and without preloading the index it starts no
	// threads to stat nothing.
	branchStatusArgs = []string{"-c", "core.preloadIndex=false", "status", "--porcelain=v2", "-z", "--branch",
		"--untracked-files=no", "--ahead-behind", "--", ":(literal).git"}
)

// mergeChanges puts the staged and the working tree's entries in the order
// of `git status --porcelain=v2`: changed paths by path (the new path of a
// rename), each path's staged change before its unstaged one; then the
// unmerged paths by path, one conflicted change each, with the counts of
// the working tree against our side (the last numstat git gave the path).
func mergeChanges(staged, wt []diffEntry) ([]Change, error) {
	conflicts := make(map[string]int)
	var unmerged []Change
	for _, e := range wt {
		if e.code == 'U' {
			if _, ok := conflicts[e.path]; !ok {
				conflicts[e.path] = len(unmerged)
				unmerged = append(unmerged, Change{Path: e.path, Status: StatusModified, Conflicted: true})
			}
		}
	}
	changes := make([]Change, 0, len(staged)+len(wt)+len(unmerged))
	for side, entries := range [][]diffEntry{staged, wt} {
		for _, e := range entries {
			if i, ok := conflicts[e.path]; ok {
				if side == 1 {
					c := &unmerged[i]
					c.Additions, c.Deletions, c.Binary = e.n.additions, e.n.deletions, e.n.binary
				}
				continue
			}
			if e.code == 'U' {
				continue // unmerged in the index, listed from the working tree's side
			}
			c, err := changeFor(e.code, e.path, e.oldPath)
			if err != nil {
				return nil, err
			}
			c.Staged = side == 0
			c.Additions, c.Deletions, c.Binary = e.n.additions, e.n.deletions, e.n.binary
			changes = append(changes, c)
		}
	}
	// Staged entries come first, so a stable sort keeps each path's staged
	// change before its unstaged one.
	slices.SortStableFunc(changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(unmerged, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return append(changes, unmerged...), nil
}

// state finds the operation in progress from the files git leaves in its
// directory, checked in the order git's own status does.
func (r *repo) state() State {
	exists := func(name string) bool {
		_, err := os.Lstat(filepath.Join(r.gitDir, name))
		return err == nil
	}
	switch {
	case exists("rebase-merge"):
		return StateRebasing
	case exists("rebase-apply/applying"):
		return StateApplying
	case exists("rebase-apply"):
		return StateRebasing
	case exists("MERGE_HEAD"):
		return StateMerging
	case exists("CHERRY_PICK_HEAD"):
		return StateCherryPicking
	case exists("REVERT_HEAD"):
		return StateReverting
	case exists("BISECT_LOG"):
		return StateBisecting
	}
	return StateNone
}

// errParse reports git output that does not have the expected shape.
var errParse = errors.New("gitops: unexpected git output")

// parsePorcelainV2 decodes `git status --porcelain=v2 -z --branch`. Line
// counts are left at zero.
func parsePorcelainV2(data []byte) (*StatusResult, error) {
	res := &StatusResult{Changes: []Change{}}
	var oid string
	records := bytes.Split(data, []byte{0})
	for i := 0; i < len(records); i++ {
		rec := string(records[i])
		if rec == "" {
			continue
		}
		switch rec[0] {
		case '#':
			if err := parseBranchHeader(res, &oid, rec); err != nil {
				return nil, err
			}
		case '1', '2':
			// 1 XY sub mH mI mW hH hI path
			// 2 XY sub mH mI mW hH hI Xscore path NUL origPath
			n := 9
			if rec[0] == '2' {
				n = 10
			}
			f := strings.SplitN(rec, " ", n)
			if len(f) != n || len(f[1]) != 2 {
				return nil, fmt.Errorf("%w: status entry %q", errParse, rec)
			}
			path, orig := f[n-1], ""
			if rec[0] == '2' {
				i++
				if i >= len(records) || len(records[i]) == 0 {
					return nil, fmt.Errorf("%w: rename without source %q", errParse, rec)
				}
				orig = string(records[i])
			}
			for side, code := range []byte{f[1][0], f[1][1]} {
				if code == '.' {
					continue
				}
				c, err := changeFor(code, path, orig)
				if err != nil {
					return nil, err
				}
				c.Staged = side == 0
				res.Changes = append(res.Changes, c)
			}
		case 'u':
			// u XY sub m1 m2 m3 mW h1 h2 h3 path
			f := strings.SplitN(rec, " ", 11)
			if len(f) != 11 {
				return nil, fmt.Errorf("%w: unmerged entry %q", errParse, rec)
			}
			res.Changes = append(res.Changes, Change{Path: f[10], Status: StatusModified, Conflicted: true})
		case '?':
			if len(rec) < 3 || rec[1] != ' ' {
				return nil, fmt.Errorf("%w: untracked entry %q", errParse, rec)
			}
			res.Changes = append(res.Changes, Change{Path: rec[2:], Status: StatusUntracked})
		case '!':
		default:
			return nil, fmt.Errorf("%w: status record %q", errParse, rec)
		}
	}
	if res.Detached {
		short := oid
		if len(short) > 7 {
			short = short[:7]
		}
		res.Branch = "HEAD (detached at " + short + ")"
	}
	if oid != "(initial)" {
		res.Head = oid
	}
	res.IsClean = len(res.Changes) == 0
	return res, nil
}

// parseBranchHeader decodes one "# branch.…" header line.
func parseBranchHeader(res *StatusResult, oid *string, rec string) error {
	key, val, _ := strings.Cut(strings.TrimPrefix(rec, "# "), " ")
	switch key {
	case "branch.oid":
		*oid = val
	case "branch.head":
		if val == "(detached)" {
			res.Detached = true
		} else {
			res.Branch = val
		}
	case "branch.upstream":
		res.Upstream = val
	case "branch.ab":
		a, b, ok := strings.Cut(val, " ")
		ahead, err1 := strconv.Atoi(strings.TrimPrefix(a, "+"))
		behind, err2 := strconv.Atoi(strings.TrimPrefix(b, "-"))
		if !ok || err1 != nil || err2 != nil || ahead < 0 || behind < 0 {
			return fmt.Errorf("%w: ahead/behind %q", errParse, rec)
		}
		res.Ahead, res.Behind, res.HasUpstream = ahead, behind, true
	}
	return nil
}

// changeFor maps one side of a porcelain v2 XY code to a Change.
func changeFor(code byte, path, orig string) (Change, error) {
	c := Change{Path: path}
	switch code {
	case 'M':
		c.Status = StatusModified
	case 'T':
		c.Status, c.TypeChanged = StatusModified, true
	case 'A':
		c.Status = StatusAdded
	case 'D':
		c.Status = StatusDeleted
	case 'R':
		c.Status, c.OldPath = StatusRenamed, orig
	case 'C':
		c.Status, c.OldPath = StatusAdded, orig
	default:
		return c, fmt.Errorf("%w: status code %q for %q", errParse, code, path)
	}
	return c, nil
}

// numstat is one path's line counts.
type numstat struct {
	additions, deletions int
	binary               bool
}

// diffEntry is one path of `git diff --raw --numstat -z`.
type diffEntry struct {
	// code is the status letter: M, A, D, T, R, C or U (unmerged).
	code byte
	// path is the (new) path; oldPath the source of a rename or copy.
	path, oldPath string
	n             numstat
}

// parseRawNumstat decodes `git diff --raw --numstat -z`: a raw record for
// each path (":mode mode oid oid status" NUL path NUL, a second path for a
// rename or copy), then a numstat record for each in the same order
// ("added TAB deleted TAB path" NUL, or for a rename "added TAB deleted
// TAB" NUL old NUL new NUL; "-" counts for a binary file).
func parseRawNumstat(data []byte) ([]diffEntry, error) {
	next := func() (string, bool) {
		field, rest, ok := bytes.Cut(data, []byte{0})
		if !ok {
			return "", false
		}
		data = rest
		return string(field), true
	}
	var entries []diffEntry
	for len(data) > 0 && data[0] == ':' {
		head, ok := next()
		if !ok {
			return nil, fmt.Errorf("%w: unterminated raw record", errParse)
		}
		f := strings.Fields(head)
		if len(f) != 5 || f[4] == "" {
			return nil, fmt.Errorf("%w: raw record %q", errParse, head)
		}
		e := diffEntry{code: f[4][0]}
		if strings.Trim(f[4][1:], "0123456789") != "" {
			return nil, fmt.Errorf("%w: raw status %q", errParse, f[4])
		}
		if e.path, ok = next(); !ok || e.path == "" {
			return nil, fmt.Errorf("%w: raw record %q without a path", errParse, head)
		}
		if e.code == 'R' || e.code == 'C' {
			e.oldPath = e.path
			if e.path, ok = next(); !ok || e.path == "" {
				return nil, fmt.Errorf("%w: raw record %q without its second path", errParse, head)
			}
		}
		entries = append(entries, e)
	}
	for i := range entries {
		head, ok := next()
		if !ok {
			return nil, fmt.Errorf("%w: %d raw records, %d numstat records", errParse, len(entries), i)
		}
		f := strings.SplitN(head, "\t", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: numstat record %q", errParse, head)
		}
		e := &entries[i]
		if f[0] == "-" && f[1] == "-" {
			e.n.binary = true
		} else {
			a, err1 := strconv.Atoi(f[0])
			d, err2 := strconv.Atoi(f[1])
			if err1 != nil || err2 != nil || a < 0 || d < 0 {
				return nil, fmt.Errorf("%w: numstat counts %q", errParse, head)
			}
			e.n.additions, e.n.deletions = a, d
		}
		path, old := f[2], ""
		if path == "" {
			var ok1, ok2 bool
			old, ok1 = next()
			path, ok2 = next()
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("%w: numstat rename record", errParse)
			}
		}
		if path != e.path || old != e.oldPath {
			return nil, fmt.Errorf("%w: numstat record %d names %q, its raw record %q", errParse, i, path, e.path)
		}
	}
	if len(data) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the numstat records", errParse, len(data))
	}
	return entries, nil
}

// binarySniffLen is how much of a file git looks at for a NUL byte to call
// it binary.
const binarySniffLen = 8000

// countFile counts an untracked file's lines the way `git diff --no-index
// /dev/null FILE --numstat` does. A symbolic link counts its target as one
// line; a directory (a nested repository) counts nothing. It reads through
// root, the working tree, which a link swapped in meanwhile cannot leave,
// and never blocks on what turned into a pipe.
func countFile(root *os.Root, name string) (numstat, error) {
	info, err := root.Lstat(name)
	if err != nil {
		return numstat{}, fmt.Errorf("gitops: count lines: %w", err)
	}
	switch {
	case info.Mode()&os.ModeSymlink != 0:
		target, err := root.Readlink(name)
		if err != nil {
			return numstat{}, fmt.Errorf("gitops: count lines: %w", err)
		}
		if target == "" {
			return numstat{}, nil
		}
		return numstat{additions: 1}, nil
	case !info.Mode().IsRegular():
		return numstat{}, nil
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return numstat{}, fmt.Errorf("gitops: count lines: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(binarySniffLen)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return numstat{}, fmt.Errorf("gitops: count lines: %w", err)
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return numstat{binary: true}, nil
	}
	var (
		lines, total int
		last         byte
	)
	buf := make([]byte, 64<<10)
	for {
		n, err := br.Read(buf)
		if n > 0 {
			lines += bytes.Count(buf[:n], []byte{'\n'})
			total += n
			last = buf[n-1]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return numstat{}, fmt.Errorf("gitops: count lines: %w", err)
		}
	}
	if total > 0 && last != '\n' {
		lines++
	}
	return numstat{additions: lines}, nil
}

// Branch names what is checked out in the repository containing dir: the
// current branch's short name, or "HEAD (detached at abc1234)". It reads
// the HEAD file of the repository's git directory and runs no git: a
// session starting should not wait for a sandboxed git process, and HEAD
// is text, not configuration. Being the agent's to write, what it holds is
// shown only after a check: a branch name of at most 255 printable
// characters, or a hexadecimal object name.
func Branch(dir string) (string, error) {
	loc, ok, err := Locate(dir)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", fmt.Errorf("%w: %s", ErrNotRepository, dir)
	}
	b, err := readSmall(filepath.Join(loc.GitDir, "HEAD"))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotRepository, err)
	}
	head := strings.TrimSpace(string(b))
	if ref, ok := strings.CutPrefix(head, "ref: refs/heads/"); ok && validBranch(ref) {
		return ref, nil
	}
	if len(head) >= 7 && len(head) <= 64 && strings.Trim(head, "0123456789abcdef") == "" {
		return "HEAD (detached at " + head[:7] + ")", nil
	}
	return "", fmt.Errorf("%w: unreadable HEAD", ErrNotRepository)
}

func validBranch(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || r == '\\' || r == '~' || r == '^' || r == ':' || r == '?' || r == '*' || r == '[' {
			return false
		}
	}
	return true
}
