package bridge

import (
	"context"
	"sync"
	"time"

	"github.com/tetherdev/tether/gitops"
	"github.com/tetherdev/tether/wire"
)

// RemoteTimeout is the deadline of a push or pull: a slow network, a
// large history.
const RemoteTimeout = 10 * time.Minute

// GitWriter is what the bridge asks of a repository beyond reading it;
// gitops.Git implements it.
type GitWriter interface {
	Branches(ctx context.Context, dir string) (*gitops.BranchesResult, error)
	Checkout(ctx context.Context, dir, branch string) (*gitops.StatusResult, error)
	CreateBranch(ctx context.Context, dir, name, start string, checkout bool) (*gitops.StatusResult, error)
	Stage(ctx context.Context, dir string, files []string) (*gitops.StatusResult, error)
	Unstage(ctx context.Context, dir string, files []string) (*gitops.StatusResult, error)
	StageHunk(ctx context.Context, dir string, h gitops.HunkRef) (*gitops.StatusResult, error)
	UnstageHunk(ctx context.Context, dir string, h gitops.HunkRef) (*gitops.StatusResult, error)
	Discard(ctx context.Context, dir string, fingerprints map[string]string) (*gitops.Discarded, *gitops.StatusResult, error)
	DiscardHunk(ctx context.Context, dir string, h gitops.HunkRef) (*gitops.Discarded, *gitops.StatusResult, error)
	Push(ctx context.Context, dir string, opts gitops.RemoteOptions) (*gitops.RemoteResult, error)
	Pull(ctx context.Context, dir string, opts gitops.RemoteOptions) (*gitops.RemoteResult, error)
}

// gitWriteSentinels are the errors of GitWriter whose text a phone may
// see.
var gitWriteSentinels = []error{
	gitops.ErrInvalidBranchName, gitops.ErrUnknownBranch, gitops.ErrBranchExists, gitops.ErrWouldOverwrite,
	gitops.ErrLocked, gitops.ErrChanged, gitops.ErrNoChange, gitops.ErrNoHunk, gitops.ErrHunkUnsupported,
	gitops.ErrNoUpstream, gitops.ErrUnknownRemote, gitops.ErrUnsafeRemote, gitops.ErrRemoteChanged,
	gitops.ErrNonFastForward, gitops.ErrDiverged, gitops.ErrRebaseConflict, gitops.ErrRemoteRejected,
	gitops.ErrAuthFailed, gitops.ErrRemoteUnreachable,
}

// writer is the daemon's GitWriter, or GIT_ERROR when it has none.
func (c *conn) writer() (GitWriter, error) {
	if w, ok := c.s.Git.(GitWriter); ok {
		return w, nil
	}
	return nil, &wire.Error{Code: wire.CodeGitError, Message: "git is not available on this daemon"}
}

// locked runs f holding the working directory's write lock: two writes to
// one repository from the phone (a commit and a stage, two pushes) must
// not race for the index.
func (c *conn) locked(dir string, f func()) {
	mu, _ := c.s.commitLocks.LoadOrStore(dir, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	f()
}

// gitTarget decodes a git request into p, whose session is s, and finds
// the session's directory and the writer.
func (c *conn) gitTarget(env wire.Envelope, p any, s *wire.GitSession) (GitWriter, string, error) {
	if err := wire.DecodePayload(env, p); err != nil {
		return nil, "", err
	}
	if s.SessionID == "" {
		return nil, "", wire.Errorf(wire.CodeInvalidMessage, "session_id is required")
	}
	w, err := c.writer()
	if err != nil {
		return nil, "", err
	}
	dir, err := c.sessionGitDir(s.SessionID)
	return w, dir, err
}

func (c *conn) gitBranches(env wire.Envelope) error {
	var p wire.GitSession
	w, dir, err := c.gitTarget(env, &p, &p)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, GitTimeout)
	defer cancel()
	res, err := w.Branches(ctx, dir)
	if err != nil {
		return c.gitError(p.SessionID, err)
	}
	c.send(wire.TypeGitBranchesResponse, env.ID, wire.GitBranchesResponse{SessionID: p.SessionID, GitBranches: wireBranches(res)})
	return nil
}

// statusAfter runs a write that ends with the repository's status, under
// the directory's lock and a deadline, and answers with the status.
func (c *conn) statusAfter(env wire.Envelope, sessionID, dir string, timeout time.Duration, f func(ctx context.Context) (*gitops.StatusResult, error)) error {
	var st *gitops.StatusResult
	var err error
	c.locked(dir, func() {
		ctx, cancel := context.WithTimeout(c.ctx, timeout)
		defer cancel()
		st, err = f(ctx)
	})
	if err != nil {
		return c.gitError(sessionID, err)
	}
	c.sendStatus(env.ID, sessionID, st)
	return nil
}

func (c *conn) gitCheckout(env wire.Envelope) error {
	var p wire.GitCheckout
	w, dir, err := c.gitTarget(env, &p, &p.GitSession)
	if err != nil {
		return err
	}
	if p.Branch == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "branch is required")
	}
	return c.statusAfter(env, p.SessionID, dir, CommitTimeout, func(ctx context.Context) (*gitops.StatusResult, error) {
		return w.Checkout(ctx, dir, p.Branch)
	})
}

func (c *conn) gitBranchCreate(env wire.Envelope) error {
	var p wire.GitBranchCreate
	w, dir, err := c.gitTarget(env, &p, &p.GitSession)
	if err != nil {
		return err
	}
	if p.Name == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "name is required")
	}
	return c.statusAfter(env, p.SessionID, dir, CommitTimeout, func(ctx context.Context) (*gitops.StatusResult, error) {
		return w.CreateBranch(ctx, dir, p.Name, p.StartPoint, p.Checkout)
	})
}

// decodeStage checks a stage, unstage or discard request: whole files or
// one hunk, not both, not neither.
func (c *conn) decodeStage(env wire.Envelope) (wire.GitStage, GitWriter, string, error) {
	var p wire.GitStage
	w, dir, err := c.gitTarget(env, &p, &p.GitSession)
	if err != nil {
		return p, nil, "", err
	}
	switch {
	case p.Hunk != nil && (p.Path == "" || p.Fingerprint == "" || len(p.Files) > 0):
		return p, nil, "", wire.Errorf(wire.CodeInvalidMessage, "a hunk needs path and fingerprint, and no files")
	case p.Hunk == nil && (len(p.Files) == 0 || p.Path != ""):
		return p, nil, "", wire.Errorf(wire.CodeInvalidMessage, "name files, or one hunk with path, fingerprint and hunk")
	}
	return p, w, dir, nil
}

// hunkRef is the hunk p names.
func hunkRef(p wire.GitStage) gitops.HunkRef {
	return gitops.HunkRef{Path: p.Path, Fingerprint: p.Fingerprint, Hunk: *p.Hunk}
}

// stagePaths are the paths of the whole files p names.
func stagePaths(p wire.GitStage) []string {
	paths := make([]string, len(p.Files))
	for i, f := range p.Files {
		paths[i] = f.Path
	}
	return paths
}

func (c *conn) gitStage(env wire.Envelope) error { return c.stageOrUnstage(env, true) }

func (c *conn) gitUnstage(env wire.Envelope) error { return c.stageOrUnstage(env, false) }

func (c *conn) stageOrUnstage(env wire.Envelope, stage bool) error {
	p, w, dir, err := c.decodeStage(env)
	if err != nil {
		return err
	}
	return c.statusAfter(env, p.SessionID, dir, GitTimeout, func(ctx context.Context) (*gitops.StatusResult, error) {
		switch {
		case p.Hunk != nil && stage:
			return w.StageHunk(ctx, dir, hunkRef(p))
		case p.Hunk != nil:
			return w.UnstageHunk(ctx, dir, hunkRef(p))
		case stage:
			return w.Stage(ctx, dir, stagePaths(p))
		}
		return w.Unstage(ctx, dir, stagePaths(p))
	})
}

func (c *conn) gitDiscard(env wire.Envelope) error {
	p, w, dir, err := c.decodeStage(env)
	if err != nil {
		return err
	}
	fps := make(map[string]string, len(p.Files))
	for _, f := range p.Files {
		if f.Fingerprint == "" {
			return wire.Errorf(wire.CodeInvalidMessage, "discarding %q needs the fingerprint of the diff shown", f.Path)
		}
		fps[f.Path] = f.Fingerprint
	}
	var kept *gitops.Discarded
	var st *gitops.StatusResult
	c.locked(dir, func() {
		ctx, cancel := context.WithTimeout(c.ctx, GitTimeout)
		defer cancel()
		if p.Hunk != nil {
			kept, st, err = w.DiscardHunk(ctx, dir, hunkRef(p))
		} else {
			kept, st, err = w.Discard(ctx, dir, fps)
		}
	})
	if err != nil {
		return c.gitError(p.SessionID, err)
	}
	c.send(wire.TypeGitDiscardResponse, env.ID, wire.GitDiscardResponse{SessionID: p.SessionID, GitDiscarded: wireDiscarded(kept)})
	c.sendStatus(env.ID, p.SessionID, st)
	return nil
}

func (c *conn) gitPush(env wire.Envelope) error { return c.pushOrPull(env, true) }

func (c *conn) gitPull(env wire.Envelope) error { return c.pushOrPull(env, false) }

func (c *conn) pushOrPull(env wire.Envelope, push bool) error {
	var p wire.GitRemote
	w, dir, err := c.gitTarget(env, &p, &p.GitSession)
	if err != nil {
		return err
	}
	return c.runRemote(env.ID, p, w, dir, push)
}

// progressEvery is the least time between two git_progress events of one
// phase.
const progressEvery = 200 * time.Millisecond

func (c *conn) runRemote(id string, p wire.GitRemote, w GitWriter, dir string, push bool) error {
	op, respType := "pull", wire.TypeGitPullResponse
	if push {
		op, respType = "push", wire.TypeGitPushResponse
	}
	var last time.Time
	var lastPhase string
	opts := gitops.RemoteOptions{Remote: p.Remote, URL: p.URL, Rebase: p.Rebase, Progress: func(pr gitops.Progress) {
		if now := time.Now(); pr.Phase != lastPhase || pr.Percent == 100 || now.Sub(last) >= progressEvery {
			last, lastPhase = now, pr.Phase
			c.send(wire.TypeGitProgress, id, wire.GitProgress{SessionID: p.SessionID, Operation: op, Phase: pr.Phase, Percent: pr.Percent, Done: pr.Done, Total: pr.Total})
		}
	}}
	var res *gitops.RemoteResult
	var err error
	c.locked(dir, func() {
		ctx, cancel := context.WithTimeout(c.ctx, RemoteTimeout)
		defer cancel()
		if push {
			res, err = w.Push(ctx, dir, opts)
		} else {
			res, err = w.Pull(ctx, dir, opts)
		}
	})
	if err != nil {
		return c.gitError(p.SessionID, err)
	}
	c.send(respType, id, wire.GitRemoteResponse{SessionID: p.SessionID, GitRemoteResult: wireRemote(res)})
	c.sendStatus(id, p.SessionID, res.Status)
	return nil
}

// claudeEvent maps the ReCursor app's git_pull and git_push claude_event
// frames to a fast-forward pull and a push to the upstream.
func (c *conn) claudeEvent(env wire.Envelope) error {
	var p wire.ClientClaudeEvent
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	switch p.Type {
	case "git_pull", "git_push":
	default:
		return wire.Errorf(wire.CodeUnknownType, "claude_event %q is not supported by this server", p.Type)
	}
	if p.SessionID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "session_id is required")
	}
	w, err := c.writer()
	if err != nil {
		return err
	}
	dir, err := c.sessionGitDir(p.SessionID)
	if err != nil {
		return err
	}
	return c.runRemote(env.ID, wire.GitRemote{GitSession: wire.GitSession{SessionID: p.SessionID}}, w, dir, p.Type == "git_push")
}
