package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/tetherdev/tether/session"
	wrapper "github.com/tetherdev/tether/terminal"
)

// claudeCmd is `tether claude [claude's arguments…]`: the user's claude in
// this terminal, its session offered to the phone (package terminal). Every
// argument is claude's; the daemon is found through TETHER_DATA (or the
// default data directory) and claude through TETHER_CLAUDE_BIN or PATH.
func claudeCmd(ctx context.Context, args, envList []string, _, stderr io.Writer) int {
	env := envMap(envList)
	dataDir := env["TETHER_DATA"]
	if dataDir == "" {
		dataDir = defaultDataDir(env)
	}
	bin := findClaude(env["TETHER_CLAUDE_BIN"])
	if bin == "" {
		fmt.Fprintln(stderr, "tether claude: the claude CLI is not on PATH (or set TETHER_CLAUDE_BIN)")
		return 127
	}
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(stderr, "tether claude:", err)
		return 1
	}
	return wrapper.Run(ctx, wrapper.Options{Claude: bin, Args: args, Socket: filepath.Join(dataDir, wrapper.SocketName),
		Dir: dir, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: stderr})
}

// serveTerminals accepts `tether claude` on its socket in the data
// directory (mode 0600 in a 0700 directory: the user's alone, and no
// sandbox sees the data directory). A path too long for a Unix socket
// leaves `tether claude` out, with a warning.
func serveTerminals(dataDir string, sessions *session.Manager, logger *slog.Logger) (stop func()) {
	path := filepath.Join(dataDir, wrapper.SocketName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		logger.Warn("tether claude is not available: stale socket", "path", path, "err", err)
		return func() {}
	}
	ln, err := net.Listen("unix", path)
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		logger.Warn("tether claude is not available", "path", path, "err", err)
		return func() {}
	}
	srv := &wrapper.Server{Manager: sessions, Logger: logger}
	go func() {
		if err := srv.Serve(ln); err != nil {
			logger.Warn("tether claude: the wrapper socket failed; running wrappers are on their own", "err", err)
		}
	}()
	return func() { srv.Close(); os.Remove(path) }
}
