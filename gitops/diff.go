package gitops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// LineType is the kind of a diff line.
type LineType string

// The three kinds of diff lines.
const (
	LineContext LineType = "context"
	LineAdded   LineType = "added"
	LineRemoved LineType = "removed"
)

// FileDiff is the diff of one file, an entry of a DiffResult's files.
type FileDiff struct {
	// Path is the file's path (the new path of a rename).
	Path string
	// OldPath and NewPath are the two sides' paths; both equal Path except
	// for renames and copies.
	OldPath string
	NewPath string
	// Status is one of the five ChangeStatus values.
	Status ChangeStatus
	// Additions and Deletions count the added and removed lines of Hunks.
	Additions int
	Deletions int
	// Binary is true when git found the content binary; there are no hunks.
	Binary bool
	// OldMode and NewMode are git's octal file modes ("100644", "100755",
	// "120000", "160000"); a side that does not exist has none.
	OldMode string
	NewMode string
	// Similarity is the similarity index of a rename or copy, in percent.
	Similarity int
	// TypeChanged marks a change of kind (file, symbolic link, submodule).
	TypeChanged bool
	// Conflicted marks an unmerged path.
	Conflicted bool
	// Hunks are the changed regions, in order; never nil.
	Hunks []Hunk
	// Truncated marks a file whose hunks stop short: its lines passed
	// MaxFileDiffBytes, or the whole diff passed MaxDiffBytes. Additions and
	// Deletions count what is shown.
	Truncated bool
	// Fingerprint identifies this change of the file, both sides' whole
	// content (not only what is shown) and their modes: a client names it
	// to stage, unstage or discard the change it showed, and the daemon
	// refuses when the file has changed since. Set by Diff (and Show).
	Fingerprint string

	// oldOID and newOID are git's object names of both sides (all zeros
	// for a missing side); stat holds an untracked file's size, time and
	// the hash of what was read of it.
	oldOID, newOID, stat string
}

// DiffResult is a diff: its files, and whether it was cut.
type DiffResult struct {
	Files []FileDiff
	// Truncated is true when files are missing or cut because the diff
	// passed MaxDiffBytes (the cut files say so themselves).
	Truncated bool
}

// Bounds of a diff, in bytes of line content: a phone gets at most
// MaxFileDiffBytes of one file and MaxDiffBytes in all; git's patch is read
// up to twice MaxDiffBytes.
const (
	MaxFileDiffBytes = 256 << 10
	MaxDiffBytes     = 4 << 20
)

// Hunk is one changed region of a file.
type Hunk struct {
	// Header is git's hunk header line, "@@ -10,5 +10,5 @@" followed by the
	// function context git prints after it, if any.
	Header   string
	OldStart int
	OldLines int
	NewStart int
	NewLines int
	// Lines are the hunk's lines, in order; never nil.
	Lines []Line
}

// Line is one line of a hunk.
type Line struct {
	Type LineType
	// Content is the line's text without git's " ", "+" or "-" prefix and
	// without its line ending.
	Content string
	// OldLineNumber is the line's number in the old file (context and
	// removed lines); NewLineNumber in the new file (context and added).
	OldLineNumber int
	NewLineNumber int
	// NoNewline marks a last line that has no line ending ("\ No newline
	// at end of file" in git's output).
	NoNewline bool
}

// Diff returns the structured diff of the repository containing dir: the
// working tree against the index, or with cached the index against HEAD.
// files limits it to those paths (relative to the repository's top level,
// taken literally); nil means every change, an empty list none.
//
// It agrees hunk for hunk with `git diff` (`git diff --cached`) under git's
// default diff settings: Myers with the indent heuristic, three lines of
// context, rename detection. The user's configuration cannot change that.
// Three choices go beyond plain `git diff`:
//
//   - Untracked files are part of the unstaged diff (git diff omits them),
//     after the tracked changes, as new files with status "untracked", the
//     same status Status gives them: every line added, as `git diff
//     --no-index /dev/null FILE` shows them (binary when their first 8000
//     bytes hold a NUL byte).
//   - A change of kind (a file that became a symbolic link), which git prints
//     as a deletion followed by a creation, is one FileDiff with status
//     "modified", TypeChanged set and both parts' hunks in git's order.
//   - A conflicted path is compared with our side of the merge (`git diff
//     --ours`, since a combined diff does not fit added/removed lines) and
//     marked Conflicted; in the cached diff it has no hunks.
//
// With files, a rename shows as a rename only when both its paths are named,
// as with `git diff -- paths`.
//
// The result is bounded (MaxFileDiffBytes, MaxDiffBytes): what passes the
// bounds is cut and marked Truncated.
func (g Git) Diff(ctx context.Context, dir string, files []string, cached bool) (*DiffResult, error) {
	_, res, err := openRepoAnd(ctx, g, dir, func(r *repo, ctx context.Context) (*DiffResult, error) {
		if files != nil && len(files) == 0 {
			return &DiffResult{Files: []FileDiff{}}, nil
		}
		paths, err := r.namedPaths(files)
		if err != nil {
			return nil, err
		}
		if paths == nil && r.prefix != "" {
			paths = []string{r.prefix}
		}
		return r.diff(ctx, paths, cached)
	})
	return res, err
}

// diffArgs are the arguments that pin git's diff output to its defaults.
func diffArgs(cached bool, paths []string) []string {
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv",
		"--diff-algorithm=myers", "--indent-heuristic", "--unified=3", "--inter-hunk-context=0",
		"--src-prefix=a/", "--dst-prefix=b/", "--find-renames", "--no-relative", "--submodule=short", "--full-index"}
	if cached {
		args = append(args, "--cached")
	} else {
		args = append(args, "-2")
	}
	args = append(args, "--")
	return append(args, literal(paths)...)
}

func (r *repo) diff(ctx context.Context, paths []string, cached bool) (*DiffResult, error) {
	var (
		wg                sync.WaitGroup
		patch, untracked  []byte
		over              bool
		errDiff, errUntrk error
	)
	wg.Go(func() {
		patch, over, errDiff = r.g.gitCapped(ctx, r.top, r.write, nil, 2*MaxDiffBytes, diffArgs(cached, paths)...)
	})
	if !cached {
		wg.Go(func() {
			args := append([]string{"ls-files", "-z", "--others", "--exclude-standard", "--"}, literal(paths)...)
			untracked, errUntrk = r.git(ctx, nil, args...)
		})
	}
	wg.Wait()
	if err := errors.Join(errDiff, errUntrk); err != nil {
		return nil, err
	}
	diffs, err := parsePatch(wholeFiles(patch, over))
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(r.top)
	if err != nil {
		return nil, fmt.Errorf("gitops: %w", err)
	}
	defer root.Close()
	for _, p := range bytes.Split(untracked, []byte{0}) {
		if len(p) == 0 {
			continue
		}
		fd, err := untrackedDiff(root, string(p))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		diffs = append(diffs, fd)
	}
	return bound(diffs, over), nil
}

// fingerprint is FileDiff.Fingerprint: a hash of the paths, the status,
// the modes and both sides' object names (an untracked file's size and
// modification time, which git's own change detection trusts too).
func fingerprint(fd FileDiff) string {
	h := sha256.New()
	for _, s := range []string{fd.OldPath, fd.NewPath, string(fd.Status), fd.OldMode, fd.NewMode, fd.oldOID, fd.newOID, fd.stat} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// wholeFiles is a patch without its last file when git's output was cut
// (over): only the files that arrived whole are parsed.
func wholeFiles(patch []byte, over bool) []byte {
	if !over {
		return patch
	}
	if i := bytes.LastIndex(patch, []byte("\ndiff --git ")); i >= 0 {
		return patch[:i+1]
	}
	return nil
}

// bound fingerprints diffs whole, then cuts them to MaxFileDiffBytes a
// file and MaxDiffBytes in all.
func bound(diffs []FileDiff, cut bool) *DiffResult {
	if diffs == nil {
		diffs = []FileDiff{}
	}
	for i := range diffs {
		diffs[i].Fingerprint = fingerprint(diffs[i])
	}
	res := &DiffResult{Files: diffs, Truncated: cut}
	total := 0
	for i := range diffs {
		fd := &diffs[i]
		budget := min(MaxFileDiffBytes, MaxDiffBytes-total)
		used := 0
	hunks:
		for h := range fd.Hunks {
			for l, line := range fd.Hunks[h].Lines {
				if used+len(line.Content)+1 > budget {
					fd.Hunks[h].Lines = fd.Hunks[h].Lines[:l]
					fd.Hunks = fd.Hunks[:h+1]
					if l == 0 {
						fd.Hunks = fd.Hunks[:h]
					}
					fd.Truncated = true
					break hunks
				}
				used += len(line.Content) + 1
			}
		}
		if fd.Truncated {
			fd.Additions, fd.Deletions = 0, 0
			for _, h := range fd.Hunks {
				for _, line := range h.Lines {
					switch line.Type {
					case LineAdded:
						fd.Additions++
					case LineRemoved:
						fd.Deletions++
					}
				}
			}
			if total+used >= MaxDiffBytes {
				res.Truncated = true
			}
		}
		total += used
	}
	return res
}

// untrackedDiff builds the diff of an untracked file against nothing. It
// reads through root, the working tree, so that a link the agent swaps in
// meanwhile cannot make it read outside (os.Root refuses to leave it), and
// reads at most MaxFileDiffBytes (and a byte) of it.
func untrackedDiff(root *os.Root, path string) (FileDiff, error) {
	fd := FileDiff{Path: path, OldPath: path, NewPath: path, Status: StatusUntracked, Hunks: []Hunk{}}
	name := filepath.FromSlash(path)
	info, err := root.Lstat(name)
	if err != nil {
		return fd, fmt.Errorf("gitops: untracked file: %w", err)
	}
	fd.stat = fmt.Sprintf("%d %d %v", info.Size(), info.ModTime().UnixNano(), info.Mode())
	var content []byte
	switch {
	case info.Mode()&os.ModeSymlink != 0:
		target, err := root.Readlink(name)
		if err != nil {
			return fd, fmt.Errorf("gitops: untracked file: %w", err)
		}
		fd.NewMode, content = "120000", []byte(target)
	case info.Mode().IsRegular():
		fd.NewMode = "100644"
		if info.Mode().Perm()&0o100 != 0 {
			fd.NewMode = "100755"
		}
		f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return fd, fmt.Errorf("gitops: untracked file: %w", err)
		}
		content, err = io.ReadAll(io.LimitReader(f, MaxFileDiffBytes+1))
		f.Close()
		if err != nil {
			return fd, fmt.Errorf("gitops: untracked file: %w", err)
		}
		// What was read is in the fingerprint, not only the size and
		// time, which a writer can keep while changing the bytes.
		h := sha256.Sum256(content)
		fd.stat += " " + hex.EncodeToString(h[:])
		if len(content) > MaxFileDiffBytes {
			// Whole lines only; bound marks the file.
			content = content[:bytes.LastIndexByte(content[:MaxFileDiffBytes], '\n')+1]
			fd.Truncated = true
		}
	default:
		return fd, nil
	}
	if bytes.IndexByte(content[:min(len(content), binarySniffLen)], 0) >= 0 {
		fd.Binary = true
		return fd, nil
	}
	if len(content) == 0 {
		return fd, nil
	}
	text := string(content)
	noNewline := !strings.HasSuffix(text, "\n")
	parts := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	h := Hunk{OldStart: 0, OldLines: 0, NewStart: 1, NewLines: len(parts), Lines: make([]Line, len(parts))}
	h.Header = hunkHeader(h)
	for i, p := range parts {
		h.Lines[i] = Line{Type: LineAdded, Content: p, NewLineNumber: i + 1}
	}
	h.Lines[len(parts)-1].NoNewline = noNewline
	fd.Additions = len(parts)
	fd.Hunks = []Hunk{h}
	return fd, nil
}

// hunkHeader formats a hunk header the way git does: a count of one is left
// out.
func hunkHeader(h Hunk) string {
	side := func(start, lines int) string {
		if lines == 1 {
			return strconv.Itoa(start)
		}
		return strconv.Itoa(start) + "," + strconv.Itoa(lines)
	}
	return "@@ -" + side(h.OldStart, h.OldLines) + " +" + side(h.NewStart, h.NewLines) + " @@"
}

// parsePatch decodes the output of `git diff` (unified format, with git's
// extended headers) into file diffs.
func parsePatch(data []byte) ([]FileDiff, error) {
	p := &patchParser{lines: splitLines(data)}
	return p.parse()
}

// splitLines splits text at "\n"; a final line without one is kept.
func splitLines(data []byte) []string {
	s := string(data)
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

type patchParser struct {
	lines []string
	i     int
}

func (p *patchParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: patch line %d: %s", errParse, p.i+1, fmt.Sprintf(format, args...))
}

func (p *patchParser) parse() ([]FileDiff, error) {
	files := []FileDiff{}
	unmerged := -1 // index in files of a conflicted path's placeholder
	for p.i < len(p.lines) {
		line := p.lines[p.i]
		switch {
		case strings.HasPrefix(line, "* Unmerged path "):
			path, err := unquoteMaybe(strings.TrimPrefix(line, "* Unmerged path "))
			if err != nil || path == "" {
				return nil, p.errorf("bad unmerged path %q", line)
			}
			files = append(files, FileDiff{Path: path, OldPath: path, NewPath: path,
				Status: StatusModified, Conflicted: true, Hunks: []Hunk{}})
			unmerged = len(files) - 1
			p.i++
		case strings.HasPrefix(line, "diff --git "):
			fd, err := p.file()
			if err != nil {
				return nil, err
			}
			n := len(files)
			switch {
			case unmerged >= 0 && unmerged == n-1 && files[n-1].Path == fd.Path:
				fd.Conflicted = true
				files[n-1] = fd
			case n > 0 && isTypeChange(files[n-1], fd):
				mergeTypeChange(&files[n-1], fd)
			default:
				files = append(files, fd)
			}
			unmerged = -1
		default:
			return nil, p.errorf("unexpected %q", line)
		}
	}
	return files, nil
}

// isTypeChange reports whether a and b are git's two halves of one path's
// change of kind: a deletion followed by a creation.
func isTypeChange(a, b FileDiff) bool {
	return a.Status == StatusDeleted && b.Status == StatusAdded && a.Path == b.Path && !a.TypeChanged
}

func mergeTypeChange(a *FileDiff, b FileDiff) {
	a.Status, a.TypeChanged = StatusModified, true
	a.NewMode = b.NewMode
	a.Binary = a.Binary || b.Binary
	a.Additions += b.Additions
	a.Deletions += b.Deletions
	a.Hunks = append(a.Hunks, b.Hunks...)
	a.newOID = b.newOID
}

// file parses one "diff --git" section.
func (p *patchParser) file() (FileDiff, error) {
	fd := FileDiff{Status: StatusModified, Hunks: []Hunk{}}
	headA, headB, headOK := parseGitHeaderNames(strings.TrimPrefix(p.lines[p.i], "diff --git "))
	var oldName, newName, minus, plus string
	var haveMinus, havePlus bool
	p.i++
	for p.i < len(p.lines) {
		line := p.lines[p.i]
		if strings.HasPrefix(line, "diff --git ") || strings.HasPrefix(line, "* Unmerged path ") {
			break
		}
		var err error
		switch {
		case strings.HasPrefix(line, "@@ "):
			var h Hunk
			if h, err = p.hunk(); err != nil {
				return fd, err
			}
			fd.Hunks = append(fd.Hunks, h)
			for _, l := range h.Lines {
				switch l.Type {
				case LineAdded:
					fd.Additions++
				case LineRemoved:
					fd.Deletions++
				}
			}
			continue
		case strings.HasPrefix(line, "old mode "):
			fd.OldMode = strings.TrimPrefix(line, "old mode ")
		case strings.HasPrefix(line, "new mode "):
			fd.NewMode = strings.TrimPrefix(line, "new mode ")
		case strings.HasPrefix(line, "deleted file mode "):
			fd.OldMode, fd.Status = strings.TrimPrefix(line, "deleted file mode "), StatusDeleted
		case strings.HasPrefix(line, "new file mode "):
			fd.NewMode, fd.Status = strings.TrimPrefix(line, "new file mode "), StatusAdded
		case strings.HasPrefix(line, "index "):
			oids, mode, ok := strings.Cut(strings.TrimPrefix(line, "index "), " ")
			if ok {
				fd.OldMode, fd.NewMode = mode, mode
			}
			fd.oldOID, fd.newOID, _ = strings.Cut(oids, "..")
		case strings.HasPrefix(line, "similarity index "):
			fd.Similarity, err = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "similarity index "), "%"))
		case strings.HasPrefix(line, "dissimilarity index "):
		case strings.HasPrefix(line, "rename from "):
			oldName, err = unquoteMaybe(strings.TrimPrefix(line, "rename from "))
			fd.Status = StatusRenamed
		case strings.HasPrefix(line, "rename to "):
			newName, err = unquoteMaybe(strings.TrimPrefix(line, "rename to "))
		case strings.HasPrefix(line, "copy from "):
			oldName, err = unquoteMaybe(strings.TrimPrefix(line, "copy from "))
			fd.Status = StatusAdded
		case strings.HasPrefix(line, "copy to "):
			newName, err = unquoteMaybe(strings.TrimPrefix(line, "copy to "))
		case strings.HasPrefix(line, "--- "):
			minus, err = unquoteMaybe(trimNameTab(strings.TrimPrefix(line, "--- ")))
			haveMinus = true
		case strings.HasPrefix(line, "+++ "):
			plus, err = unquoteMaybe(trimNameTab(strings.TrimPrefix(line, "+++ ")))
			havePlus = true
		case strings.HasPrefix(line, "Binary files ") && strings.HasSuffix(line, " differ"):
			fd.Binary = true
		default:
			return fd, p.errorf("unexpected %q", line)
		}
		if err != nil {
			return fd, p.errorf("%v", err)
		}
		p.i++
	}
	switch {
	case oldName != "" || newName != "":
	case haveMinus || havePlus:
		oldName = strings.TrimPrefix(minus, "a/")
		newName = strings.TrimPrefix(plus, "b/")
		if minus == "/dev/null" {
			oldName = newName
		}
		if plus == "/dev/null" {
			newName = oldName
		}
	case headOK:
		oldName, newName = headA, headB
	}
	if oldName == "" || newName == "" {
		return fd, p.errorf("file without a name")
	}
	fd.OldPath, fd.NewPath, fd.Path = oldName, newName, newName
	return fd, nil
}

// trimNameTab drops the tab git appends to a ---/+++ name that contains a
// space.
func trimNameTab(name string) string {
	if strings.Contains(name, " ") {
		return strings.TrimSuffix(name, "\t")
	}
	return name
}

// hunk parses one hunk, from its "@@" header to its last line.
func (p *patchParser) hunk() (Hunk, error) {
	header := p.lines[p.i]
	var h Hunk
	ranges, _, ok := strings.Cut(strings.TrimPrefix(header, "@@ "), " @@")
	oldR, newR, ok2 := strings.Cut(ranges, " ")
	if !ok || !ok2 || !strings.HasPrefix(oldR, "-") || !strings.HasPrefix(newR, "+") {
		return h, p.errorf("bad hunk header %q", header)
	}
	var err1, err2 error
	h.OldStart, h.OldLines, err1 = parseRange(oldR[1:])
	h.NewStart, h.NewLines, err2 = parseRange(newR[1:])
	if err1 != nil || err2 != nil {
		return h, p.errorf("bad hunk header %q", header)
	}
	h.Header = header
	rest := len(p.lines) - p.i
	h.Lines = make([]Line, 0, min(min(h.OldLines, rest)+min(h.NewLines, rest), rest))
	oldLeft, newLeft := h.OldLines, h.NewLines
	oldNo, newNo := h.OldStart, h.NewStart
	p.i++
	for p.i < len(p.lines) {
		line := p.lines[p.i]
		if strings.HasPrefix(line, `\`) {
			if len(h.Lines) == 0 {
				return h, p.errorf("no-newline marker before any line")
			}
			h.Lines[len(h.Lines)-1].NoNewline = true
			p.i++
			continue
		}
		if oldLeft == 0 && newLeft == 0 {
			break
		}
		var l Line
		tag, content := byte(' '), ""
		if line != "" {
			tag, content = line[0], line[1:]
		}
		switch {
		case tag == ' ' && oldLeft > 0 && newLeft > 0:
			l = Line{Type: LineContext, Content: content, OldLineNumber: oldNo, NewLineNumber: newNo}
			oldNo, newNo, oldLeft, newLeft = oldNo+1, newNo+1, oldLeft-1, newLeft-1
		case tag == '-' && oldLeft > 0:
			l = Line{Type: LineRemoved, Content: content, OldLineNumber: oldNo}
			oldNo, oldLeft = oldNo+1, oldLeft-1
		case tag == '+' && newLeft > 0:
			l = Line{Type: LineAdded, Content: content, NewLineNumber: newNo}
			newNo, newLeft = newNo+1, newLeft-1
		default:
			return h, p.errorf("unexpected hunk line %q", line)
		}
		h.Lines = append(h.Lines, l)
		p.i++
	}
	if oldLeft != 0 || newLeft != 0 {
		return h, p.errorf("hunk %q ends early", header)
	}
	return h, nil
}

// parseRange decodes "start[,count]" of a hunk header.
func parseRange(s string) (start, count int, err error) {
	a, b, hasCount := strings.Cut(s, ",")
	start, err = strconv.Atoi(a)
	if err != nil || start < 0 {
		return 0, 0, fmt.Errorf("%w: range %q", errParse, s)
	}
	count = 1
	if hasCount {
		count, err = strconv.Atoi(b)
		if err != nil || count < 0 {
			return 0, 0, fmt.Errorf("%w: range %q", errParse, s)
		}
	}
	return start, count, nil
}

// parseGitHeaderNames splits the names of a "diff --git a/X b/Y" line and
// strips their prefixes. Unquoted names are only split when both are the
// same path, the one case that is not ambiguous; other cases carry rename,
// copy or ---/+++ lines that name the paths.
func parseGitHeaderNames(s string) (a, b string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		first, rest, err := unquotePrefix(s)
		if err != nil || !strings.HasPrefix(rest, " ") {
			return "", "", false
		}
		second, err := unquoteMaybe(rest[1:])
		if err != nil {
			return "", "", false
		}
		a, okA := strings.CutPrefix(first, "a/")
		b, okB := strings.CutPrefix(second, "b/")
		return a, b, okA && okB
	}
	if (len(s)-5)%2 != 0 || len(s) < 7 {
		return "", "", false
	}
	name := s[2 : 2+(len(s)-5)/2]
	if s != "a/"+name+" b/"+name {
		return "", "", false
	}
	return name, name, true
}

// unquoteMaybe returns s, or its C-style unquoted value when git quoted it.
func unquoteMaybe(s string) (string, error) {
	if !strings.HasPrefix(s, `"`) {
		return s, nil
	}
	v, rest, err := unquotePrefix(s)
	if err != nil {
		return "", err
	}
	if rest != "" {
		return "", fmt.Errorf("%w: text after quoted name %q", errParse, s)
	}
	return v, nil
}

// unquotePrefix decodes the double-quoted, C-style escaped string that s
// starts with, as git writes names with special characters, and returns the
// text after the closing quote.
func unquotePrefix(s string) (string, string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			i++
			if i >= len(s) {
				return "", "", fmt.Errorf("%w: unterminated escape in %q", errParse, s)
			}
			switch e := s[i]; e {
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'v':
				b.WriteByte('\v')
			case 'f':
				b.WriteByte('\f')
			case 'r':
				b.WriteByte('\r')
			case '"', '\\':
				b.WriteByte(e)
			case '0', '1', '2', '3':
				if i+2 >= len(s) || !isOctal(s[i+1]) || !isOctal(s[i+2]) {
					return "", "", fmt.Errorf("%w: bad octal escape in %q", errParse, s)
				}
				b.WriteByte((e-'0')<<6 | (s[i+1]-'0')<<3 | (s[i+2] - '0'))
				i += 2
			default:
				return "", "", fmt.Errorf("%w: bad escape in %q", errParse, s)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("%w: unterminated quote in %q", errParse, s)
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
