package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// agentBinds are, per agent, the binds that give it the user's own setup;
// an agent not listed gets none.
var agentBinds = map[string]func(home, workDir, stateDir string) ([]Bind, error){
	"claude-code": claudeBinds,
	"codex":       codexBinds,
}

// claudePrivate are the entries of ~/.claude a session does not see from
// the user's: every project's transcripts (its own project's are bound
// apart), the prompt history of all projects, the credentials (bound apart,
// writable), the IDE lock files (they hold the IDE bridges' tokens), and
// the CLI's scratch state, which each session keeps for itself.
var claudePrivate = []string{
	"projects", "history.jsonl", ".credentials.json", "ide",
	"backups", "debug", "file-history", "paste-cache", "plans", "session-env", "sessions",
	"shell-snapshots", "statsig", "telemetry", "todos",
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// maxLookAlikeWalk bounds the directories read in search of look-alikes;
// past it the name counts as shared.
const maxLookAlikeWalk = 1000

// ClaudeProjectDirShared reports whether a directory other than workDir
// exists whose Claude Code project directory is named as workDir's
// (ClaudeProjectDir is lossy: /r/a-b, /r/a/b and /r/a.b share -r-a-b). It
// walks from / down the entries whose names encode to the next part of the
// name (a link to a directory counts: a session may work through it),
// reading at most maxLookAlikeWalk directories; past that it reports true.
func ClaudeProjectDirShared(workDir string) bool {
	name := ClaudeProjectDir(workDir)
	reads := 0
	var walk func(dir, rest string) bool
	walk = func(dir, rest string) bool {
		if rest == "" {
			return dir != workDir
		}
		if rest[0] != '-' {
			return false
		}
		if reads++; reads > maxLookAlikeWalk {
			return true
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false
		}
		for _, e := range entries {
			enc := ClaudeProjectDir(e.Name())
			if enc == "" || !strings.HasPrefix(rest[1:], enc) {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
				continue
			}
			if walk(path, rest[1+len(enc):]) {
				return true
			}
		}
		return false
	}
	return walk("/", name)
}

// ClaudeProjectDir is the CLI's name for a working directory's directory
// under ~/.claude/projects: every character but a letter or a digit
// becomes '-' (/home/dev/project: -home-dev-project).
func ClaudeProjectDir(workDir string) string {
	return nonAlnum.ReplaceAllString(workDir, "-")
}

// claudeBinds gives the Claude Code CLI the user's ~/.claude and
// ~/.claude.json:
//
//   - ~/.claude is the session's own directory (StateDir/claude/dot-claude,
//     where the CLI's scratch state lands), with every entry of the user's
//     ~/.claude but claudePrivate bound in read-only: settings, CLAUDE.md,
//     commands, agents, skills, plugins, hooks' scripts …;
//   - ~/.claude/.credentials.json, when the user has one, read-write: the
//     CLI rewrites it when it refreshes an OAuth token;
//   - ~/.claude/projects/<this working directory>, read-write (created in
//     the user's ~/.claude when missing): the conversation transcripts
//     that --resume reads, shared with the user's own CLI; unless another
//     directory shares its name (ClaudeProjectDirShared), or did at an
//     earlier start: then the session's own;
//   - ~/.claude.json is StateDir/claude/claude.json, a copy of the user's
//     made when the session first starts; the CLI's changes to it (its
//     per-project state) stay with the session and are not copied back.
//
// Without a ~/.claude the CLI gets the session's own, empty, directory.
func claudeBinds(home, workDir, stateDir string) ([]Bind, error) {
	if home == "" || stateDir == "" {
		return nil, nil
	}
	state := filepath.Join(stateDir, "claude")
	own := filepath.Join(state, "dot-claude")
	if err := os.MkdirAll(own, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: claude state: %w", err)
	}
	user := filepath.Join(home, ".claude")
	binds := []Bind{{Src: own, Dst: user, Writable: true}}
	entries, err := os.ReadDir(user)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("sandbox: ~/.claude: %w", err)
	default:
		for _, e := range entries {
			if !slices.Contains(claudePrivate, e.Name()) {
				binds = append(binds, Bind{Src: filepath.Join(user, e.Name()), Dst: filepath.Join(user, e.Name())})
			}
		}
		if fi, err := os.Stat(filepath.Join(user, ".credentials.json")); err == nil && fi.Mode().IsRegular() {
			p := filepath.Join(user, ".credentials.json")
			binds = append(binds, Bind{Src: p, Dst: p, Writable: true})
		}
		// Look-alike working directories (/r/a-b, /r/a/b) share one
		// directory of transcripts: a session whose working directory
		// has one, or had one at an earlier start (its own copy exists),
		// keeps its transcripts in its own ~/.claude, so that neither
		// agent reads or writes the other project's conversations.
		private := filepath.Join(own, "projects", ClaudeProjectDir(workDir))
		if _, err := os.Stat(private); err == nil || ClaudeProjectDirShared(workDir) {
			if err := os.MkdirAll(private, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox: claude project directory: %w", err)
			}
		} else {
			project := filepath.Join(user, "projects", ClaudeProjectDir(workDir))
			if err := os.MkdirAll(project, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox: claude project directory: %w", err)
			}
			binds = append(binds, Bind{Src: project, Dst: project, Writable: true})
		}
	}
	global := filepath.Join(state, "claude.json")
	if err := copyOnce(filepath.Join(home, ".claude.json"), global); err != nil {
		return nil, err
	}
	return append(binds, Bind{Src: global, Dst: filepath.Join(home, ".claude.json"), Writable: true}), nil
}

// copyOnce copies src to dst unless dst exists; a missing src makes an
// empty JSON object.
func copyOnce(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b = []byte("{}\n")
	case err != nil:
		return fmt.Errorf("sandbox: ~/.claude.json: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return fmt.Errorf("sandbox: claude state: %w", err)
	}
	return nil
}
