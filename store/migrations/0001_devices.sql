-- Paired devices and the pairing codes that create them. Secrets are stored
-- only as SHA-256 hashes.
CREATE TABLE devices (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    platform       TEXT NOT NULL DEFAULT '',
    client_version TEXT NOT NULL DEFAULT '',
    token_hash     BLOB NOT NULL UNIQUE,
    paired_at      INTEGER NOT NULL,
    last_seen      INTEGER NOT NULL,
    last_addr      TEXT NOT NULL DEFAULT '',
    revoked_at     INTEGER
) STRICT;

CREATE INDEX devices_revoked_at ON devices(revoked_at) WHERE revoked_at IS NOT NULL;

CREATE TABLE pairing_codes (
    hash       BLOB PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('once', 'app')),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER,
    device_id  TEXT REFERENCES devices(id) ON DELETE SET NULL
) STRICT;
