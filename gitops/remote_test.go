package gitops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// remotePair is a bare repository and a clone of it with one commit
// pushed; the clone's main tracks origin/main.
func remotePair(t *testing.T) (bare string, clone *testRepo) {
	t.Helper()
	bare = filepath.Join(t.TempDir(), "remote.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", "-b", "main", bare).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	seed := newRepo(t)
	seed.write("a.txt", "a\n")
	seed.commitAll("first")
	seed.git("push", "-q", bare, "main")
	clone = &testRepo{t: t, dir: t.TempDir()}
	clone.git("clone", "-q", bare, ".")
	clone.git("config", "user.name", "Clone")
	clone.git("config", "user.email", "clone@example.com")
	return bare, clone
}

// pushFromElsewhere commits name with content in another clone of bare
// and pushes it, as a colleague would; it returns that clone.
func pushFromElsewhere(t *testing.T, bare, name, content string) *testRepo {
	t.Helper()
	other := &testRepo{t: t, dir: t.TempDir()}
	other.git("clone", "-q", bare, ".")
	other.git("config", "user.name", "Other")
	other.git("config", "user.email", "o@example.com")
	other.write(name, content)
	other.commitAll("theirs")
	other.git("push", "-q", "origin", "main")
	return other
}

func revParse(t *testing.T, dir, rev string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "rev-parse", rev).Output()
	if err != nil {
		t.Fatalf("rev-parse %s in %s: %v", rev, dir, err)
	}
	return strings.TrimSpace(string(out))
}

// TestPushAndPullWithALocalRemote: a push fast-forwards the bare remote
// and the remote-tracking branch, a second push is up to date, a push
// behind the remote is refused, and a pull fast-forwards; all as git's own
// push and pull would leave them.
func TestPushAndPullWithALocalRemote(t *testing.T) {
	t.Parallel()
	bare, r := remotePair(t)
	ctx := context.Background()
	r.write("b.txt", "b\n")
	r.commitAll("second")
	var progress []Progress
	res, err := direct.Push(ctx, r.dir, RemoteOptions{Progress: func(p Progress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatal(err)
	}
	head := revParse(t, r.dir, "HEAD")
	if res.After != head || revParse(t, bare, "main") != head || revParse(t, r.dir, "origin/main") != head || res.UpToDate {
		t.Fatalf("push %+v: remote at %s, HEAD %s", res, revParse(t, bare, "main"), head)
	}
	if res.Branch != "main" || res.Remote != "origin" || res.URL != bare || res.RemoteRef != "refs/heads/main" || !res.Status.IsClean {
		t.Fatalf("push result %+v", res)
	}
	if len(progress) == 0 {
		t.Fatal("no progress reported")
	}
	if res, err = direct.Push(ctx, r.dir, RemoteOptions{}); err != nil || !res.UpToDate {
		t.Fatalf("second push: %+v %v", res, err)
	}

	// Someone else pushes; ours is now behind.
	other := pushFromElsewhere(t, bare, "c.txt", "c\n")
	r.write("d.txt", "d\n")
	r.commitAll("ours")
	if _, err := direct.Push(ctx, r.dir, RemoteOptions{}); !errors.Is(err, ErrNonFastForward) {
		t.Fatalf("push behind the remote: %v", err)
	}
	if _, err := direct.Pull(ctx, r.dir, RemoteOptions{}); !errors.Is(err, ErrDiverged) {
		t.Fatalf("fast-forward pull of a diverged branch: %v", err)
	}
	if revParse(t, r.dir, "HEAD") == revParse(t, bare, "main") {
		t.Fatal("a refused pull moved HEAD")
	}
	pulled, err := direct.Pull(ctx, r.dir, RemoteOptions{Rebase: true})
	if err != nil {
		t.Fatal(err)
	}
	if revParse(t, r.dir, "HEAD~1") != revParse(t, bare, "main") || pulled.UpToDate || pulled.Before == pulled.After {
		t.Fatalf("rebase pull %+v", pulled)
	}
	if _, err := direct.Push(ctx, r.dir, RemoteOptions{}); err != nil {
		t.Fatal(err)
	}

	// A plain fast-forward pull into a clean clone.
	behind := revParse(t, other.dir, "HEAD")
	res, err = direct.Pull(ctx, other.dir, RemoteOptions{})
	if err != nil || res.Before != behind || res.After != revParse(t, bare, "main") || revParse(t, other.dir, "HEAD") != res.After {
		t.Fatalf("fast-forward pull %+v %v", res, err)
	}
	if res, err = direct.Pull(ctx, other.dir, RemoteOptions{}); err != nil || !res.UpToDate {
		t.Fatalf("second pull %+v %v", res, err)
	}
}

// TestPullRefusals: local changes in the way, a rebase conflict (undone),
// no upstream, a URL that is not the one shown.
func TestPullRefusals(t *testing.T) {
	t.Parallel()
	bare, r := remotePair(t)
	ctx := context.Background()
	pushFromElsewhere(t, bare, "a.txt", "theirs\n")

	r.write("a.txt", "uncommitted\n")
	if _, err := direct.Pull(ctx, r.dir, RemoteOptions{}); !errors.Is(err, ErrWouldOverwrite) {
		t.Fatalf("pull over a local change: %v", err)
	}
	r.commitAll("ours, conflicting")
	before := r.snapshot()
	if _, err := direct.Pull(ctx, r.dir, RemoteOptions{Rebase: true}); !errors.Is(err, ErrRebaseConflict) {
		t.Fatalf("conflicting rebase: %v", err)
	}
	if after := r.snapshot(); after != before && !onlyRemoteRefMoved(before, after) {
		t.Fatalf("a conflicting rebase left the repository changed:\n%s\n---\n%s", before, after)
	}
	if _, err := os.Stat(filepath.Join(r.dir, ".git", "rebase-merge")); !os.IsNotExist(err) {
		t.Fatal("a rebase is still in progress")
	}
	if _, err := direct.Pull(ctx, r.dir, RemoteOptions{URL: "https://example.com/elsewhere.git"}); !errors.Is(err, ErrRemoteChanged) {
		t.Fatalf("pull with another URL shown: %v", err)
	}
	r.git("checkout", "-q", "-b", "lonely")
	if _, err := direct.Pull(ctx, r.dir, RemoteOptions{}); !errors.Is(err, ErrNoUpstream) {
		t.Fatalf("pull without upstream: %v", err)
	}
	if _, err := direct.Push(ctx, r.dir, RemoteOptions{}); !errors.Is(err, ErrNoUpstream) {
		t.Fatalf("push without upstream: %v", err)
	}
	res, err := direct.Push(ctx, r.dir, RemoteOptions{Remote: "origin"})
	if err != nil || !res.SetUpstream || revParse(t, bare, "lonely") != revParse(t, r.dir, "HEAD") {
		t.Fatalf("push -u: %+v %v", res, err)
	}
	if up := strings.TrimSpace(r.git("rev-parse", "--abbrev-ref", "lonely@{upstream}")); up != "origin/lonely" {
		t.Fatalf("upstream %q", up)
	}
	if _, err := direct.Push(ctx, r.dir, RemoteOptions{Remote: "nowhere"}); !errors.Is(err, ErrUnknownRemote) {
		t.Fatalf("push to an unknown remote: %v", err)
	}
	r.git("checkout", "-q", "--detach")
	if _, err := direct.Push(ctx, r.dir, RemoteOptions{}); !errors.Is(err, ErrDetachedHead) {
		t.Fatalf("push of a detached HEAD: %v", err)
	}
}

// onlyRemoteRefMoved: a refused pull may have fetched (the remote-tracking
// branch moved), which git pull does too, and an undone rebase rewrote
// files with their own content (new inodes and times); nothing else may
// differ.
func onlyRemoteRefMoved(before, after string) bool {
	strip := func(s string) string {
		var keep []string
		for l := range strings.Lines(s) {
			if !strings.Contains(l, "refs/remotes/") && !strings.Contains(l, "ctime: ") && !strings.Contains(l, "mtime: ") && !strings.Contains(l, "ino: ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "")
	}
	return strip(before) == strip(after)
}

func TestClassifyURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for raw, want := range map[string]string{
		"https://github.com/a/b.git":     "net",
		"ssh://git@host:22/a/b":          "net",
		"git@github.com:a/b.git":         "net",
		"host.example:repo":              "net",
		"git://host/x":                   "net",
		dir:                              "local",
		"file://" + dir:                  "local",
		"ext::sh -c touch% /tmp/pwned":   "refused",
		"fd::3":                          "refused",
		"evil::https://x":                "refused",
		"-oProxyCommand=x":               "refused",
		"ssh://-oProxyCommand=x/y":       "refused",
		"-x:path":                        "refused",
		"ftp://host/x":                   "refused",
		"":                               "refused",
		"/no/such/dir/anywhere":          "refused",
		"https://h/x\nurl=evil":          "refused",
		"ssh://user@-oProxyCommand=x/a":  "refused",
		"git+ssh://git@host/a/b.git":     "net",
		"HTTPS://github.com/a/b.git":     "net",
		"user@-oProxyCommand=x:path/a/b": "refused",
	} {
		local, path, err := classifyURL(raw, dir)
		got := "net"
		switch {
		case err != nil:
			got = "refused"
		case local:
			got = "local"
			if path != dir {
				t.Errorf("%q: path %q", raw, path)
			}
		}
		if got != want {
			t.Errorf("classifyURL(%q) = %s (%v), want %s", raw, got, err, want)
		}
	}
	for raw, want := range map[string]string{
		"https://me:s3cret@example.com/a.git":  "https://example.com/a.git",
		"https://ghp_token@github.com/a/b.git": "https://github.com/a/b.git",
		"ssh://git:pw@host/a.git":              "ssh://git@host/a.git",
		"ssh://git@host/a.git":                 "ssh://git@host/a.git",
		"git@github.com:a/b.git":               "git@github.com:a/b.git",
	} {
		if got := shownURL(raw); got != want {
			t.Errorf("shownURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestParseProgress(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]Progress{
		"Writing objects:  45% (9/20), 1.2 KiB | 1.2 MiB/s": {Phase: "Writing objects", Percent: 45, Done: 9, Total: 20},
		"remote: Resolving deltas: 100% (3/3), done.":       {Phase: "remote: Resolving deltas", Percent: 100, Done: 3, Total: 3},
	} {
		if got, ok := parseProgress(line); !ok || got != want {
			t.Errorf("parseProgress(%q) = %+v %v", line, got, ok)
		}
	}
	for _, line := range []string{"Enumerating objects: 5, done.", "To /tmp/x", "", "Total 3 (delta 0)"} {
		if _, ok := parseProgress(line); ok {
			t.Errorf("parseProgress(%q) matched", line)
		}
	}
}

// httpRemote serves bare over git's smart HTTP protocol (git
// http-backend, a real git server) behind basic authentication with user
// "phone" and password "secret"; logins counts the requests that
// authenticated.
func httpRemote(t *testing.T, bare string) (url string, logins *int) {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", bare, "config", "http.receivepack", "true").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()},
	}
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user, pass, ok := req.BasicAuth(); !ok || user != "phone" || pass != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		n++
		mu.Unlock()
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(bare), &n
}

// userGit is a Git whose network calls see globalConfig as the user's
// global git configuration, as a daemon started by that user would.
func userGit(globalConfig string) Git {
	return Git{Net: func(ctx context.Context, c Call) (*exec.Cmd, error) {
		c.Env = append(c.Env, "GIT_CONFIG_GLOBAL="+globalConfig)
		return DirectNetExec(ctx, c)
	}}
}

// TestPushOverHTTPWithTheUsersCredentials: the user's credential helper
// (of their global configuration) logs in; a wrong or missing credential
// is ErrAuthFailed, and the remote is unchanged.
func TestPushOverHTTPWithTheUsersCredentials(t *testing.T) {
	t.Parallel()
	bare, r := remotePair(t)
	url, logins := httpRemote(t, bare)
	r.git("remote", "set-url", "origin", url)
	r.write("b.txt", "b\n")
	r.commitAll("second")
	ctx := context.Background()
	home := t.TempDir()
	store := filepath.Join(home, "credentials")
	global := filepath.Join(home, "gitconfig")
	os.WriteFile(global, []byte(fmt.Sprintf("[credential]\n\thelper = store --file=%s\n", store)), 0o600)

	if _, err := userGit(global).Push(ctx, r.dir, RemoteOptions{}); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("push without a credential: %v", err)
	}
	os.WriteFile(store, []byte(strings.Replace(url, "http://", "http://phone:wrong@", 1)+"\n"), 0o600)
	if _, err := userGit(global).Push(ctx, r.dir, RemoteOptions{}); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("push with a wrong password: %v", err)
	}
	if revParse(t, bare, "main") == revParse(t, r.dir, "HEAD") {
		t.Fatal("a refused push reached the remote")
	}
	os.WriteFile(store, []byte(strings.Replace(url, "http://", "http://phone:secret@", 1)+"\n"), 0o600)
	res, err := userGit(global).Push(ctx, r.dir, RemoteOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	if revParse(t, bare, "main") != revParse(t, r.dir, "HEAD") || *logins == 0 || res.URL != url {
		t.Fatalf("push %+v: remote at %s, %d logins", res, revParse(t, bare, "main"), *logins)
	}
	pushFromElsewhere(t, bare, "c.txt", "c\n")
	pulled, err := userGit(global).Pull(ctx, r.dir, RemoteOptions{})
	if err != nil || revParse(t, r.dir, "HEAD") != revParse(t, bare, "main") || pulled.UpToDate {
		t.Fatalf("pull over HTTP: %+v %v", pulled, err)
	}
}

// TestRemoteIgnoresWhatTheAgentWroteIntoGitConfig: a repository whose
// .git/config names programs (core.sshCommand, a credential helper, a
// pre-push hook, remote.*.receivepack and uploadpack, a proxy) and
// rewrites the remote's URL to a repository the agent made
// (url.*.insteadOf, pushInsteadOf): push and pull go to the real remote
// with the user's credentials, and none of it runs.
func TestRemoteIgnoresWhatTheAgentWroteIntoGitConfig(t *testing.T) {
	t.Parallel()
	bare, r := remotePair(t)
	url, _ := httpRemote(t, bare)
	r.git("remote", "set-url", "origin", url)
	marker := filepath.Join(t.TempDir(), "ran")
	evil := filepath.Join(t.TempDir(), "evil.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", evil).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	run := "!touch " + marker + " #"
	for key, value := range map[string]string{
		"core.sshCommand":                "touch " + marker,
		"credential.helper":              run,
		"remote.origin.receivepack":      "touch " + marker,
		"remote.origin.uploadpack":       "touch " + marker,
		"url." + evil + ".insteadOf":     url,
		"url." + evil + ".pushInsteadOf": url,
		"http.proxy":                     "http://127.0.0.1:1",
	} {
		r.git("config", key, value)
	}
	os.WriteFile(filepath.Join(r.dir, ".git", "hooks", "pre-push"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
	r.write("b.txt", "b\n")
	r.commitAll("second")
	home := t.TempDir()
	global := filepath.Join(home, "gitconfig")
	store := filepath.Join(home, "credentials")
	os.WriteFile(global, []byte(fmt.Sprintf("[credential]\n\thelper = store --file=%s\n", store)), 0o600)
	os.WriteFile(store, []byte(strings.Replace(url, "http://", "http://phone:secret@", 1)+"\n"), 0o600)

	ctx := context.Background()
	if _, err := userGit(global).Push(ctx, r.dir, RemoteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := userGit(global).Pull(ctx, r.dir, RemoteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("something the agent wrote into .git ran")
	}
	if revParse(t, bare, "main") != revParse(t, r.dir, "HEAD") {
		t.Fatal("the push did not reach the real remote")
	}
	if out, _ := exec.Command("git", "-C", evil, "rev-parse", "--verify", "--quiet", "main").Output(); len(out) > 0 {
		t.Fatal("the push went to the agent's repository")
	}
}

// TestPushFromAShallowCloneAtAnAwkwardPath: a shallow clone in a
// directory with a space, whose remote is a relative path, pushes with
// safe.bareRepository=explicit set (the hardening git recommends).
func TestPushFromAShallowCloneAtAnAwkwardPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bare := filepath.Join(dir, "remote.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", "-b", "main", bare).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	seed := newRepo(t)
	for i := range 3 {
		seed.write("a.txt", fmt.Sprintf("%d\n", i))
		seed.commitAll(fmt.Sprintf("seed %d", i))
	}
	seed.git("push", "-q", bare, "main")
	r := &testRepo{t: t, dir: filepath.Join(dir, "My Projects", "app")}
	os.MkdirAll(r.dir, 0o755)
	r.git("clone", "-q", "--depth=1", "file://"+bare, ".")
	r.git("config", "user.name", "T")
	r.git("config", "user.email", "t@example.com")
	r.git("remote", "set-url", "origin", "../../remote.git")
	r.write("b.txt", "b\n")
	r.commitAll("on a shallow clone")
	strict := Git{Exec: func(ctx context.Context, c Call) (*exec.Cmd, error) {
		c.Env = append(c.Env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.bareRepository", "GIT_CONFIG_VALUE_0=explicit")
		return DirectExec(ctx, c)
	}}
	res, err := strict.Push(context.Background(), r.dir, RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if revParse(t, bare, "main") != revParse(t, r.dir, "HEAD") || res.URL != "../../remote.git" {
		t.Fatalf("push %+v: remote at %s", res, revParse(t, bare, "main"))
	}
}
