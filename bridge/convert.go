package bridge

import (
	"github.com/tetherdev/tether/fileops"
	"github.com/tetherdev/tether/gitops"
	"github.com/tetherdev/tether/wire"
	"time"
)

// The results of gitops and fileops become the protocol's types (package
// wire) here: the domain packages know nothing of the phone, and the
// protocol has one home. A nil slice stays nil and an empty one empty, so
// that null and [] come out as they were.

func mapSlice[T, U any](s []T, f func(T) U) []U {
	if s == nil {
		return nil
	}
	out := make([]U, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}

func wireStatus(st *gitops.StatusResult) *wire.GitStatus {
	if st == nil {
		return nil
	}
	return &wire.GitStatus{
		Branch: st.Branch, Detached: st.Detached, Head: st.Head, Upstream: st.Upstream, HasUpstream: st.HasUpstream,
		Ahead: st.Ahead, Behind: st.Behind, State: string(st.State), IsClean: st.IsClean,
		Changes: mapSlice(st.Changes, func(c gitops.Change) wire.GitChange {
			return wire.GitChange{Path: c.Path, OldPath: c.OldPath, Status: string(c.Status), Staged: c.Staged, Conflicted: c.Conflicted,
				TypeChanged: c.TypeChanged, Binary: c.Binary, Additions: c.Additions, Deletions: c.Deletions}
		}),
	}
}

func wireDiff(d *gitops.DiffResult) *wire.GitDiff {
	if d == nil {
		return nil
	}
	return &wire.GitDiff{Files: mapSlice(d.Files, wireFileDiff), Truncated: d.Truncated}
}

func wireFileDiff(f gitops.FileDiff) wire.GitFileDiff {
	return wire.GitFileDiff{
		Path: f.Path, OldPath: f.OldPath, NewPath: f.NewPath, Status: string(f.Status), Additions: f.Additions, Deletions: f.Deletions,
		Binary: f.Binary, OldMode: f.OldMode, NewMode: f.NewMode, Similarity: f.Similarity, TypeChanged: f.TypeChanged,
		Conflicted: f.Conflicted, Hunks: mapSlice(f.Hunks, wireHunk), Truncated: f.Truncated, Fingerprint: f.Fingerprint,
	}
}

func wireHunk(h gitops.Hunk) wire.GitHunk {
	return wire.GitHunk{
		Header: h.Header, OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines,
		Lines: mapSlice(h.Lines, func(l gitops.Line) wire.GitLine {
			return wire.GitLine{Type: string(l.Type), Content: l.Content, OldLineNumber: l.OldLineNumber, NewLineNumber: l.NewLineNumber, NoNewline: l.NoNewline}
		}),
	}
}

func wireLog(l *gitops.LogResult) *wire.GitLogPage {
	if l == nil {
		return nil
	}
	return &wire.GitLogPage{HasMore: l.HasMore, Commits: mapSlice(l.Commits, func(c gitops.LogCommit) wire.GitLogCommit {
		return wire.GitLogCommit{Hash: c.Hash, Parents: c.Parents, Author: c.Author, Email: c.Email, Date: c.Date, Subject: c.Subject, Body: c.Body,
			Files: mapSlice(c.Files, func(f gitops.LogFile) wire.GitLogFile {
				return wire.GitLogFile{Path: f.Path, Additions: f.Additions, Deletions: f.Deletions}
			})}
	})}
}

func wireBranches(b *gitops.BranchesResult) *wire.GitBranches {
	if b == nil {
		return nil
	}
	branch := func(i gitops.BranchInfo) wire.GitBranch {
		return wire.GitBranch{Name: i.Name, Hash: i.Hash, Current: i.Current, Upstream: i.Upstream, Ahead: i.Ahead, Behind: i.Behind,
			UpstreamGone: i.UpstreamGone, Remote: i.Remote, Date: i.Date, Subject: i.Subject}
	}
	return &wire.GitBranches{Current: b.Current, Detached: b.Detached, Head: b.Head, Local: mapSlice(b.Local, branch),
		Remote: mapSlice(b.Remote, branch), Truncated: b.Truncated,
		Remotes: mapSlice(b.Remotes, func(r gitops.RemoteInfo) wire.GitRemoteInfo {
			return wire.GitRemoteInfo{Name: r.Name, URL: r.URL, PushURL: r.PushURL}
		})}
}

func wireDiscarded(d *gitops.Discarded) *wire.GitDiscarded {
	if d == nil {
		return nil
	}
	return &wire.GitDiscarded{Ref: d.Ref, Hash: d.Hash, Until: d.Until}
}

func wireRemote(r *gitops.RemoteResult) *wire.GitRemoteResult {
	if r == nil {
		return nil
	}
	return &wire.GitRemoteResult{Branch: r.Branch, Remote: r.Remote, URL: r.URL, RemoteRef: r.RemoteRef, Before: r.Before, After: r.After,
		UpToDate: r.UpToDate, SetUpstream: r.SetUpstream}
}

func wireListing(l *fileops.Listing) *wire.FileListing {
	if l == nil {
		return nil
	}
	times := modified(l.Entries)
	entries := make([]wire.FileEntry, len(l.Entries))
	for i, e := range l.Entries {
		entries[i] = wire.FileEntry{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size, Modified: times[i], Symlink: e.Symlink}
	}
	return &wire.FileListing{Path: l.Path, Parent: l.Parent, Total: l.Total, Offset: l.Offset, Limit: l.Limit, HasMore: l.HasMore,
		Entries: entries}
}

// modified returns the entries' times as FileEntry.Modified carries them
// (RFC 3339, UTC; "" for none). They share one string: one allocation for
// a listing, not one an entry.
func modified(entries []fileops.Entry) []string {
	b := make([]byte, 0, len(entries)*len("2006-01-02T15:04:05Z"))
	ends := make([]int, len(entries))
	for i, e := range entries {
		if !e.Modified.IsZero() {
			b = e.Modified.UTC().AppendFormat(b, time.RFC3339)
		}
		ends[i] = len(b)
	}
	all := string(b)
	times := make([]string, len(entries))
	start := 0
	for i, end := range ends {
		times[i] = all[start:end]
		start = end
	}
	return times
}

func wireFile(f *fileops.File) *wire.FileContent {
	if f == nil {
		return nil
	}
	return &wire.FileContent{Path: f.Path, Content: f.Content, Size: f.Size, Lines: f.Lines, LinesPartial: f.LinesPartial, Offset: f.Offset,
		ReturnedLines: f.ReturnedLines, Truncated: f.Truncated, Encoding: f.Encoding, Binary: f.Binary, MIME: f.MIME}
}
