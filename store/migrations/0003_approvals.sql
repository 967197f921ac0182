-- Permission questions waiting for a phone, so that a reconnecting phone is
-- told of them and a restarted daemon can withdraw the ones it lost.
CREATE TABLE approvals (
    tool_call_id TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL,
    source       TEXT NOT NULL,
    payload      BLOB NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'answered', 'cancelled')),
    decision     TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    resolved_at  INTEGER
) STRICT;

CREATE INDEX approvals_pending ON approvals(status) WHERE status = 'pending';
