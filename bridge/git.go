package bridge

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/tetherdev/tether/gitops"
	"github.com/tetherdev/tether/wire"
)

// Deadlines of git requests: past them git (and everything it started) is
// killed and the phone gets GIT_ERROR. A commit runs the user's hooks,
// which may take a while.
const (
	GitTimeout    = time.Minute
	CommitTimeout = 10 * time.Minute
)

// Git is what the bridge asks of a session's repository; gitops.Git
// implements it.
type Git interface {
	Status(ctx context.Context, dir string) (*gitops.StatusResult, error)
	Diff(ctx context.Context, dir string, files []string, cached bool) (*gitops.DiffResult, error)
	Commit(ctx context.Context, dir, message string, files []string) (*gitops.CommitResult, error)
	Log(ctx context.Context, dir, after string, limit int) (*gitops.LogResult, error)
	Show(ctx context.Context, dir, hash string) (*gitops.DiffResult, error)
}

// gitSentinels are the gitops errors whose text a phone may see.
var gitSentinels = []error{
	gitops.ErrNotRepository, gitops.ErrBareRepository, gitops.ErrGitNotInstalled, gitops.ErrInvalidPath,
	gitops.ErrPathNotFound, gitops.ErrNothingToCommit, gitops.ErrEmptyMessage, gitops.ErrDetachedHead,
	gitops.ErrUnmergedPaths, gitops.ErrMergeInProgress, gitops.ErrNoIdentity, gitops.ErrHookFailed, gitops.ErrUnsafeRepository,
	gitops.ErrUnknownCommit,
}

// gitError turns a gitops error into GIT_ERROR with a message safe to
// show: the sentinel's own text, never git's output or local paths (those
// go to the log).
func (c *conn) gitError(sessionID string, err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return err
	}
	c.s.Logger.Info("git request failed", "session", sessionID, "err", err)
	msg := "git failed; see the daemon's log"
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "git did not finish in time and was stopped"
	}
	for _, s := range append(gitSentinels, gitWriteSentinels...) {
		if errors.Is(err, s) {
			msg = strings.TrimPrefix(s.Error(), "gitops: ")
			break
		}
	}
	return &wire.Error{Code: wire.CodeGitError, Message: msg}
}

func (c *conn) gitDir(env wire.Envelope) (wire.GitRequest, string, error) {
	var p wire.GitRequest
	if err := wire.DecodePayload(env, &p); err != nil {
		return p, "", err
	}
	if p.SessionID == "" {
		return p, "", wire.Errorf(wire.CodeInvalidMessage, "session_id is required")
	}
	dir, err := c.sessionGitDir(p.SessionID)
	return p, dir, err
}

// sessionGitDir is the working directory a git request about a session
// runs in; GIT_ERROR when the daemon has no git.
func (c *conn) sessionGitDir(sessionID string) (string, error) {
	if c.s.Git == nil {
		return "", &wire.Error{Code: wire.CodeGitError, Message: "git is not available on this daemon"}
	}
	return c.s.Sessions.WorkDir(c.ctx, sessionID)
}

func (c *conn) gitStatus(env wire.Envelope) error {
	p, dir, err := c.gitDir(env)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, GitTimeout)
	defer cancel()
	st, err := c.s.Git.Status(ctx, dir)
	if err != nil {
		return c.gitError(p.SessionID, err)
	}
	c.sendStatus(env.ID, p.SessionID, st)
	return nil
}

func (c *conn) sendStatus(id, sessionID string, st *gitops.StatusResult) {
	c.send(wire.TypeGitStatusResponse, id, wire.GitStatusResponse{SessionID: sessionID, GitStatus: wireStatus(st)})
}

func (c *conn) gitDiff(env wire.Envelope) error {
	p, dir, err := c.gitDir(env)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, GitTimeout)
	defer cancel()
	res, err := c.s.Git.Diff(ctx, dir, p.Files, p.Cached)
	if err != nil {
		return c.gitError(p.SessionID, err)
	}
	c.send(wire.TypeGitDiffResponse, env.ID, wire.GitDiffResponse{SessionID: p.SessionID, Cached: p.Cached, GitDiff: wireDiff(res)})
	return nil
}

func (c *conn) gitLog(env wire.Envelope) error {
	var p wire.GitLog
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	switch {
	case p.SessionID == "":
		return wire.Errorf(wire.CodeInvalidMessage, "session_id is required")
	case p.Limit < 0 || p.Limit > gitops.MaxLogPage:
		return wire.Errorf(wire.CodeInvalidMessage, "limit must be between 1 and %d", gitops.MaxLogPage)
	}
	dir, err := c.sessionGitDir(p.SessionID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, GitTimeout)
	defer cancel()
	res, err := c.s.Git.Log(ctx, dir, p.After, p.Limit)
	if err != nil {
		return c.gitError(p.SessionID, err)
	}
	c.send(wire.TypeGitLogResponse, env.ID, wire.GitLogResponse{SessionID: p.SessionID, GitLogPage: wireLog(res)})
	return nil
}

func (c *conn) gitShow(env wire.Envelope) error {
	var p wire.GitShow
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.SessionID == "" || p.Hash == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "session_id and hash are required")
	}
	dir, err := c.sessionGitDir(p.SessionID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, GitTimeout)
	defer cancel()
	res, err := c.s.Git.Show(ctx, dir, p.Hash)
	if err != nil {
		return c.gitError(p.SessionID, err)
	}
	c.send(wire.TypeGitShowResponse, env.ID, wire.GitShowResponse{SessionID: p.SessionID, Hash: p.Hash, GitDiff: wireDiff(res)})
	return nil
}

func (c *conn) gitCommit(env wire.Envelope) error {
	p, dir, err := c.gitDir(env)
	if err != nil {
		return err
	}
	var res *gitops.CommitResult
	c.locked(dir, func() {
		ctx, cancel := context.WithTimeout(c.ctx, CommitTimeout)
		defer cancel()
		res, err = c.s.Git.Commit(ctx, dir, p.Message, p.Files)
	})
	if err != nil {
		return c.gitError(p.SessionID, err)
	}
	c.send(wire.TypeGitCommitResponse, env.ID, wire.GitCommitResponse{SessionID: p.SessionID, Hash: res.Hash, Branch: res.Branch, Summary: res.Summary})
	// Clients refresh their git screen on git_status_response: send the
	// fresh status too, under the same id.
	c.sendStatus(env.ID, p.SessionID, res.Status)
	return nil
}
