-- Agent-to-agent runs (the spec's bridge): a run groups named participants,
-- each a session, and one append-only stream of messages among them.
CREATE TABLE runs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    template   TEXT NOT NULL,
    task       TEXT NOT NULL,
    work_dir   TEXT NOT NULL,
    max_rounds INTEGER NOT NULL CHECK (max_rounds > 0),
    status     TEXT NOT NULL CHECK (status IN ('running', 'passed', 'exhausted', 'stopped', 'failed')),
    reason     TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    ended_at   INTEGER
) STRICT;

-- A participant is a session under a name; delivered is the seq of the
-- run's last message it has seen (drained, or given as a turn that ended).
CREATE TABLE run_participants (
    run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    session_id TEXT NOT NULL UNIQUE,
    agent      TEXT NOT NULL,
    role       TEXT NOT NULL,
    delivered  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, name)
) STRICT;

-- The messages, in the order they were accepted (seq, per run). id is the
-- spec's GenerateID: a second send of the same message is not stored.
CREATE TABLE run_messages (
    run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    sender     TEXT NOT NULL,
    recipient  TEXT NOT NULL,
    content    TEXT NOT NULL,
    signal     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq),
    UNIQUE (run_id, id)
) STRICT;
