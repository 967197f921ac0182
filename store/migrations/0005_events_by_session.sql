-- A session's history is read a page at a time, newest first
-- (session_history): by session, then seq.
CREATE INDEX events_session_seq ON events(session_id, seq);
