-- Approvals are keyed by session and tool_call_id: an id is the agent's (or
-- a hook's) choice, and two sessions may use the same one. Pending rows are
-- kept.
CREATE TABLE approvals_by_session (
    session_id   TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    source       TEXT NOT NULL,
    payload      BLOB NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'answered', 'cancelled')),
    decision     TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    resolved_at  INTEGER,
    PRIMARY KEY (session_id, tool_call_id)
) STRICT;

INSERT INTO approvals_by_session (session_id, tool_call_id, source, payload, status, decision, created_at, resolved_at)
    SELECT session_id, tool_call_id, source, payload, status, decision, created_at, resolved_at FROM approvals;

DROP TABLE approvals;
ALTER TABLE approvals_by_session RENAME TO approvals;
CREATE INDEX approvals_pending ON approvals(status) WHERE status = 'pending';
