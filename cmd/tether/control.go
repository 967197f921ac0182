package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/control"
)

// serveControl serves the control socket in dataDir, through which
// `tether devices` tells this daemon what it changed. A daemon without it
// would not hear of revocations, so failing to make it fails the start.
func serveControl(dataDir string, b *bridge.Server, logger *slog.Logger) (stop func(), err error) {
	ln, err := control.Listen(dataDir)
	if err != nil {
		return nil, err
	}
	srv := &control.Server{
		Logger: logger,
		Handle: func(ctx context.Context, r control.Request) error {
			return b.DeviceChanged(ctx, r.Device)
		},
	}
	go srv.Serve(ln)
	return func() { srv.Close(); os.Remove(filepath.Join(dataDir, control.SocketName)) }, nil
}

// tellDaemon tells the daemon running on dataDir, if any, that a device
// changed in the store. It reports whether a daemon was told.
func tellDaemon(ctx context.Context, dataDir, deviceID string) (bool, error) {
	err := control.Send(ctx, dataDir, control.Request{Op: control.OpDeviceChanged, Device: deviceID})
	if errors.Is(err, control.ErrNoDaemon) {
		return false, nil
	}
	return err == nil, err
}
