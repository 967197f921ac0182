package session

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// shellCall is one simple command of a shell command line: its words, as
// far as they are literal.
type shellCall struct {
	words []string
	// opaque is true when a word is not literal: a parameter, a command
	// or process substitution, a glob the shell expands.
	opaque bool
}

// shellAnalysis is what the parser (mvdan.cc/sh/v3/syntax, bash dialect)
// makes of a command line.
type shellAnalysis struct {
	calls []shellCall
	// simple is true for exactly one command with literal words (and
	// arithmetic expansions, which run nothing), no redirection into a
	// file, no pipe, list, subshell, function, loop or background job.
	simple bool
	// redirects is true when output goes to a file (>, >>, &>, >|, <>),
	// /dev/null aside.
	redirects bool
	// parsed is false when the line does not parse: nothing is assumed.
	parsed bool
}

// analyzeShell parses cmd with a real shell parser: character checks cannot
// tell `echo $((1+1))` (harmless) from `echo $(curl …)` (not).
func analyzeShell(cmd string) shellAnalysis {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil || len(f.Stmts) == 0 {
		return shellAnalysis{}
	}
	a := shellAnalysis{parsed: true, simple: len(f.Stmts) == 1}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			if n.Background || n.Coprocess || n.Negated {
				a.simple = false
			}
			for _, r := range n.Redirs {
				switch r.Op {
				case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrInOut:
					if r.Word == nil || r.Word.Lit() != "/dev/null" {
						a.redirects = true
					}
				}
			}
		case *syntax.CallExpr:
			c := shellCall{}
			for _, w := range n.Args {
				lit, ok := literalWord(w)
				c.words = append(c.words, lit)
				c.opaque = c.opaque || !ok
			}
			if len(n.Assigns) > 0 {
				c.opaque = true
			}
			a.calls = append(a.calls, c)
		case *syntax.BinaryCmd, *syntax.Subshell, *syntax.Block, *syntax.FuncDecl, *syntax.IfClause,
			*syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause, *syntax.DeclClause, *syntax.LetClause,
			*syntax.TimeClause, *syntax.CoprocClause, *syntax.TestClause, *syntax.ArithmCmd:
			a.simple = false
		case *syntax.CmdSubst, *syntax.ProcSubst:
			a.simple = false
			if len(a.calls) > 0 {
				a.calls[len(a.calls)-1].opaque = true
			}
		}
		return true
	})
	if a.redirects || len(a.calls) != 1 || a.calls[0].opaque || len(a.calls[0].words) == 0 {
		a.simple = false
	}
	return a
}

// literalWord is a word's text when it is literal: plain and quoted text,
// escaped characters and arithmetic expansions (which run no command).
// Parameters, substitutions, brace expansions and globs are not.
func literalWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	ok := true
	var part func(p syntax.WordPart)
	part = func(p syntax.WordPart) {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[") {
				ok = false
			}
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				part(q)
			}
		case *syntax.ArithmExp:
			ok = ok && arithmeticOnly(p)
			b.WriteString("$((…))")
		default:
			ok = false
		}
	}
	for _, p := range w.Parts {
		part(p)
	}
	return b.String(), ok
}

// arithmeticOnly reports whether an arithmetic expansion holds no command
// substitution (bash runs those inside $((…)) too).
func arithmeticOnly(e *syntax.ArithmExp) bool {
	ok := true
	syntax.Walk(e, func(n syntax.Node) bool {
		if _, sub := n.(*syntax.CmdSubst); sub {
			ok = false
		}
		return ok
	})
	return ok
}

// interpreters run whatever their arguments say: a rule for one would
// approve any program. They are never remembered.
var interpreters = []string{
	"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "busybox",
	"python", "python2", "python3", "node", "nodejs", "deno", "bun", "ruby", "perl", "php", "lua", "tclsh", "osascript", "pwsh",
	"eval", "exec", "source", ".", "env", "xargs", "sudo", "doas", "su", "nohup", "timeout", "nice", "ionice", "strace",
	"watch", "script", "expect", "ssh", "docker", "podman", "kubectl", "npx", "pnpx", "bunx", "uvx", "awk", "gawk", "sed", "find", "make",
}

// isInterpreter reports whether program (a name or a path) is an
// interpreter, versioned names included (python3.12, node18).
func isInterpreter(program string) bool {
	base := path.Base(program)
	return slices.Contains(interpreters, base) || slices.Contains(interpreters, strings.TrimRight(base, "0123456789."))
}
