package wire

import "encoding/json"

// The session history's message types (extension): every session this
// machine has had (tether's own, Claude Code's transcripts, Codex's
// rollouts), listed by project with paging and a text search, read as the
// events a live session produces, and resumed as a tether session.
const (
	TypeHistoryProjects         = "history_projects"
	TypeHistoryProjectsResponse = "history_projects_response"
	TypeHistoryList             = "history_list"
	TypeHistoryListResponse     = "history_list_response"
	TypeHistoryRead             = "history_read"
	TypeHistoryReadResponse     = "history_read_response"
	TypeHistoryResume           = "history_resume"
	TypeHistoryResumeResponse   = "history_resume_response"

	// DefaultHistoryList and MaxHistoryList bound a history_list page.
	DefaultHistoryList = 50
	MaxHistoryList     = 200
	// MaxHistoryQuery is the longest search text, in characters.
	MaxHistoryQuery = 200
)

// HistoryProject is one project of a history_projects_response.
type HistoryProject struct {
	Project      string `json:"project"`
	Sessions     int    `json:"sessions"`
	LastActivity string `json:"last_activity"`
}

// HistoryProjectsResponse is the payload of history_projects_response.
type HistoryProjectsResponse struct {
	Projects []HistoryProject `json:"projects"`
	// Indexing says the first scan of the files is not over: more
	// projects may come.
	Indexing bool `json:"indexing"`
}

// HistoryList is the payload of history_list.
type HistoryList struct {
	Project string `json:"project"`
	Query   string `json:"query"`
	Cursor  string `json:"cursor"`
	Limit   int    `json:"limit"`
}

// HistorySession is one session of a history_list_response.
type HistorySession struct {
	HistoryID    string `json:"history_id"`
	Source       string `json:"source"`
	Agent        string `json:"agent"`
	Project      string `json:"project"`
	Title        string `json:"title"`
	StartedAt    string `json:"started_at"`
	LastActivity string `json:"last_activity"`
	Messages     int    `json:"messages"`
	Live         bool   `json:"live"`
	// SessionID is the tether session that runs or ran it.
	SessionID      string `json:"session_id,omitempty"`
	AgentSessionID string `json:"agent_session_id,omitempty"`
	// Resumable says history_resume can continue it.
	Resumable bool `json:"resumable"`
}

// HistoryListResponse is the payload of history_list_response.
type HistoryListResponse struct {
	Sessions []HistorySession `json:"sessions"`
	// NextCursor asks for the next page; empty on the last.
	NextCursor string `json:"next_cursor,omitempty"`
	// Indexing says the first scan of the files is not over: more
	// sessions may come.
	Indexing bool `json:"indexing"`
}

// HistoryRead is the payload of history_read.
type HistoryRead struct {
	HistoryID string `json:"history_id"`
	Before    int64  `json:"before"`
	Limit     int    `json:"limit"`
}

// HistoryReadResponse is the payload of history_read_response.
type HistoryReadResponse struct {
	HistoryID string            `json:"history_id"`
	Events    []json.RawMessage `json:"events"`
	// Before asks for the page before this one, when HasMore.
	Before  int64 `json:"before,omitempty"`
	HasMore bool  `json:"has_more"`
}

// HistoryResume is the payload of history_resume.
type HistoryResume struct {
	HistoryID         string `json:"history_id"`
	Policy            string `json:"policy"`
	Model             string `json:"model"`
	PermissionMode    string `json:"permission_mode"`
	MaxThinkingTokens int    `json:"max_thinking_tokens"`
}

// HistoryResumeResponse is the payload of history_resume_response.
type HistoryResumeResponse struct {
	HistoryID string `json:"history_id"`
	SessionID string `json:"session_id"`
}
