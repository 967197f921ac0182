-- Agent sessions, the durable log of every session event sent to phones,
-- client message ids already run, notifications and per-device cursors.
CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    agent             TEXT NOT NULL,
    source            TEXT NOT NULL DEFAULT 'sandbox' CHECK (source IN ('sandbox', 'hooks')),
    working_directory TEXT NOT NULL,
    title             TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL,
    agent_session_id  TEXT NOT NULL DEFAULT '',
    policy            TEXT NOT NULL DEFAULT '',
    error             TEXT NOT NULL DEFAULT '',
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_status ON sessions(status);

-- seq is assigned by the daemon, global and increasing; frame is the exact
-- JSON text sent to phones (it carries its own seq).
CREATE TABLE events (
    seq        INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    type       TEXT NOT NULL,
    frame      BLOB NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE INDEX events_created_at ON events(created_at);

CREATE TABLE client_messages (
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, message_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE notifications (
    id         TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE notification_acks (
    notification_id TEXT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
    device_id       TEXT NOT NULL,
    acked_at        INTEGER NOT NULL,
    PRIMARY KEY (notification_id, device_id)
) STRICT, WITHOUT ROWID;

-- The last seq written to each device's socket, for clients that reconnect
-- without last_seq.
CREATE TABLE device_cursors (
    device_id TEXT PRIMARY KEY,
    last_seq  INTEGER NOT NULL
) STRICT;
