package bridge

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/tetherdev/tether/history"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/wire"
)

// The session history over the protocol [extension]: every session this
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

// HistoryProject is one project of a history_projects_response.
type HistoryProject struct {
	Project      string `json:"project"`
	Sessions     int    `json:"sessions"`
	LastActivity string `json:"last_activity"`
}

// historyList is the payload of history_list.
type historyList struct {
	Project string `json:"project"`
	Query   string `json:"query"`
	Cursor  string `json:"cursor"`
	Limit   int    `json:"limit"`
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

// historyRead is the payload of history_read.
type historyRead struct {
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

// historyResume is the payload of history_resume.
type historyResume struct {
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

func (c *conn) historyIndex() (*history.Index, error) {
	if c.s.History == nil {
		return nil, wire.Errorf(wire.CodeBridgeError, "this daemon keeps no session history")
	}
	return c.s.History, nil
}

func (c *conn) historyProjects(env wire.Envelope) error {
	h, err := c.historyIndex()
	if err != nil {
		return err
	}
	if err := wire.DecodePayload(env, &struct{}{}); err != nil {
		return err
	}
	projects, err := h.Projects(c.ctx)
	if err != nil {
		return err
	}
	out := struct {
		Projects []HistoryProject `json:"projects"`
		Indexing bool             `json:"indexing"`
	}{Projects: []HistoryProject{}, Indexing: !ready(h)}
	for _, p := range projects {
		out.Projects = append(out.Projects, HistoryProject{Project: p.Path, Sessions: p.Sessions, LastActivity: wire.Timestamp(p.LastActivity)})
	}
	c.send(TypeHistoryProjectsResponse, env.ID, out)
	return nil
}

func ready(h *history.Index) bool {
	select {
	case <-h.Ready():
		return true
	default:
		return false
	}
}

func (c *conn) historyList(env wire.Envelope) error {
	h, err := c.historyIndex()
	if err != nil {
		return err
	}
	var p historyList
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	switch {
	case p.Limit < 0 || p.Limit > MaxHistoryList:
		return wire.Errorf(wire.CodeInvalidMessage, "limit must be between 1 and %d", MaxHistoryList)
	case utf8.RuneCountInString(p.Query) > MaxHistoryQuery:
		return wire.Errorf(wire.CodeInvalidMessage, "query must be at most %d characters", MaxHistoryQuery)
	case p.Limit == 0:
		p.Limit = DefaultHistoryList
	}
	page, err := h.List(c.ctx, history.Query{Project: p.Project, Text: p.Query, Cursor: p.Cursor, Limit: p.Limit})
	if err != nil {
		return err
	}
	out := HistoryListResponse{Sessions: []HistorySession{}, NextCursor: page.Next, Indexing: !ready(h)}
	for _, s := range page.Sessions {
		out.Sessions = append(out.Sessions, HistorySession{HistoryID: s.ID, Source: s.Source, Agent: s.Agent, Project: s.Project, Title: s.Title,
			StartedAt: wire.Timestamp(s.StartedAt), LastActivity: wire.Timestamp(s.LastActivity), Messages: s.Messages, Live: s.Live,
			SessionID: s.SessionID, AgentSessionID: s.AgentSessionID, Resumable: resumable(s)})
	}
	c.send(TypeHistoryListResponse, env.ID, out)
	return nil
}

// resumable reports whether history_resume continues s: a tether session,
// or a Claude Code conversation that claude --resume can continue.
func resumable(s history.Session) bool {
	return s.Source == history.SourceTether || s.Source == history.SourceClaude && (s.SessionID != "" || s.Resumable)
}

func (c *conn) historyRead(env wire.Envelope) error {
	h, err := c.historyIndex()
	if err != nil {
		return err
	}
	var p historyRead
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	switch {
	case p.HistoryID == "":
		return wire.Errorf(wire.CodeInvalidMessage, "history_read needs history_id")
	case p.Limit < 0 || p.Limit > wire.MaxHistoryPage:
		return wire.Errorf(wire.CodeInvalidMessage, "limit must be between 1 and %d", wire.MaxHistoryPage)
	case p.Before < 0:
		return wire.Errorf(wire.CodeInvalidMessage, "before must be a page's before")
	case p.Limit == 0:
		p.Limit = wire.DefaultHistoryPage
	}
	conv, err := h.Read(c.ctx, p.HistoryID, p.Before, p.Limit)
	if err != nil {
		return err
	}
	out := HistoryReadResponse{HistoryID: p.HistoryID, Events: conv.Frames, HasMore: conv.More}
	if out.Events == nil {
		out.Events = []json.RawMessage{}
	}
	if conv.More {
		out.Before = conv.Before
	}
	c.send(TypeHistoryReadResponse, env.ID, out)
	return nil
}

// historyResume continues a session of the history as a tether session: a
// tether session resumes itself (as session_start with resume); a Claude
// Code conversation becomes a new sandboxed claude-code session in its own
// working directory (which must lie in a root) that runs claude with
// --resume of its id, unless a tether session of it is live, which is
// answered instead. session_ready follows, under the request's id.
func (c *conn) historyResume(env wire.Envelope) error {
	h, err := c.historyIndex()
	if err != nil {
		return err
	}
	var p historyResume
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.HistoryID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "history_resume needs history_id")
	}
	s, ok, err := h.Lookup(c.ctx, p.HistoryID)
	if err != nil {
		return err
	}
	if !ok {
		return wire.Errorf(wire.CodeSessionNotFound, "no session %q in the history", p.HistoryID)
	}
	if s.Source != history.SourceTether && s.Source != history.SourceClaude {
		return wire.Errorf(wire.CodeAgentError, "a %s session cannot be resumed here: only tether's own sessions and Claude Code's", s.Source)
	}
	start := wire.SessionStart{Policy: p.Policy, Model: p.Model, PermissionMode: p.PermissionMode, MaxThinkingTokens: p.MaxThinkingTokens}
	req := session.StartRequest{RequestID: env.ID}
	if s.SessionID != "" {
		rec, err := c.s.Store.Session(c.ctx, s.SessionID)
		if err != nil {
			return err
		}
		switch {
		case rec.Source == "sandbox":
			// The tether session that ran it resumes itself.
			start.SessionID, start.Resume = rec.ID, true
		case rec.Live():
			return wire.Errorf(wire.CodeAgentError, "session %q is live in a terminal: send it a message to take it over", rec.ID)
		}
	}
	if !start.Resume {
		if s.Source != history.SourceClaude || s.Project == "" {
			return wire.Errorf(wire.CodeAgentError, "session %q has nothing to resume", p.HistoryID)
		}
		// The id and the working directory come from a file whoever
		// writes the projects directory chose (a sandboxed agent can).
		if !s.Resumable {
			return wire.Errorf(wire.CodeInvalidMessage, "%q is not a Claude Code conversation claude --resume can continue: its id or its directory is not Claude Code's", s.AgentSessionID)
		}
		start.Agent, start.WorkingDirectory = "claude-code", s.Project
		start.Title = strings.TrimSpace(s.Title)
		req.AgentSessionID = s.AgentSessionID
	}
	req.SessionStart = start
	id, err := c.s.Sessions.Start(c.ctx, req)
	if err != nil {
		return err
	}
	c.send(TypeHistoryResumeResponse, env.ID, HistoryResumeResponse{HistoryID: p.HistoryID, SessionID: id})
	return nil
}
