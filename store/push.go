package store

import (
	"context"
	"fmt"
	"time"
)

// PushSubscription is a browser's Web Push subscription for a device.
type PushSubscription struct {
	DeviceID string
	// Endpoint is the push service's URL for this browser.
	Endpoint string
	// P256dh and Auth are the browser's keys, base64url, as the browser
	// gives them.
	P256dh, Auth string
	CreatedAt    time.Time
}

// MaxPushSubscriptions is how many subscriptions a device keeps; a new one
// past it replaces the oldest (a browser that subscribed again).
const MaxPushSubscriptions = 4

// SavePushSubscription records sub for its device (again, if the endpoint
// is known), keeping the device's newest MaxPushSubscriptions. A revoked
// or unknown device is ErrNotFound.
func (s *Store) SavePushSubscription(ctx context.Context, sub PushSubscription) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: save push subscription: %w", err)
	}
	defer tx.Rollback()
	var live int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM devices WHERE id = ? AND revoked_at IS NULL`, sub.DeviceID).Scan(&live); err != nil {
		return fmt.Errorf("store: save push subscription: %w", err)
	}
	if live == 0 {
		return ErrNotFound
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO push_subscriptions (endpoint, device_id, p256dh, auth, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (endpoint) DO UPDATE SET device_id = excluded.device_id, p256dh = excluded.p256dh, auth = excluded.auth, created_at = excluded.created_at`,
		sub.Endpoint, sub.DeviceID, sub.P256dh, sub.Auth, millis(sub.CreatedAt)); err != nil {
		return fmt.Errorf("store: save push subscription: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM push_subscriptions WHERE device_id = ? AND endpoint NOT IN (
		SELECT endpoint FROM push_subscriptions WHERE device_id = ? ORDER BY created_at DESC LIMIT ?)`, sub.DeviceID, sub.DeviceID, MaxPushSubscriptions); err != nil {
		return fmt.Errorf("store: save push subscription: %w", err)
	}
	return tx.Commit()
}

// PushSubscriptions returns the subscriptions of every device that is not
// revoked.
func (s *Store) PushSubscriptions(ctx context.Context) ([]PushSubscription, error) {
	rows, err := s.query(ctx, `SELECT p.device_id, p.endpoint, p.p256dh, p.auth, p.created_at FROM push_subscriptions p
		JOIN devices d ON d.id = p.device_id WHERE d.revoked_at IS NULL ORDER BY p.created_at`)
	if err != nil {
		return nil, fmt.Errorf("store: push subscriptions: %w", err)
	}
	defer rows.Close()
	var out []PushSubscription
	for rows.Next() {
		var p PushSubscription
		var created int64
		if err := rows.Scan(&p.DeviceID, &p.Endpoint, &p.P256dh, &p.Auth, &created); err != nil {
			return nil, err
		}
		p.CreatedAt = fromMillis(created)
		out = append(out, p)
	}
	return out, rows.Err()
}

// DeletePushSubscription forgets an endpoint: the push service said it is
// gone (404, 410), or its device unsubscribed. deviceID, when not empty,
// limits it to that device's.
func (s *Store) DeletePushSubscription(ctx context.Context, endpoint, deviceID string) error {
	q, args := `DELETE FROM push_subscriptions WHERE endpoint = ?`, []any{endpoint}
	if deviceID != "" {
		q, args = q+` AND device_id = ?`, append(args, deviceID)
	}
	if _, err := s.exec(ctx, q, args...); err != nil {
		return fmt.Errorf("store: delete push subscription: %w", err)
	}
	return nil
}
