package bridge

import (
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// MaxDeviceName is the longest device name accepted, in characters: a
// pairing label's.
const MaxDeviceName = pairing.MaxLabel

func (c *conn) deviceList(env wire.Envelope) error {
	if err := wire.DecodePayload(env, &struct{}{}); err != nil {
		return err
	}
	return c.sendDeviceList(env.ID)
}

func (c *conn) deviceRename(env wire.Envelope) error {
	var p wire.DeviceRequest
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	name := pairing.CleanLabel(p.Name)
	switch {
	case p.DeviceID == "":
		return wire.Errorf(wire.CodeInvalidMessage, "device_id is required")
	case name == "":
		return wire.Errorf(wire.CodeInvalidMessage, "name must not be empty")
	case utf8.RuneCountInString(strings.TrimSpace(p.Name)) > MaxDeviceName:
		return wire.Errorf(wire.CodeInvalidMessage, "name must be at most %d characters", MaxDeviceName)
	}
	if err := c.s.Store.RenameDevice(c.ctx, p.DeviceID, name); err != nil {
		return deviceError(err)
	}
	c.s.Pairer.Forget(p.DeviceID)
	// The device's live connections sign its messages with the new name.
	c.s.renamed(p.DeviceID, name)
	return c.sendDeviceList(env.ID)
}

func (c *conn) deviceRevoke(env wire.Envelope) error {
	var p wire.DeviceRequest
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	if p.DeviceID == "" {
		return wire.Errorf(wire.CodeInvalidMessage, "device_id is required")
	}
	if err := c.s.Store.RevokeDevice(c.ctx, p.DeviceID, c.s.now()); err != nil {
		return deviceError(err)
	}
	c.s.Logger.Info("device revoked", "device", p.DeviceID, "by", c.deviceID())
	if err := c.sendDeviceList(env.ID); err != nil {
		return err
	}
	c.s.CloseDevice(p.DeviceID, "This device has been revoked")
	return nil
}

func deviceError(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return wire.Errorf(wire.CodeDeviceNotFound, "no such device")
	}
	return err
}

func (c *conn) sendDeviceList(id string) error {
	devs, err := c.s.Store.Devices(c.ctx)
	if err != nil {
		return err
	}
	online := map[string]bool{}
	for _, lc := range c.s.liveConns() {
		online[lc.deviceID()] = true
	}
	out := wire.DeviceList{Devices: make([]wire.DeviceInfo, 0, len(devs))}
	for _, d := range devs {
		info := wire.DeviceInfo{
			DeviceID:      d.ID,
			Name:          d.Name,
			Platform:      d.Platform,
			ClientVersion: d.ClientVersion,
			PairedAt:      d.PairedAt.UTC().Format(time.RFC3339),
			Revoked:       d.RevokedAt != nil,
			Current:       d.ID == c.deviceID(),
			Online:        online[d.ID] && d.RevokedAt == nil,
		}
		if !d.LastSeen.IsZero() {
			info.LastSeen = d.LastSeen.UTC().Format(time.RFC3339)
		}
		if d.RevokedAt != nil {
			info.RevokedAt = d.RevokedAt.UTC().Format(time.RFC3339)
		}
		out.Devices = append(out.Devices, info)
	}
	c.send(wire.TypeDeviceListResponse, id, out)
	return nil
}
