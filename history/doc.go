// Package history indexes every agent session this machine has had: tether's
// own (the store), Claude Code's transcripts (~/.claude/projects/<project>/
// <session id>.jsonl, and $CLAUDE_CONFIG_DIR's) and Codex's rollouts
// (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl). It lists them by project
// and last activity, searches their prompts and titles, and renders one
// conversation as the events a live session produces, a page at a time from
// the newest.
//
// The agents' files are read only, through an os.Root at their directory (no
// symbolic link leads out of it), and are untrusted: a malformed line is
// skipped, a line over MaxLine is skipped without being held in memory, a
// line still being written waits for its end (one already over MaxLine is
// not read again from its start), a file that shrank or was replaced is read
// again from its start, only a file's first MaxFile bytes are indexed (a
// longer one, say a sparse file of a terabyte, is read that far once and
// not again while it grows), a page of a conversation reads at most the
// maxPageRead bytes before its end, and of a directory (a project's
// transcripts: an agent can make millions) a walk reads maxDirEntries
// entries and the index holds the maxDirFiles newest files. The index lives in memory: it is
// built by one pass over the files at start (in parallel), then kept current
// from file notifications (fsnotify), each file read on from where its last
// read stopped.
package history
