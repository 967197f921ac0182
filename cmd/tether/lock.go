package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockFile is the data directory's daemon lock.
const lockFile = "daemon.lock"

// lockDataDir takes the data directory's daemon lock, an flock on
// daemon.lock that the kernel lets go when the daemon dies, however it
// dies. A second daemon on the same directory is refused: two would hand out
// the same event seqs, take each other's sessions for stale and fight over
// the terminal socket.
func lockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory lock: %w", err)
		}
		who := "another tether daemon"
		if info, err := readRuntimeInfo(dir); err == nil && info.PID > 0 {
			who = fmt.Sprintf("another tether daemon (pid %d, %s)", info.PID, info.URL)
		}
		return nil, fmt.Errorf("%s already serves the data directory %s: stop it first (tether service status tells whether it runs as a service), or give this one another --data and another --listen port", who, dir)
	}
	return func() { f.Close() }, nil
}
