package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/control"
)

// serveControl serves the control socket in dataDir, through which
// `tether devices` tells this daemon what it changed. A daemon without it
// would not hear of revocations, so failing to make it fails the start.
func serveControl(dataDir string, b *bridge.Server, logger *slog.Logger) (serve func(ctx context.Context) error, stop func(), err error) {
	ln, err := control.Listen(dataDir)
	if err != nil {
		return nil, nil, err
	}
	srv := &control.Server{
		Logger: logger,
		Handle: func(ctx context.Context, r control.Request) error {
			return b.DeviceChanged(ctx, r.Device)
		},
	}
	// Serve ends with ctx; an error of its own stops the daemon, which
	// would otherwise no longer hear of revocations.
	serve = func(ctx context.Context) error {
		defer context.AfterFunc(ctx, srv.Close)()
		if err := srv.Serve(ln); err != nil {
			return fmt.Errorf("control socket: %w", err)
		}
		return nil
	}
	return serve, func() { srv.Close(); os.Remove(filepath.Join(dataDir, control.SocketName)) }, nil
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
