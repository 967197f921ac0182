package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/tailnet"
)

// config is everything the daemon and its commands are configured with.
type config struct {
	DataDir  string
	Listen   string // host:port, or tailnet[:port]
	TLS      string // auto, tailscale, self-signed, files or off
	CertFile string
	KeyFile  string
	URL      string // advertised URL; derived from Listen when empty
	TTL      time.Duration
	Origins  []string
	LogLevel slog.Level

	// Connection modes.
	TailscaleSocket string
	TrustedProxies  []string
	HooksFrom       []string
	AllowModes      []string

	// Derived by validate.
	net netSetup

	// Sessions.
	Roots           []string
	MemoryMB        int64
	Pids            int64
	CPUs            float64
	ApprovalTimeout time.Duration
	// AllowBypassPermissions lets a phone choose the bypassPermissions
	// mode.
	AllowBypassPermissions bool
	ClaudeBin              string
	CodexBin               string
	LogMaxEvents           int64
	LogMaxBytes            int64
	Notify                 []string // ntfy topic URLs
	AllowHosts             []string // --sandbox-allow-host
	MaxSessions            int
	IdleTimeout            time.Duration
	NotifyTokenFile        string
	PushDetail             string
	PushContact            string
	WebPush                bool
	LogMaxAge              time.Duration
	PrintPairing           bool
	// KeepRunningTurns leaves running turns' sandboxes to the next daemon
	// on a stop.
	KeepRunningTurns bool
}

// TLS modes.
const (
	tlsAuto       = "auto"
	tlsTailscale  = "tailscale"
	tlsSelfSigned = "self-signed"
	tlsFiles      = "files"
	tlsLocalCA    = "local-ca"
	tlsOff        = "off"
)

// DefaultPort is the daemon's port when --listen does not name one.
const DefaultPort = 7420

// defaultDataDir is $XDG_DATA_HOME/tether, else ~/.local/share/tether.
func defaultDataDir(env map[string]string) string {
	if x := env["XDG_DATA_HOME"]; x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "tether")
	}
	home := env["HOME"]
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "share", "tether")
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// stringList is a flag that may be repeated or given as a comma list.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// newFlagSet makes a flag set for a command with the flags every command
// shares (the data directory and logging).
func newFlagSet(name string, stderr io.Writer, cfg *config, env map[string]string) *flag.FlagSet {
	fs := flag.NewFlagSet("tether "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.DataDir, "data", defaultDataDir(env), "data directory (database, certificate, keys)")
	fs.TextVar(&cfg.LogLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	return fs
}

// addServerFlags adds the flags that say where and how the daemon serves.
func addServerFlags(fs *flag.FlagSet, cfg *config) {
	fs.StringVar(&cfg.Listen, "listen", listenAuto, "address to listen on: host:port; tailnet[:port] for the tailnet addresses tailscaled reports plus loopback; auto[:port] for those with a tailnet, else every address of this machine (its LAN); 127.0.0.1:7420 for this machine only")
	fs.StringVar(&cfg.TLS, "tls", tlsAuto, "TLS: auto (tailscale when tailscaled offers certificates, else self-signed), tailscale, self-signed, local-ca (a certificate authority of this machine's own, which phones install once: for a LAN without a tailnet), files (with --cert and --key) or off (loopback only)")
	fs.StringVar(&cfg.TailscaleSocket, "tailscale-socket", "", "tailscaled's LocalAPI socket (default "+tailnet.DefaultSocket()+")")
	fs.Var((*stringList)(&cfg.TrustedProxies), "trusted-proxy", "proxy address or CIDR whose X-Forwarded-For/-Proto/-Host are believed (repeatable or comma list)")
	fs.Var((*stringList)(&cfg.AllowModes), "allow-modes", "connection modes accepted (comma list of "+strings.Join(pairing.Modes, ", ")+"; default all)")
	fs.StringVar(&cfg.CertFile, "cert", "", "certificate chain file (PEM) for --tls files")
	fs.StringVar(&cfg.KeyFile, "key", "", "private key file (PEM) for --tls files")
	fs.StringVar(&cfg.URL, "url", "", "the wss URL phones use, if not derived from --listen (e.g. behind a proxy)")
	fs.DurationVar(&cfg.TTL, "ttl", pairing.DefaultTTL, "lifetime of a pairing code")
}

// parseFlags parses args, then fills every flag not given on the command
// line from its environment variable (TETHER_ + NAME with - as _).
func parseFlags(fs *flag.FlagSet, args []string, env map[string]string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		name := envName(f.Name)
		if v, ok := env[name]; ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(fs.Output(), err)
		return err
	}
	return nil
}

func envName(flagName string) string {
	return "TETHER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// validate checks the server settings and fills derived ones.
func (c *config) validate() error {
	switch c.TLS {
	case tlsAuto, tlsTailscale, tlsSelfSigned, tlsLocalCA, tlsOff:
	case tlsFiles:
		if c.CertFile == "" || c.KeyFile == "" {
			return errors.New("--tls files needs --cert and --key")
		}
	default:
		return fmt.Errorf("--tls must be auto, tailscale, self-signed, local-ca, files or off, not %q", c.TLS)
	}
	for _, h := range c.AllowHosts {
		host, port, err := net.SplitHostPort(h)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--sandbox-allow-host %q: want host:port, e.g. registry.npmjs.org:443", h)
		}
	}
	if c.Listen == listenTailnet || c.Listen == listenAuto {
		c.Listen += ":" + strconv.Itoa(DefaultPort)
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", c.Listen, err)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return fmt.Errorf("--listen %q: port must be a number", c.Listen)
	}
	if c.TLS == tlsOff && !isLoopbackHost(host) {
		return fmt.Errorf("--tls off is allowed only when listening on loopback, not on %q: phones must use wss", host)
	}
	if err := c.resolveNet(); err != nil {
		return err
	}
	if c.TTL <= 0 {
		return errors.New("--ttl must be positive")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || u.Host == "" {
			return fmt.Errorf("--url %q must be a ws:// or wss:// URL with a host", c.URL)
		}
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func (c *config) logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: c.LogLevel}))
}
