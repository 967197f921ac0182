package bridge

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/tetherdev/tether/history"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

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
	out := wire.HistoryProjectsResponse{Projects: []wire.HistoryProject{}, Indexing: !ready(h)}
	for _, p := range projects {
		out.Projects = append(out.Projects, wire.HistoryProject{Project: p.Path, Sessions: p.Sessions, LastActivity: wire.Timestamp(p.LastActivity)})
	}
	c.send(wire.TypeHistoryProjectsResponse, env.ID, out)
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
	var p wire.HistoryList
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	switch {
	case p.Limit < 0 || p.Limit > wire.MaxHistoryList:
		return wire.Errorf(wire.CodeInvalidMessage, "limit must be between 1 and %d", wire.MaxHistoryList)
	case utf8.RuneCountInString(p.Query) > wire.MaxHistoryQuery:
		return wire.Errorf(wire.CodeInvalidMessage, "query must be at most %d characters", wire.MaxHistoryQuery)
	case p.Limit == 0:
		p.Limit = wire.DefaultHistoryList
	}
	page, err := h.List(c.ctx, history.Query{Project: p.Project, Text: p.Query, Cursor: p.Cursor, Limit: p.Limit})
	if err != nil {
		return err
	}
	out := wire.HistoryListResponse{Sessions: []wire.HistorySession{}, NextCursor: page.Next, Indexing: !ready(h)}
	for _, s := range page.Sessions {
		out.Sessions = append(out.Sessions, wire.HistorySession{HistoryID: s.ID, Source: s.Source, Agent: s.Agent, Project: s.Project, Title: s.Title,
			StartedAt: wire.Timestamp(s.StartedAt), LastActivity: wire.Timestamp(s.LastActivity), Messages: s.Messages, Live: s.Live,
			SessionID: s.SessionID, AgentSessionID: s.AgentSessionID, Resumable: resumable(s)})
	}
	c.send(wire.TypeHistoryListResponse, env.ID, out)
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
	var p wire.HistoryRead
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
	out := wire.HistoryReadResponse{HistoryID: p.HistoryID, Events: conv.Frames, HasMore: conv.More}
	if out.Events == nil {
		out.Events = []json.RawMessage{}
	}
	if conv.More {
		out.Before = conv.Before
	}
	c.send(wire.TypeHistoryReadResponse, env.ID, out)
	return nil
}

// wire.HistoryResume continues a session of the history as a tether session: a
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
	var p wire.HistoryResume
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
		case rec.Source == store.SourceSandbox:
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
			return wire.Errorf(wire.CodeInvalidMessage, "%q is not a Claude Code conversation claude --resume can continue: its id or its directory is not Claude Code's, or another directory shares its directory's name", s.AgentSessionID)
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
	c.send(wire.TypeHistoryResumeResponse, env.ID, wire.HistoryResumeResponse{HistoryID: p.HistoryID, SessionID: id})
	return nil
}
