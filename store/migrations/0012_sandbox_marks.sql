-- How far a session's sandbox bridge is committed: every event the bridge
-- numbered up to seq has been handled and what it made the phones see is
-- in the event log. A daemon that adopts the bridge after a restart
-- acknowledges seq and is sent the events after it. bridge names the bridge
-- process (its pid and start time): a mark of an earlier bridge of the
-- session says nothing of a new one, whose numbers start again at 1. state
-- is the daemon's own state of the session's translation at that point
-- (JSON), which an adopting daemon takes over.
CREATE TABLE sandbox_marks (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    bridge     TEXT NOT NULL,
    seq        INTEGER NOT NULL CHECK (seq >= 0),
    state      TEXT NOT NULL DEFAULT ''
) STRICT;
