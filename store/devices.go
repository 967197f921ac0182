package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Pairing code kinds.
const (
	// CodeOnce is a one-time code: claiming it creates a device with a new
	// device token of its own, and the code is spent.
	CodeOnce = "once"
	// CodeApp is a code for apps that keep the pairing code as their
	// credential: the first device to claim it keeps the code itself as its
	// long-lived, revocable token.
	CodeApp = "app"
)

// Expected failures of ClaimPairingCode.
var (
	ErrCodeUnknown = errors.New("pairing code unknown")
	ErrCodeExpired = errors.New("pairing code expired")
	ErrCodeUsed    = errors.New("pairing code already used")
)

// Device is a paired phone or browser.
type Device struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Platform      string     `json:"platform"`
	ClientVersion string     `json:"client_version"`
	PairedAt      time.Time  `json:"paired_at"`
	LastSeen      time.Time  `json:"last_seen"`
	LastAddr      string     `json:"last_address"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	// TokenHash is the SHA-256 of the device's token; never shown.
	TokenHash []byte `json:"-"`
}

// PairingCode is a stored pairing code (by hash).
type PairingCode struct {
	Hash      []byte
	Kind      string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// CreatePairingCode stores a new pairing code.
func (s *Store) CreatePairingCode(ctx context.Context, c PairingCode) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO pairing_codes (hash, kind, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		c.Hash, c.Kind, millis(c.CreatedAt), millis(c.ExpiresAt))
	if err != nil {
		return fmt.Errorf("store: create pairing code: %w", err)
	}
	return nil
}

// ClaimPairingCode spends the pairing code with hash codeHash and creates dev
// in one transaction. For a CodeApp code, dev.TokenHash is set to codeHash.
// It fails with ErrCodeUnknown, ErrCodeExpired or ErrCodeUsed.
func (s *Store) ClaimPairingCode(ctx context.Context, codeHash []byte, now time.Time, dev Device) (Device, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Device{}, fmt.Errorf("store: claim pairing code: %w", err)
	}
	defer tx.Rollback()
	var kind string
	var expires int64
	var used sql.NullInt64
	err = tx.QueryRowContext(ctx, `SELECT kind, expires_at, used_at FROM pairing_codes WHERE hash = ?`, codeHash).
		Scan(&kind, &expires, &used)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Device{}, ErrCodeUnknown
	case err != nil:
		return Device{}, fmt.Errorf("store: claim pairing code: %w", err)
	case used.Valid:
		return Device{}, ErrCodeUsed
	case millis(now) >= expires:
		return Device{}, ErrCodeExpired
	}
	if kind == CodeApp {
		dev.TokenHash = codeHash
	}
	dev.PairedAt, dev.LastSeen = now, now
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO devices (id, name, platform, client_version, token_hash, paired_at, last_seen, last_addr)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		dev.ID, dev.Name, dev.Platform, dev.ClientVersion, dev.TokenHash, millis(now), millis(now), dev.LastAddr); err != nil {
		return Device{}, fmt.Errorf("store: create device: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE pairing_codes SET used_at = ?, device_id = ? WHERE hash = ?`,
		millis(now), dev.ID, codeHash); err != nil {
		return Device{}, fmt.Errorf("store: spend pairing code: %w", err)
	}
	// Spent and expired codes are of no further use: keep the table small.
	if _, err := tx.ExecContext(ctx, `DELETE FROM pairing_codes WHERE expires_at < ? AND used_at IS NULL`,
		millis(now.Add(-24*time.Hour))); err != nil {
		return Device{}, fmt.Errorf("store: prune pairing codes: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Device{}, fmt.Errorf("store: claim pairing code: %w", err)
	}
	return dev, nil
}

const deviceColumns = `id, name, platform, client_version, token_hash, paired_at, last_seen, last_addr, revoked_at`

type rowScanner interface{ Scan(...any) error }

func scanDevice(r rowScanner) (Device, error) {
	var d Device
	var paired, seen int64
	var revoked sql.NullInt64
	if err := r.Scan(&d.ID, &d.Name, &d.Platform, &d.ClientVersion, &d.TokenHash, &paired, &seen, &d.LastAddr, &revoked); err != nil {
		return Device{}, err
	}
	d.PairedAt, d.LastSeen = fromMillis(paired), fromMillis(seen)
	if revoked.Valid {
		t := fromMillis(revoked.Int64)
		d.RevokedAt = &t
	}
	return d, nil
}

// DeviceByTokenHash returns the device whose token hashes to h, revoked or
// not, or ErrNotFound.
func (s *Store) DeviceByTokenHash(ctx context.Context, h []byte) (Device, error) {
	return s.device(ctx, `token_hash = ?`, h)
}

// Device returns the device with id, or ErrNotFound.
func (s *Store) Device(ctx context.Context, id string) (Device, error) {
	return s.device(ctx, `id = ?`, id)
}

func (s *Store) device(ctx context.Context, where string, arg any) (Device, error) {
	d, err := scanDevice(s.queryRow(ctx, `SELECT `+deviceColumns+` FROM devices WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return Device{}, ErrNotFound
	}
	if err != nil {
		return Device{}, fmt.Errorf("store: read device: %w", err)
	}
	return d, nil
}

// Devices lists all devices, revoked ones included, oldest first.
func (s *Store) Devices(ctx context.Context) ([]Device, error) {
	out, err := queryAll(ctx, s, scanDevice, `SELECT `+deviceColumns+` FROM devices ORDER BY paired_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list devices: %w", err)
	}
	return out, nil
}

// CountActiveDevices counts the devices that are not revoked.
func (s *Store) CountActiveDevices(ctx context.Context) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT count(*) FROM devices WHERE revoked_at IS NULL`).Scan(&n)
	return n, err
}

// A Sighting is a device seen at a time from an address, with the client
// version and platform it gave ("" keeps the stored one).
type Sighting struct {
	Device        string
	At            time.Time
	Addr          string
	ClientVersion string
	Platform      string
}

// TouchDevices records sightings of devices, in one transaction (one
// commit for the lot). Unknown devices are skipped.
func (s *Store) TouchDevices(ctx context.Context, seen []Sighting) error {
	if len(seen) == 0 {
		return nil
	}
	// Prepared before the transaction takes the one write connection.
	st, err := s.prepared(ctx, s.db, touchDevice)
	if err != nil {
		return fmt.Errorf("store: touch devices: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: touch devices: %w", err)
	}
	defer tx.Rollback()
	txst := tx.StmtContext(ctx, st)
	for _, d := range seen {
		if _, err := txst.ExecContext(ctx, millis(d.At), d.Addr, d.ClientVersion, d.ClientVersion, d.Platform, d.Platform, d.Device); err != nil {
			return fmt.Errorf("store: touch devices: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: touch devices: %w", err)
	}
	return nil
}

const touchDevice = `UPDATE devices SET last_seen = ?, last_addr = ?,
	client_version = CASE WHEN ? = '' THEN client_version ELSE ? END,
	platform = CASE WHEN ? = '' THEN platform ELSE ? END
	WHERE id = ?`

// RevokeDevice marks a device revoked; its token stops working at once. It
// returns ErrNotFound for an unknown id; revoking twice keeps the first time.
func (s *Store) RevokeDevice(ctx context.Context, id string, now time.Time) error {
	return s.updateDevice(ctx, `UPDATE devices SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`, millis(now), id)
}

// RenameDevice sets a device's display name.
func (s *Store) RenameDevice(ctx context.Context, id, name string) error {
	return s.updateDevice(ctx, `UPDATE devices SET name = ? WHERE id = ?`, name, id)
}

func (s *Store) updateDevice(ctx context.Context, q string, args ...any) error {
	res, err := s.exec(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("store: update device: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// RevokedDevices returns the ids of all revoked devices.
func (s *Store) RevokedDevices(ctx context.Context) (map[string]bool, error) {
	rows, err := s.query(ctx, `SELECT id FROM devices WHERE revoked_at IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("store: revoked devices: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}
