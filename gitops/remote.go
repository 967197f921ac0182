package gitops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Errors of Push and Pull.
var (
	// ErrNoUpstream: the branch has no upstream to pull from or push to.
	ErrNoUpstream = errors.New("gitops: the branch has no upstream; push it to a remote first")
	// ErrUnknownRemote: the repository has no remote of that name.
	ErrUnknownRemote = errors.New("gitops: no such remote")
	// ErrUnsafeRemote: the remote's URL names a transport tether does not
	// use (a remote helper, ext::, an unknown scheme) or nothing usable.
	ErrUnsafeRemote = errors.New("gitops: the remote's URL is not one tether will use")
	// ErrRemoteChanged: the remote's URL is not the one the client showed.
	ErrRemoteChanged = errors.New("gitops: the remote's URL changed since it was shown; check it and try again")
	// ErrNonFastForward: the remote branch has commits the local one has
	// not; pull first.
	ErrNonFastForward = errors.New("gitops: the remote has commits this branch does not have; pull first")
	// ErrDiverged: the branch and its upstream each have commits the other
	// has not, and a fast-forward was asked for.
	ErrDiverged = errors.New("gitops: the branch and its upstream have diverged; pull with rebase")
	// ErrRebaseConflict: pulling with rebase met a conflict; the rebase was
	// undone and nothing changed.
	ErrRebaseConflict = errors.New("gitops: the rebase met a conflict and was undone; nothing changed")
	// ErrRemoteRejected: the remote refused the update (a protected branch,
	// its hooks).
	ErrRemoteRejected = errors.New("gitops: the remote refused the update")
	// ErrAuthFailed: the remote refused the user's credentials, or none
	// were available (ssh-agent, the credential helper).
	ErrAuthFailed = errors.New("gitops: the remote refused the credentials; check ssh-agent or the credential helper")
	// ErrRemoteUnreachable: the remote's host could not be reached.
	ErrRemoteUnreachable = errors.New("gitops: the remote could not be reached")
)

// Progress is one progress report of a push or pull, as git prints it.
type Progress struct {
	// Phase is git's phase ("Writing objects", "remote: Resolving deltas").
	Phase   string
	Percent int
	Done    int
	Total   int
}

var progressLine = regexp.MustCompile(`^((?:remote: )?[A-Za-z][A-Za-z ]*):\s+(\d{1,3})% \((\d+)/(\d+)\)`)

// parseProgress reads one line of git's progress output.
func parseProgress(line string) (Progress, bool) {
	m := progressLine.FindStringSubmatch(line)
	if m == nil {
		return Progress{}, false
	}
	p := Progress{Phase: m[1]}
	p.Percent, _ = strconv.Atoi(m[2])
	p.Done, _ = strconv.Atoi(m[3])
	p.Total, _ = strconv.Atoi(m[4])
	return p, true
}

// RemoteOptions are a push's or pull's choices.
type RemoteOptions struct {
	// Remote, for a push of a branch without upstream, names the remote to
	// push it to (under the same name), which then becomes its upstream.
	Remote string
	// URL, when set, must be the remote's URL as the client showed it
	// (credentials left out): an agent can rewrite the URL in .git/config.
	URL string
	// Rebase pulls with rebase rather than a fast-forward.
	Rebase bool
	// Progress receives git's progress reports.
	Progress func(Progress)
}

// RemoteResult is the outcome of a push or pull.
type RemoteResult struct {
	Branch string
	Remote string
	// URL is the remote's URL without credentials.
	URL       string
	RemoteRef string
	// Before and After are HEAD's commit before and after a pull; for a
	// push, the remote-tracking branch's (as last fetched or pushed) and
	// the commit pushed.
	Before   string
	After    string
	UpToDate bool
	// SetUpstream: a push made Remote the branch's upstream.
	SetUpstream bool
	Status      *StatusResult
}

// upstream is where the current branch pulls from and pushes to.
type upstream struct {
	branch, remote, remoteRef, url string
	local                          bool   // url is a path on this machine
	path                           string // of a local url
}

// upstreamOf finds the current branch's upstream (or, with remote, that
// remote's branch of the same name) and the remote's URL (pushurl for a
// push), as written in the repository's configuration and without any
// rewriting the configuration asks for.
func (r *repo) upstreamOf(ctx context.Context, remote string, push bool) (*upstream, error) {
	ref, err := r.git(ctx, nil, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		return nil, ErrDetachedHead
	}
	u := &upstream{branch: strings.TrimSpace(string(ref))}
	if remote == "" {
		out, err := r.git(ctx, nil, "for-each-ref", "--format=%(upstream:remotename)%00%(upstream:remoteref)", "refs/heads/"+u.branch)
		if err != nil {
			return nil, err
		}
		u.remote, u.remoteRef, _ = strings.Cut(strings.TrimSpace(string(out)), "\x00")
		if u.remote == "" || u.remoteRef == "" {
			return nil, fmt.Errorf("%w: %s", ErrNoUpstream, u.branch)
		}
	} else {
		u.remote, u.remoteRef = remote, "refs/heads/"+u.branch
	}
	name, ok := strings.CutPrefix(u.remoteRef, "refs/heads/")
	if checkBranchName(u.remote) != nil || !ok || checkBranchName(name) != nil {
		return nil, fmt.Errorf("%w: %s %s", ErrNoUpstream, u.remote, u.remoteRef)
	}
	keys := []string{"remote." + u.remote + ".url"}
	if push {
		keys = append([]string{"remote." + u.remote + ".pushurl"}, keys...)
	}
	for _, key := range keys {
		if out, err := r.git(ctx, nil, "config", "--get", key); err == nil {
			u.url = strings.TrimSpace(string(out))
			break
		}
	}
	if u.url == "" {
		return nil, fmt.Errorf("%w: %s", ErrUnknownRemote, u.remote)
	}
	u.local, u.path, err = classifyURL(u.url, r.top)
	return u, err
}

// target is what git is told to reach: a local remote's resolved path
// (git runs in the shadow, where a relative path means something else, and
// the sandbox binds the resolved path), else the URL as written.
func (u *upstream) target() string {
	if u.local {
		return u.path
	}
	return u.url
}

// trackingRef is the remote-tracking ref of u's branch under git's default
// refspec.
func (u *upstream) trackingRef() string {
	return "refs/remotes/" + u.remote + "/" + strings.TrimPrefix(u.remoteRef, "refs/heads/")
}

// networkSchemes are the URL schemes a remote may use over the network.
var networkSchemes = map[string]bool{"https": true, "http": true, "ssh": true, "git+ssh": true, "ssh+git": true, "git": true}

// classifyURL tells a remote URL on this machine (a path, file://) from
// one over the network, and refuses what tether does not use: remote
// helpers ("transport::address"), unknown schemes, option-like URLs.
func classifyURL(raw, top string) (local bool, path string, err error) {
	switch {
	case raw == "" || strings.HasPrefix(raw, "-") || strings.ContainsAny(raw, "\x00\n\r"):
		return false, "", fmt.Errorf("%w: %q", ErrUnsafeRemote, raw)
	case strings.Contains(raw, "://"):
		scheme, rest, _ := strings.Cut(raw, "://")
		scheme = strings.ToLower(scheme)
		if scheme == "file" {
			return localPath(rest, top)
		}
		if !networkSchemes[scheme] {
			return false, "", fmt.Errorf("%w: scheme %q", ErrUnsafeRemote, scheme)
		}
		if host := strings.TrimPrefix(rest, "["); strings.HasPrefix(host, "-") || strings.Contains(strings.SplitN(rest, "/", 2)[0], "@-") {
			return false, "", fmt.Errorf("%w: %q", ErrUnsafeRemote, raw)
		}
		return false, "", nil
	case strings.Contains(raw, "::"):
		return false, "", fmt.Errorf("%w: remote helper in %q", ErrUnsafeRemote, raw)
	}
	// scp-like "[user@]host:path": a colon before any slash.
	if colon := strings.IndexByte(raw, ':'); colon > 0 {
		if slash := strings.IndexByte(raw, '/'); slash < 0 || colon < slash {
			host := raw[:colon]
			if at := strings.LastIndexByte(host, '@'); at >= 0 {
				host = host[at+1:]
			}
			if strings.HasPrefix(host, "-") {
				return false, "", fmt.Errorf("%w: %q", ErrUnsafeRemote, raw)
			}
			return false, "", nil
		}
	}
	return localPath(raw, top)
}

// localPath is a local remote's directory, links resolved.
func localPath(p, top string) (bool, string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(top, p)
	}
	p = realOrSelf(p)
	if info, err := os.Stat(p); err != nil || !info.IsDir() {
		return false, "", fmt.Errorf("%w: %s is not a directory on this machine", ErrUnknownRemote, p)
	}
	return true, p, nil
}

// shownURL is a URL without the credentials it may carry: a password,
// and for http(s) the user name too, where tokens are often put.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	switch _, has := u.User.Password(); {
	case u.Scheme == "https" || u.Scheme == "http":
		u.User = nil
	case has:
		u.User = url.User(u.User.Username())
	default:
		return raw
	}
	return u.String()
}

// shadow is a bare repository of the daemon's own, made for one push or
// pull: it borrows the session repository's objects (objects/info/
// alternates) and has none of its configuration, hooks or refs. Talking to
// the remote happens there, so nothing the agent wrote into .git
// (core.sshCommand, credential.helper, hooks, url.*.insteadOf, a
// receivepack or uploadpack, includes) is read by a git that has the
// user's credentials.
type shadow struct {
	dir     string
	objects string // the session repository's object directory
}

// newShadow makes a shadow repository for r.
func (r *repo) newShadow(ctx context.Context) (*shadow, error) {
	out, err := r.git(ctx, nil, "rev-parse", "--path-format=absolute", "--git-common-dir", "--show-object-format")
	f := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if err != nil || len(f) != 2 {
		return nil, fmt.Errorf("%w: cannot find the object directory: %v", ErrGit, err)
	}
	objects, format := filepath.Join(f[0], "objects"), f[1]
	if format != "sha1" && format != "sha256" {
		return nil, fmt.Errorf("%w: object format %q", ErrGit, format)
	}
	if r.g.TempDir != "" {
		if err := os.MkdirAll(r.g.TempDir, 0o700); err != nil {
			return nil, fmt.Errorf("gitops: %w", err)
		}
	}
	dir, err := os.MkdirTemp(r.g.TempDir, "tether-remote-")
	if err != nil {
		return nil, fmt.Errorf("gitops: %w", err)
	}
	version, ext := "0", ""
	if format == "sha256" {
		version, ext = "1", "[extensions]\n\tobjectformat = sha256\n"
	}
	files := map[string]string{
		"HEAD": "ref: refs/heads/tether\n",
		// alternateRefsCommand: git would otherwise run a git in the
		// borrowed repository to list its refs, reading its configuration.
		"config":                  "[core]\n\trepositoryformatversion = " + version + "\n\tbare = true\n\talternateRefsCommand = true\n" + ext,
		"objects/info/alternates": objects + "\n",
		"refs/heads/.keep":        "",
	}
	// A shallow clone's boundary: without it the walk of a push stops at
	// the first missing parent and calls every push a non-fast-forward.
	if shallow, err := readBounded(filepath.Join(f[0], "shallow"), 16<<20); err == nil {
		files["shallow"] = string(shallow)
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		err := os.MkdirAll(filepath.Dir(p), 0o700)
		if err == nil {
			err = os.WriteFile(p, []byte(content), 0o600)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("gitops: %w", err)
		}
	}
	os.Remove(filepath.Join(dir, "refs", "heads", ".keep"))
	return &shadow{dir: dir, objects: objects}, nil
}

func (s *shadow) remove() { os.RemoveAll(s.dir) }

// readBounded reads a regular file the agent may have written, at most
// limit bytes, not through a link at its name, never blocking on a pipe.
func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() || info.Size() > limit {
		return nil, fmt.Errorf("%s is not a regular file of at most %d bytes", name, limit)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// talk runs a git command in the shadow that reaches u's remote: over the
// network through Net with the user's environment, or, for a remote on
// this machine, through Exec with that directory (writable for a push).
func (r *repo) talk(ctx context.Context, s *shadow, u *upstream, write bool, progress func(Progress), args ...string) ([]byte, error) {
	o := runOpts{limit: maxOutput}
	if progress != nil {
		o.progress = func(line string) {
			if p, ok := parseProgress(line); ok {
				progress(p)
			}
		}
	}
	// The shadow named, not found: safe.bareRepository=explicit (a
	// hardening git recommends) refuses a bare repository found from its
	// working directory.
	c := Call{Dir: s.dir, Args: append([]string{"--git-dir=" + s.dir}, args...), ReadOnly: []string{filepath.Dir(s.objects)}}
	if u.local {
		c.Env = append(gitEnv(), "GIT_ALLOW_PROTOCOL=file")
		c.Write = !write // a fetch writes the shadow, a push the remote
		if write {
			c.Writable = []string{u.path}
		} else {
			c.ReadOnly = append(c.ReadOnly, u.path)
		}
	} else {
		c.Env, o.net = netEnv(), true
	}
	out, _, err := r.g.run(ctx, c, o)
	return out, remoteError(err)
}

// remoteError names the failures of talking to a remote a phone can act
// on; git's own words stay in the wrapped error for the log.
func remoteError(err error) error {
	if err == nil {
		return nil
	}
	msg := stderrOf(err)
	switch {
	case strings.Contains(msg, "Authentication failed") || strings.Contains(msg, "Permission denied") ||
		strings.Contains(msg, "could not read Username") || strings.Contains(msg, "could not read Password") ||
		strings.Contains(msg, "terminal prompts disabled") || strings.Contains(msg, "Host key verification failed") ||
		strings.Contains(msg, "returned error: 401") || strings.Contains(msg, "returned error: 403"):
		return fmt.Errorf("%w: %w", ErrAuthFailed, err)
	case strings.Contains(msg, "Could not resolve host") || strings.Contains(msg, "Connection refused") ||
		strings.Contains(msg, "Connection timed out") || strings.Contains(msg, "Network is unreachable") ||
		strings.Contains(msg, "Could not read from remote repository") || strings.Contains(msg, "does not appear to be a git repository") ||
		strings.Contains(msg, "Failed to connect"):
		return fmt.Errorf("%w: %w", ErrRemoteUnreachable, err)
	case strings.Contains(msg, "couldn't find remote ref"):
		return fmt.Errorf("%w: %w", ErrNoUpstream, err)
	case strings.Contains(msg, "transport") && strings.Contains(msg, "not allowed"):
		return fmt.Errorf("%w: %w", ErrUnsafeRemote, err)
	}
	return err
}

// netEnv is the environment of a git that talks to a remote over the
// network: the user's own (ssh-agent, the credential helper of their
// global configuration, GIT_SSH_COMMAND), never prompting, and only the
// network transports.
func netEnv() []string {
	drop := map[string]bool{"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true, "GIT_OBJECT_DIRECTORY": true,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_COMMON_DIR": true, "GIT_NAMESPACE": true, "GIT_ALLOW_PROTOCOL": true,
		"GIT_TERMINAL_PROMPT": true, "GIT_PROTOCOL_FROM_USER": true, "GIT_EDITOR": true, "GIT_PAGER": true}
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !drop[name] {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=https:http:ssh:git", "GIT_PAGER=cat")
}

// DirectNetExec is Net's default: git from PATH in its own session, with
// no controlling terminal, so that ssh cannot ask for a passphrase or a
// host key on the daemon's terminal and fails instead.
func DirectNetExec(ctx context.Context, c Call) (*exec.Cmd, error) {
	cmd, err := DirectExec(ctx, c)
	if err == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	return cmd, err
}

// Push sends the current branch to its upstream (or, with opts.Remote, to
// that remote's branch of the same name, which becomes its upstream), a
// fast-forward only: ErrNonFastForward when the remote has commits the
// branch has not. The repository's pre-push hook does not run: it is the
// agent's to write, and the push runs with the user's credentials.
func (g Git) Push(ctx context.Context, dir string, opts RemoteOptions) (*RemoteResult, error) {
	r, err := g.openRepo(ctx, dir, true)
	if err != nil {
		return nil, err
	}
	u, err := r.upstreamOf(ctx, opts.Remote, true)
	if err != nil {
		return nil, err
	}
	if opts.URL != "" && opts.URL != shownURL(u.url) {
		return nil, fmt.Errorf("%w: %s", ErrRemoteChanged, shownURL(u.url))
	}
	head, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return nil, fmt.Errorf("%w: the branch has no commit yet", ErrNothingToCommit)
	}
	res := &RemoteResult{Branch: u.branch, Remote: u.remote, URL: shownURL(u.url), RemoteRef: u.remoteRef,
		After: strings.TrimSpace(string(head))}
	if before, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", u.trackingRef()); err == nil {
		res.Before = strings.TrimSpace(string(before))
	}
	s, err := r.newShadow(ctx)
	if err != nil {
		return nil, err
	}
	defer s.remove()
	out, err := r.talk(ctx, s, u, true, opts.Progress, "push", "--progress", "--porcelain", "--no-verify",
		"--", u.target(), res.After+":"+u.remoteRef)
	if err := pushOutcome(out, err, res); err != nil {
		return nil, err
	}
	if _, err := r.git(ctx, nil, "update-ref", "-m", "tether: push", u.trackingRef(), res.After); err != nil {
		return nil, lockError(err)
	}
	if opts.Remote != "" {
		if _, err := r.git(ctx, nil, "branch", "--set-upstream-to="+u.remote+"/"+strings.TrimPrefix(u.remoteRef, "refs/heads/"), "--", u.branch); err != nil {
			return nil, lockError(err)
		}
		res.SetUpstream = true
	}
	res.Status, err = r.limitedStatus(ctx)
	return res, err
}

// pushOutcome reads git push --porcelain: one "flag\tfrom:to\tsummary"
// line a ref ("=" up to date, "!" rejected).
func pushOutcome(out []byte, err error, res *RemoteResult) error {
	for line := range strings.Lines(string(out)) {
		flag, rest, ok := strings.Cut(line, "\t")
		if !ok || len(flag) != 1 {
			continue
		}
		_, summary, _ := strings.Cut(rest, "\t")
		switch flag {
		case "=":
			res.UpToDate = true
		case "!":
			if strings.Contains(summary, "non-fast-forward") || strings.Contains(summary, "fetch first") {
				return fmt.Errorf("%w: %s", ErrNonFastForward, strings.TrimSpace(summary))
			}
			return fmt.Errorf("%w: %s", ErrRemoteRejected, strings.TrimSpace(summary))
		}
	}
	return err
}

// Pull brings the upstream's new commits into the current branch: a
// fast-forward (ErrDiverged when the branch has commits of its own), or
// with opts.Rebase the branch's own commits replayed on top of them
// (ErrRebaseConflict, and nothing changed, at a conflict). Local changes
// the update would overwrite refuse it (ErrWouldOverwrite). The fetch runs
// in a repository of the daemon's own (see shadow); the update of the
// branch runs in the session repository as any other write does.
func (g Git) Pull(ctx context.Context, dir string, opts RemoteOptions) (*RemoteResult, error) {
	r, err := g.openRepo(ctx, dir, true)
	if err != nil {
		return nil, err
	}
	u, err := r.upstreamOf(ctx, "", false)
	if err != nil {
		return nil, err
	}
	if opts.URL != "" && opts.URL != shownURL(u.url) {
		return nil, fmt.Errorf("%w: %s", ErrRemoteChanged, shownURL(u.url))
	}
	res := &RemoteResult{Branch: u.branch, Remote: u.remote, URL: shownURL(u.url), RemoteRef: u.remoteRef}
	if head, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err == nil {
		res.Before = strings.TrimSpace(string(head))
	}
	s, err := r.newShadow(ctx)
	if err != nil {
		return nil, err
	}
	defer s.remove()
	if err := r.lendRefs(ctx, s); err != nil {
		return nil, err
	}
	if _, err := r.talk(ctx, s, u, false, opts.Progress, "fetch", "--progress", "--no-tags", "--no-write-fetch-head",
		"--no-recurse-submodules", "--no-auto-maintenance", "--", u.target(), "+"+u.remoteRef+":refs/fetched"); err != nil {
		return nil, err
	}
	// Into the session repository, from the shadow, in its sandbox.
	c := Call{Dir: r.top, Args: []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
		"--no-auto-maintenance", "--", s.dir, "+refs/fetched:" + u.trackingRef()},
		Env: append(gitEnv(), "GIT_ALLOW_PROTOCOL=file"), Write: true, ReadOnly: []string{s.dir}}
	if _, _, err := r.g.run(ctx, c, runOpts{limit: maxOutput}); err != nil {
		return nil, lockError(err)
	}
	tip, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", u.trackingRef())
	if err != nil {
		return nil, err
	}
	target := strings.TrimSpace(string(tip))
	switch {
	case res.Before == "":
		_, err = r.git(ctx, nil, "merge", "--ff-only", "--quiet", target)
	case opts.Rebase:
		_, err = r.git(ctx, nil, "rebase", "--quiet", "--no-autostash", target)
	default:
		_, err = r.git(ctx, nil, "merge", "--ff-only", "--no-edit", "--quiet", "--no-stat", target)
	}
	if err != nil {
		err = updateError(err)
		if opts.Rebase && !errors.Is(err, ErrWouldOverwrite) {
			// A rebase that stopped is undone: the phone cannot resolve
			// conflicts, and the branch must be as it was.
			// Even when the request's deadline is what stopped the
			// rebase: a repository left mid-rebase is worse.
			abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			_, abortErr := r.git(abortCtx, nil, "rebase", "--abort")
			cancel()
			if abortErr != nil && !strings.Contains(stderrOf(abortErr), "No rebase in progress") {
				return nil, fmt.Errorf("%w (and undoing the rebase failed: %w)", err, abortErr)
			}
		}
		return nil, err
	}
	if head, err := r.git(ctx, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err == nil {
		res.After = strings.TrimSpace(string(head))
	}
	res.UpToDate = res.After == res.Before
	res.Status, err = r.limitedStatus(ctx)
	return res, err
}

// lendRefs writes the session repository's branch, remote-tracking and
// tag tips into the shadow, so that a fetch there asks the remote only
// for what the repository lacks.
func (r *repo) lendRefs(ctx context.Context, s *shadow) error {
	out, err := r.git(ctx, nil, "for-each-ref", "--format=%(objectname)", "--count=10000", "refs/heads/", "refs/remotes/", "refs/tags/")
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# pack-refs with: peeled sorted\n")
	seen := map[string]bool{}
	for oid := range strings.Lines(string(out)) {
		oid = strings.TrimSpace(oid)
		if oid == "" || seen[oid] || strings.Trim(oid, "0123456789abcdef") != "" {
			continue
		}
		seen[oid] = true
		fmt.Fprintf(&b, "%s refs/have/%08d\n", oid, len(seen))
	}
	return os.WriteFile(filepath.Join(s.dir, "packed-refs"), []byte(b.String()), 0o600)
}

// updateError names why a pull's merge or rebase refused.
func updateError(err error) error {
	msg := stderrOf(err)
	switch {
	case strings.Contains(msg, "would be overwritten") || strings.Contains(msg, "unstaged changes") ||
		strings.Contains(msg, "uncommitted changes") || strings.Contains(msg, "contains uncommitted"):
		return fmt.Errorf("%w: %w", ErrWouldOverwrite, err)
	case strings.Contains(msg, "Not possible to fast-forward") || strings.Contains(msg, "not possible to fast-forward"):
		return fmt.Errorf("%w: %w", ErrDiverged, err)
	case strings.Contains(msg, "could not apply") || strings.Contains(msg, "CONFLICT"):
		return fmt.Errorf("%w: %w", ErrRebaseConflict, err)
	}
	return lockError(err)
}
