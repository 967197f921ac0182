-- Web Push subscriptions, per device: where the browser's push service
-- takes messages for it, and the keys its messages are encrypted to. A
-- revoked device's subscriptions go with the revocation, whichever process
-- revokes it.
CREATE TABLE push_subscriptions (
    endpoint   TEXT PRIMARY KEY,
    device_id  TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    p256dh     TEXT NOT NULL,
    auth       TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE INDEX push_subscriptions_device ON push_subscriptions(device_id, created_at);

CREATE TRIGGER push_subscriptions_revoked AFTER UPDATE OF revoked_at ON devices
WHEN NEW.revoked_at IS NOT NULL
BEGIN
    DELETE FROM push_subscriptions WHERE device_id = NEW.id;
END;
