-- How far the daemon has read the transcript file of each Claude Code
-- session it observes through hooks, so that a restart goes on from there.
CREATE TABLE transcripts (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    path       TEXT NOT NULL,
    read_to    INTEGER NOT NULL
) STRICT;
