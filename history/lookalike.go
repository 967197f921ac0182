package history

import (
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
)

// Claude Code keeps a working directory's transcripts in a directory named
// by replacing each character but a letter or a digit with '-': /r/a-b,
// /r/a/b and /r/a.b share -r-a-b. A sandboxed claude-code session may
// write its own project's directory (sandbox.ClaudeProjectDir), so an
// agent working in /r/a/b can leave there a transcript that names /r/a-b
// as its working directory, which nothing in the file tells from one
// written there by /r/a-b's own session. What decides whose a transcript
// is, then, is who could have written it: only the directory it names,
// when no other directory shares its name. Another one does when it exists
// now (a sandbox needs one to work in), or when the store records a
// sandboxed session that worked in it (a directory removed since, whose
// transcripts stay).

// sandboxWorkDirs maps the name of a transcripts' directory to the working
// directories of the sandboxed sessions of recs whose transcripts it would
// hold.
func sandboxWorkDirs(recs []store.Session) map[string][]string {
	out := map[string][]string{}
	for _, rec := range recs {
		if rec.Source == store.SourceSandbox && rec.WorkingDirectory != "" {
			name := session.ClaudeProjectDir(rec.WorkingDirectory)
			out[name] = append(out[name], rec.WorkingDirectory)
		}
	}
	return out
}

// sharedBySandbox reports whether a sandboxed session of dirs
// (sandboxWorkDirs) worked in a directory other than cwd whose transcripts'
// directory is named as cwd's.
func sharedBySandbox(dirs map[string][]string, cwd string) bool {
	for _, d := range dirs[session.ClaudeProjectDir(cwd)] {
		if d != cwd {
			return true
		}
	}
	return false
}
