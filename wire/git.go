package wire

import "encoding/json"

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
