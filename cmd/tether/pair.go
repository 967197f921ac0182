package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
)

func pairCmd(ctx context.Context, args, envList []string, stdout, stderr io.Writer) int {
	env := envMap(envList)
	var cfg config
	fs := newFlagSet("pair", stderr, &cfg, env)
	addServerFlags(fs, &cfg)
	asJSON := fs.Bool("json", false, "print the pairing payload as one JSON object instead of a QR code")
	app := fs.Bool("app", false, "issue an app code: the first device to use it keeps it as its long-lived token (for apps that store the QR's token)")
	if err := parseFlags(fs, args, env); err != nil {
		return 2
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(stderr, "tether pair:", err)
		return 2
	}
	url, fp, running, err := pairingTarget(&cfg)
	if err != nil {
		fmt.Fprintln(stderr, "tether pair:", err)
		return 1
	}
	st, err := openDataDir(ctx, cfg.DataDir)
	if err != nil {
		fmt.Fprintln(stderr, "tether pair:", err)
		return 1
	}
	defer st.Close()
	kind := store.CodeOnce
	if *app {
		kind = store.CodeApp
	}
	code, err := (&pairing.Pairer{Store: st, TTL: cfg.TTL}).NewCode(ctx, kind)
	if err != nil {
		fmt.Fprintln(stderr, "tether pair:", err)
		return 1
	}
	p := pairing.NewPayload(url, code, fp)
	if *asJSON {
		fmt.Fprintf(stdout, "%s\n", p.JSON())
		return 0
	}
	if err := printPairing(stdout, p); err != nil {
		fmt.Fprintln(stderr, "tether pair:", err)
		return 1
	}
	if !running {
		fmt.Fprintln(stdout, "The daemon is not running: start it with `tether serve` before scanning.")
	}
	if *app {
		fmt.Fprintln(stdout, "This is an app code: the first device to use it keeps it as its own token until revoked.")
	}
	return 0
}

// pairingTarget is the URL and fingerprint a pairing payload names: what
// the daemon recorded when it last started, unless --url overrides the URL;
// with no daemon ever started, what `tether serve` with these flags would
// use (creating the self-signed certificate it would create). running
// tells whether that daemon is up now.
func pairingTarget(cfg *config) (url, fp string, running bool, err error) {
	info, err := readRuntimeInfo(cfg.DataDir)
	switch {
	case err == nil:
		url, fp = info.URL, info.Fingerprint
		if cfg.URL != "" {
			url = cfg.URL
		}
		return url, fp, processAlive(info.PID), nil
	case !errors.Is(err, os.ErrNotExist):
		return "", "", false, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return "", "", false, err
	}
	cert, err := loadCert(cfg, time.Now())
	if err != nil {
		return "", "", false, err
	}
	return advertisedURL(cfg, cfg.Listen), fingerprint(cert), false, nil
}
