package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// userGitKeys are the keys of the user's own git configuration that the
// session's git gets (prefixes end with a dot): identity and what shapes
// status and diff. Nothing else reaches the git sandbox, where a hook the
// agent planted runs: ~/.gitconfig may hold a token (an insteadOf URL, an
// http.extraHeader, a credential helper's settings).
var userGitKeys = []string{
	"user.", "i18n.", "status.", "core.excludesfile", "core.attributesfile", "core.autocrlf", "core.eol",
	"core.safecrlf", "core.quotepath", "core.ignorecase", "core.precomposeunicode", "core.filemode",
	"core.symlinks", "core.untrackedcache", "init.defaultbranch", "diff.renames", "diff.renamelimit",
	"diff.algorithm", "diff.indentheuristic", "safe.directory", "feature.manyfiles", "index.version",
}

// userGitConfig keeps, in dir, a copy of the user's global git
// configuration (~/.gitconfig, $XDG_CONFIG_HOME/git/config and what they
// include) with only userGitKeys, made again when those files change. The
// session's git reads it as GIT_CONFIG_GLOBAL.
type userGitConfig struct {
	home, dir string

	mu    sync.Mutex
	stamp string   // the sources' sizes and times when path was made
	path  string   // the copy
	files []string // the excludes and attributes files it names
}

// file returns the copy's path, remaking it when the sources changed, and
// the other files it names that git needs to see.
func (u *userGitConfig) file() (string, []string, error) {
	sources := []string{filepath.Join(u.home, ".gitconfig"), filepath.Join(xdgConfigHome(u.home), "git", "config")}
	var stamp strings.Builder
	for _, s := range sources {
		if fi, err := os.Stat(s); err == nil {
			fmt.Fprintf(&stamp, "%s %d %d;", s, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.path == "" || stamp.String() != u.stamp {
		if err := u.make(); err != nil {
			return "", nil, err
		}
		u.stamp = stamp.String()
	}
	return u.path, append(u.visible(), u.files...), nil
}

func (u *userGitConfig) make() error {
	cmd := exec.Command("git", "config", "--global", "--list", "--includes", "-z")
	cmd.Dir, cmd.Env = os.TempDir(), append(os.Environ(), "HOME="+u.home)
	out, err := cmd.Output()
	if err != nil && len(out) > 0 {
		return fmt.Errorf("reading the user's git configuration: %w", err)
	}
	var b bytes.Buffer
	var files []string
	for _, entry := range bytes.Split(out, []byte{0}) {
		key, value, _ := strings.Cut(string(entry), "\n")
		if key == "" || !keptKey(strings.ToLower(key)) {
			continue
		}
		if k := strings.ToLower(key); k == "core.excludesfile" || k == "core.attributesfile" {
			if p, ok := strings.CutPrefix(value, "~/"); ok {
				value = filepath.Join(u.home, p)
			}
			files = append(files, existing(value)...)
		}
		first, last := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
		if first <= 0 || last == len(key)-1 {
			continue
		}
		section, name := key[:first], key[last+1:]
		if first < last {
			fmt.Fprintf(&b, "[%s %s]\n", section, quoteGit(key[first+1:last]))
		} else {
			fmt.Fprintf(&b, "[%s]\n", section)
		}
		fmt.Fprintf(&b, "\t%s = %s\n", name, quoteGit(value))
	}
	if err := os.MkdirAll(u.dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(u.dir, fmt.Sprintf("gitconfig-%d", time.Now().UnixNano()))
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		return err
	}
	if u.path != "" {
		os.Remove(u.path)
	}
	u.path, u.files = path, files
	return nil
}

// visible are the files git reads besides the configuration: the user's
// global excludes and attributes.
func (u *userGitConfig) visible() []string {
	git := filepath.Join(xdgConfigHome(u.home), "git")
	return existing(filepath.Join(git, "ignore"), filepath.Join(git, "attributes"))
}

func keptKey(key string) bool {
	for _, k := range userGitKeys {
		if key == k || strings.HasSuffix(k, ".") && strings.HasPrefix(key, k) {
			return true
		}
	}
	return false
}

// quoteGit quotes a value or subsection name for a git configuration file.
func quoteGit(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}
