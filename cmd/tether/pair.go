package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	neturl "net/url"
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
	app := fs.Bool("app", false, "show the JSON payload QR for native apps, with an app code: the first device to use it keeps it as its long-lived token")
	if err := parseFlags(fs, args, env); err != nil {
		return 2
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(stderr, "tether pair:", err)
		return 2
	}
	url, fp, others, running, err := pairingTarget(&cfg)
	if err != nil {
		fmt.Fprintln(stderr, "tether pair:", err)
		return 1
	}
	st, err := openDataDir(ctx, cfg.DataDir, store.Open)
	if err != nil {
		fmt.Fprintln(stderr, "tether pair:", err)
		return 1
	}
	defer closeStore(st, stderr)
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
	show := printWebPairing
	if *app {
		show = printPairing
	}
	if err := show(stdout, p); err != nil {
		fmt.Fprintln(stderr, "tether pair:", err)
		return 1
	}
	printReach(stdout, url, others)
	if !running {
		fmt.Fprintln(stdout, "The daemon is not running: start it with `tether serve` before scanning.")
	}
	if *app {
		fmt.Fprintln(stdout, "This is an app code: the first device to use it keeps it as its own token until revoked.")
		if fp != "" {
			fmt.Fprintln(stdout, "Note: the certificate is self-signed. Apps that trust only the phone's certificate store "+
				"(such as ReCursor) ignore the fingerprint and cannot connect: serve the tailnet's certificate "+
				"(--tls tailscale) or one the phone trusts (--tls files --cert … --key …). `tether doctor` explains the setup.")
		}
	}
	return 0
}

// webPairURL is the address that opens the web client and pairs the
// browser: the daemon's https origin with the code in the fragment, which
// browsers never send to a server.
func webPairURL(p pairing.Payload) (string, error) {
	u, err := neturl.Parse(p.URL)
	if err != nil {
		return "", fmt.Errorf("the pairing URL %q: %w", p.URL, err)
	}
	scheme := "https"
	if u.Scheme == "ws" {
		scheme = "http"
	}
	return (&neturl.URL{Scheme: scheme, Host: u.Host, Path: "/", Fragment: "pair=" + string(p.Token)}).String(), nil
}

// printWebPairing shows the web client's pairing QR code: a phone's camera
// opens it in the browser, which pairs itself.
func printWebPairing(w io.Writer, p pairing.Payload) error {
	link, err := webPairURL(p)
	if err != nil {
		return err
	}
	qr, err := pairing.TerminalQR([]byte(link))
	if err != nil {
		return err
	}
	exp, _ := time.Parse(time.RFC3339, p.Exp)
	fmt.Fprintf(w, "Scan this QR code with your phone's camera to open tether in the browser and pair it:\n\n%s\n", qr)
	fmt.Fprintf(w, "  open:         %s\n", link)
	fmt.Fprintf(w, "  server:       %s\n", p.URL)
	if p.FP != "" {
		fmt.Fprintf(w, "  certificate:  %s (self-signed: the browser warns once; check this fingerprint)\n", p.FP)
	}
	fmt.Fprintf(w, "  code expires: %s (in %s); it works once. For a native app: tether pair --app\n\n", exp.Local().Format("15:04:05"), time.Until(exp).Round(time.Second))
	return nil
}

// pairingTarget is the URL and fingerprint a pairing payload names: what
// the daemon recorded when it last started, unless --url overrides the URL;
// with no daemon ever started, what `tether serve` with these flags would
// use (creating the self-signed certificate it would create). running
// tells whether that daemon is up now; others are the other URLs phones
// can use.
func pairingTarget(cfg *config) (url, fp string, others []string, running bool, err error) {
	info, err := readRuntimeInfo(cfg.DataDir)
	switch {
	case err == nil:
		url, fp, others = info.URL, info.Fingerprint, info.OtherURLs
		if cfg.URL != "" {
			url, others = cfg.URL, nil
		}
		return url, fp, others, processAlive(info.PID), nil
	case !errors.Is(err, os.ErrNotExist):
		return "", "", nil, false, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return "", "", nil, false, err
	}
	cert, err := loadCert(cfg, time.Now())
	if err != nil {
		return "", "", nil, false, err
	}
	url = advertisedURL(cfg, cfg.Listen)
	return url, fingerprint(cert), otherURLs(cfg, cfg.Listen, url), false, nil
}

// printReach says where else phones can reach the daemon, and says
// plainly when the URL in the QR code is one no phone can open.
func printReach(w io.Writer, url string, others []string) {
	for i, o := range others {
		label := "  also at:     "
		if i > 0 {
			label = "               "
		}
		fmt.Fprintf(w, "%s%s\n", label, webOrigin(o))
	}
	if u, err := neturl.Parse(url); err == nil && isLoopbackHost(u.Hostname()) {
		fmt.Fprintf(w, "Note: %s is this machine's loopback address: a phone cannot reach it. "+
			"Run `tether serve` without --listen to serve this machine's tailnet or LAN addresses "+
			"(or give --listen an address a phone can reach, or --url the address of a proxy such as `tailscale serve`); "+
			"`tether doctor` explains what is reachable.\n", u.Host)
	}
}

// webOrigin is the web client's address for a bridge URL.
func webOrigin(bridgeURL string) string {
	u, err := neturl.Parse(bridgeURL)
	if err != nil {
		return bridgeURL
	}
	scheme := "https"
	if u.Scheme == "ws" {
		scheme = "http"
	}
	return scheme + "://" + u.Host + "/"
}
