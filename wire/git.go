package wire

import (
	"encoding/json"
	"time"
)

// Git message types. Checkout, branch creation, stage and unstage are
// answered with git_status_response; commit, discard, push and pull with
// their own response and then git_status_response under the same id.
const (
	TypeGitStatusRequest    = "git_status_request"
	TypeGitStatusResponse   = "git_status_response"
	TypeGitDiff             = "git_diff"
	TypeGitDiffResponse     = "git_diff_response"
	TypeGitCommit           = "git_commit"
	TypeGitCommitResponse   = "git_commit_response"   // extension
	TypeGitLog              = "git_log"               // extension
	TypeGitLogResponse      = "git_log_response"      // extension
	TypeGitShow             = "git_show"              // extension
	TypeGitShowResponse     = "git_show_response"     // extension
	TypeGitBranches         = "git_branches"          // extension
	TypeGitBranchesResponse = "git_branches_response" // extension
	TypeGitCheckout         = "git_checkout"          // extension
	TypeGitBranchCreate     = "git_branch_create"     // extension
	TypeGitStage            = "git_stage"             // extension
	TypeGitUnstage          = "git_unstage"           // extension
	TypeGitDiscard          = "git_discard"           // extension
	TypeGitDiscardResponse  = "git_discard_response"  // extension
	TypeGitPush             = "git_push"              // extension
	TypeGitPushResponse     = "git_push_response"     // extension
	TypeGitPull             = "git_pull"              // extension
	TypeGitPullResponse     = "git_pull_response"     // extension
	TypeGitProgress         = "git_progress"          // extension
)

// GitRequest is the payload of git_status_request, git_diff and
// git_commit.
type GitRequest struct {
	SessionID string `json:"session_id"`
	// Files is null for "all" (diff) or "what is staged" (commit); an
	// empty list means none.
	Files   []string `json:"files"`
	Cached  bool     `json:"cached"`
	Message string   `json:"message"`
}

// GitLog is the payload of git_log (extension).
type GitLog struct {
	SessionID string `json:"session_id"`
	// After is the last commit's hash of the previous page; "" for the
	// newest.
	After string `json:"after,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// GitShow is the payload of git_show (extension).
type GitShow struct {
	SessionID string `json:"session_id"`
	Hash      string `json:"hash"`
}

// GitSession is the payload of git_branches (extension), and names the
// session of the other git requests.
type GitSession struct {
	SessionID string `json:"session_id"`
}

// GitCheckout is the payload of git_checkout (extension).
type GitCheckout struct {
	GitSession
	Branch string `json:"branch"`
}

// GitBranchCreate is the payload of git_branch_create (extension).
type GitBranchCreate struct {
	GitSession
	Name       string `json:"name"`
	StartPoint string `json:"start_point"`
	Checkout   bool   `json:"checkout"`
}

// GitStage is the payload of git_stage, git_unstage and git_discard
// (extension): whole files, or one hunk of one file (path, fingerprint,
// hunk).
type GitStage struct {
	GitSession
	// Files are whole files: paths (stage, unstage) or {path, fingerprint}
	// objects (discard).
	Files       []GitFileRef `json:"files"`
	Path        string       `json:"path"`
	Fingerprint string       `json:"fingerprint"`
	Hunk        *int         `json:"hunk"`
}

// GitFileRef is a file of git_stage's files: a path, or {"path",
// "fingerprint"}.
type GitFileRef struct {
	Path        string `json:"path"`
	Fingerprint string `json:"fingerprint"`
}

// UnmarshalJSON reads a path or a {"path", "fingerprint"} object.
func (f *GitFileRef) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &f.Path)
	}
	type plain GitFileRef
	return json.Unmarshal(b, (*plain)(f))
}

// GitRemote is the payload of git_push and git_pull (extension).
type GitRemote struct {
	GitSession
	Remote string `json:"remote"`
	URL    string `json:"url"`
	Rebase bool   `json:"rebase"`
}

// GitStatus is the status of a session's repository, the payload of
// git_status_response (with GitStatusResponse's session_id).
type GitStatus struct {
	// Branch is the current branch's short name; when HEAD is detached it
	// reads "HEAD (detached at abc1234)".
	Branch string `json:"branch"`
	// Detached is true when HEAD is not on a branch.
	Detached bool `json:"detached"`
	// Head is the full hash of the HEAD commit; empty before the first
	// commit.
	Head string `json:"head,omitempty"`
	// Upstream is the configured upstream branch (e.g. "origin/main").
	Upstream string `json:"upstream,omitempty"`
	// HasUpstream is true when an upstream is configured and exists.
	HasUpstream bool `json:"has_upstream"`
	// Ahead and Behind count commits relative to the upstream; 0 without
	// one.
	Ahead  int `json:"ahead"`
	Behind int `json:"behind"`
	// State is the operation in progress ("merging", "rebasing",
	// "applying", "cherry-picking", "reverting", "bisecting"), if any.
	State string `json:"state,omitempty"`
	// IsClean is true when there is no change at all, untracked files
	// included.
	IsClean bool `json:"is_clean"`
	// Changes lists every change, in git's order; never null.
	Changes []GitChange `json:"changes"`
}

// Change kinds: only these five exist on the wire. Type changes and
// conflicts are "modified" with a flag; copies are "added" with old_path
// naming the source.
const (
	ChangeModified  = "modified"
	ChangeAdded     = "added"
	ChangeDeleted   = "deleted"
	ChangeUntracked = "untracked"
	ChangeRenamed   = "renamed"
)

// GitChange is one changed path of a GitStatus. A path changed both in the
// index and in the working tree appears twice, once staged and once not.
type GitChange struct {
	// Path is relative to the repository's top level (the new path of a
	// rename).
	Path string `json:"path"`
	// OldPath is the source of a rename or copy.
	OldPath string `json:"old_path,omitempty"`
	// Status is one of the five change kinds.
	Status string `json:"status"`
	// Staged is true for a change between HEAD and the index, false for a
	// change between the index and the working tree (and untracked files).
	Staged bool `json:"staged"`
	// Conflicted marks an unmerged path (status "modified").
	Conflicted bool `json:"conflicted,omitempty"`
	// TypeChanged marks a change of kind: file, symbolic link or submodule
	// (status "modified").
	TypeChanged bool `json:"type_changed,omitempty"`
	// Binary is true when git considers the content binary; Additions and
	// Deletions are then 0.
	Binary bool `json:"binary,omitempty"`
	// Additions and Deletions count lines, as `git diff --numstat` does.
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
}

// GitStatusResponse is the payload of git_status_response.
type GitStatusResponse struct {
	SessionID string `json:"session_id"`
	*GitStatus
}

// GitDiff is a diff: its files, and whether it was cut.
type GitDiff struct {
	Files []GitFileDiff `json:"files"`
	// Truncated is true when files are missing or cut because the diff
	// passed the daemon's limit (the cut files say so themselves).
	Truncated bool `json:"truncated,omitempty"`
}

// GitFileDiff is the diff of one file, an entry of a diff's files.
type GitFileDiff struct {
	// Path is the file's path (the new path of a rename).
	Path string `json:"path"`
	// OldPath and NewPath are the two sides' paths; both equal Path except
	// for renames and copies.
	OldPath string `json:"old_path"`
	NewPath string `json:"new_path"`
	// Status is one of the five change kinds.
	Status string `json:"status"`
	// Additions and Deletions count the added and removed lines of Hunks.
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
	// Binary is true when git found the content binary; there are no hunks.
	Binary bool `json:"binary"`
	// OldMode and NewMode are git's octal file modes ("100644", "100755",
	// "120000", "160000"); a side that does not exist has none.
	OldMode string `json:"old_mode,omitempty"`
	NewMode string `json:"new_mode,omitempty"`
	// Similarity is the similarity index of a rename or copy, in percent.
	Similarity int `json:"similarity,omitempty"`
	// TypeChanged marks a change of kind (file, symbolic link, submodule).
	TypeChanged bool `json:"type_changed,omitempty"`
	// Conflicted marks an unmerged path.
	Conflicted bool `json:"conflicted,omitempty"`
	// Hunks are the changed regions, in order; never null.
	Hunks []GitHunk `json:"hunks"`
	// Truncated marks a file whose hunks stop short.
	Truncated bool `json:"truncated,omitempty"`
	// Fingerprint identifies this change of the file: a client names it to
	// stage, unstage or discard the change it showed, and the daemon
	// refuses when the file has changed since.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// GitHunk is one changed region of a file.
type GitHunk struct {
	// Header is git's hunk header line, "@@ -10,5 +10,5 @@" followed by the
	// function context git prints after it, if any.
	Header   string `json:"header"`
	OldStart int    `json:"old_start"`
	OldLines int    `json:"old_lines"`
	NewStart int    `json:"new_start"`
	NewLines int    `json:"new_lines"`
	// Lines are the hunk's lines, in order; never null.
	Lines []GitLine `json:"lines"`
}

// Kinds of diff lines.
const (
	LineContext = "context"
	LineAdded   = "added"
	LineRemoved = "removed"
)

// GitLine is one line of a hunk.
type GitLine struct {
	// Type is LineContext, LineAdded or LineRemoved.
	Type string `json:"type"`
	// Content is the line's text without git's " ", "+" or "-" prefix and
	// without its line ending.
	Content string `json:"content"`
	// OldLineNumber is the line's number in the old file (context and
	// removed lines); NewLineNumber in the new file (context and added).
	OldLineNumber int `json:"old_line_number,omitempty"`
	NewLineNumber int `json:"new_line_number,omitempty"`
	// NoNewline marks a last line that has no line ending.
	NoNewline bool `json:"no_newline,omitempty"`
}

// GitDiffResponse is the payload of git_diff_response.
type GitDiffResponse struct {
	SessionID string `json:"session_id"`
	Cached    bool   `json:"cached"`
	*GitDiff
}

// GitShowResponse is the payload of git_show_response (extension): one
// commit's diff.
type GitShowResponse struct {
	SessionID string `json:"session_id"`
	Hash      string `json:"hash"`
	*GitDiff
}

// GitCommitResponse is the payload of git_commit_response (extension); the
// fresh status follows as git_status_response under the same id.
type GitCommitResponse struct {
	SessionID string `json:"session_id"`
	// Hash is the new commit's full hash.
	Hash string `json:"hash"`
	// Branch is the branch the commit was made on.
	Branch string `json:"branch"`
	// Summary is the commit message's subject, as git shows it.
	Summary string `json:"summary"`
}

// GitLogCommit is one commit of a history page.
type GitLogCommit struct {
	Hash    string   `json:"hash"`
	Parents []string `json:"parents"`
	Author  string   `json:"author"`
	Email   string   `json:"email"`
	// Date is the author date, RFC 3339 with its zone.
	Date    string `json:"date"`
	Subject string `json:"subject"`
	Body    string `json:"body,omitempty"`
	// Files are the files the commit changed against its first parent.
	Files []GitLogFile `json:"files"`
}

// GitLogFile is a file a commit changed.
type GitLogFile struct {
	Path      string `json:"path"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
}

// GitLogPage is a page of history, newest first.
type GitLogPage struct {
	Commits []GitLogCommit `json:"commits"`
	// HasMore says older commits remain: ask again with after the last
	// commit's hash.
	HasMore bool `json:"has_more"`
}

// GitLogResponse is the payload of git_log_response (extension).
type GitLogResponse struct {
	SessionID string `json:"session_id"`
	*GitLogPage
}

// GitBranch is one branch of git_branches_response.
type GitBranch struct {
	// Name is the short name: "main", or "origin/main" for a
	// remote-tracking branch.
	Name string `json:"name"`
	// Hash is the commit the branch points at.
	Hash string `json:"hash"`
	// Current marks the checked-out branch.
	Current bool `json:"current,omitempty"`
	// Upstream is a local branch's upstream ("origin/main"), if it has one;
	// Ahead and Behind count the commits it has that the upstream has not,
	// and the other way round; UpstreamGone means the upstream is
	// configured but its remote-tracking branch no longer exists.
	Upstream     string `json:"upstream,omitempty"`
	Ahead        int    `json:"ahead"`
	Behind       int    `json:"behind"`
	UpstreamGone bool   `json:"upstream_gone,omitempty"`
	// Remote is a remote-tracking branch's remote.
	Remote string `json:"remote,omitempty"`
	// Date is the Unix time of the branch's last commit; Subject its
	// subject.
	Date    int64  `json:"date"`
	Subject string `json:"subject"`
}

// GitRemoteInfo is one remote of git_branches_response.
type GitRemoteInfo struct {
	Name string `json:"name"`
	// URL is as written in the repository's configuration, credentials
	// left out.
	URL string `json:"url"`
	// PushURL is where a push goes when it differs from URL.
	PushURL string `json:"push_url,omitempty"`
}

// GitBranches is a repository's branches and remotes.
type GitBranches struct {
	// Current is the checked-out branch; "" when HEAD is detached.
	Current string `json:"current"`
	// Detached is true when HEAD is not on a branch; Head is the commit
	// HEAD names ("" on a branch with no commit yet).
	Detached bool   `json:"detached"`
	Head     string `json:"head"`
	// Local and Remote are the local and remote-tracking branches, by name.
	Local  []GitBranch `json:"local"`
	Remote []GitBranch `json:"remote"`
	// Remotes are what a push or pull would reach, for the user to check.
	Remotes []GitRemoteInfo `json:"remotes"`
	// Truncated is true when one of the lists stopped at the daemon's
	// limit.
	Truncated bool `json:"truncated,omitempty"`
}

// GitBranchesResponse is the payload of git_branches_response (extension).
type GitBranchesResponse struct {
	SessionID string `json:"session_id"`
	*GitBranches
}

// GitDiscarded tells where discarded content can be recovered from.
type GitDiscarded struct {
	// Ref holds a commit whose tree has the discarded files as they were
	// in the working tree; "" when nothing needed keeping.
	Ref  string `json:"recovery_ref,omitempty"`
	Hash string `json:"recovery_hash,omitempty"`
	// Until is when the ref is deleted.
	Until time.Time `json:"kept_until,omitzero"`
}

// GitDiscardResponse is the payload of git_discard_response (extension).
type GitDiscardResponse struct {
	SessionID string `json:"session_id"`
	*GitDiscarded
}

// GitRemoteResult is the outcome of a push or pull.
type GitRemoteResult struct {
	Branch string `json:"branch"`
	Remote string `json:"remote"`
	// URL is the remote's URL without credentials.
	URL       string `json:"url"`
	RemoteRef string `json:"remote_ref"`
	// Before and After are HEAD's commit before and after a pull; for a
	// push, the remote-tracking branch's (as last fetched or pushed) and
	// the commit pushed.
	Before   string `json:"before"`
	After    string `json:"after"`
	UpToDate bool   `json:"up_to_date"`
	// SetUpstream: a push made Remote the branch's upstream.
	SetUpstream bool `json:"set_upstream,omitempty"`
}

// GitRemoteResponse is the payload of git_push_response and
// git_pull_response (extension); the status follows as
// git_status_response under the same id.
type GitRemoteResponse struct {
	SessionID string `json:"session_id"`
	*GitRemoteResult
}

// GitProgress is the payload of git_progress (extension): one progress
// report of a push or pull, as git prints it.
type GitProgress struct {
	SessionID string `json:"session_id"`
	// Operation is "push" or "pull".
	Operation string `json:"operation"`
	// Phase is git's phase ("Writing objects", "remote: Resolving deltas").
	Phase   string `json:"phase"`
	Percent int    `json:"percent"`
	Done    int    `json:"done"`
	Total   int    `json:"total"`
}
