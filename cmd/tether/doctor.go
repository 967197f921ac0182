package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/certs"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/tailnet"
)

// doctorCertTimeout bounds fetching the tailnet certificate, which
// tailscaled may have to request from its CA first.
const doctorCertTimeout = 30 * time.Second

// doctorCmd reports what `tether serve` with the same flags would do and
// why, and exits 1 when that setup is unsafe.
func doctorCmd(ctx context.Context, args, envList []string, stdout, stderr io.Writer) int {
	env := envMap(envList)
	var cfg config
	fs := newFlagSet("doctor", stderr, &cfg, env)
	addServerFlags(fs, &cfg)
	addDaemonFlags(fs, &cfg)
	if err := parseFlags(fs, args, env); err != nil {
		return 2
	}
	d := &doctor{w: stdout, env: env}
	d.run(ctx, &cfg)
	return d.exitCode()
}

// doctor collects findings as it prints them.
type doctor struct {
	w        io.Writer
	env      map[string]string // the environment serve would have
	warnings []string
	unsafe   []string
}

func (d *doctor) line(format string, a ...any) { fmt.Fprintf(d.w, "  "+format+"\n", a...) }

func (d *doctor) section(name string) { fmt.Fprintf(d.w, "\n%s\n", name) }

func (d *doctor) warn(format string, a ...any) {
	d.warnings = append(d.warnings, fmt.Sprintf(format, a...))
}

func (d *doctor) fail(format string, a ...any) {
	d.unsafe = append(d.unsafe, fmt.Sprintf(format, a...))
}

func (d *doctor) exitCode() int {
	if len(d.unsafe) > 0 {
		return 1
	}
	return 0
}

func (d *doctor) run(ctx context.Context, cfg *config) {
	fmt.Fprintf(d.w, "tether %s doctor: what `tether serve` with these settings would do\n", version)
	flagTLS, flagListen := cfg.TLS, cfg.Listen
	if err := cfg.validate(); err != nil {
		d.fail("the settings are invalid: %v", err)
		d.report()
		return
	}
	d.tailscale(cfg)
	d.listen(cfg, flagListen)
	d.tls(ctx, cfg, flagTLS)
	d.modes(cfg)
	d.sandbox(cfg)
	d.daemon(cfg)
	d.report()
}

func (d *doctor) tailscale(cfg *config) {
	d.section("Tailscale")
	n := &cfg.net
	if !n.asked {
		n.askTailscaled()
	}
	sock := cfg.TailscaleSocket
	if sock == "" {
		sock = tailnet.DefaultSocket()
	}
	d.line("LocalAPI socket: %s", sock)
	switch {
	case errors.Is(n.stateErr, tailnet.ErrNotRunning):
		d.line("tailscaled:      answering, but not connected (%s)", n.state.Backend)
		return
	case n.stateErr != nil:
		d.line("tailscaled:      not reachable (%v)", n.stateErr)
		return
	}
	st := n.state
	mode := "kernel TUN"
	if !st.TUN {
		mode = "userspace networking"
	}
	d.line("tailscaled:      running (%s)", mode)
	d.line("tailnet:         %s", orNone(st.Tailnet))
	d.line("MagicDNS name:   %s", orNone(st.DNSName))
	d.line("addresses:       %s", joinAddrs(st.Addrs))
	if name := st.CertName(); name != "" {
		d.line("HTTPS certificates: available for %s", name)
	} else {
		d.line("HTTPS certificates: not available (enable MagicDNS and HTTPS in the tailnet's DNS settings)")
	}
}

func (d *doctor) listen(cfg *config, flagListen string) {
	d.section("Listening")
	d.line("--listen %s", flagListen)
	if cfg.net.listenWhy != "" {
		d.line("auto chose: %s", cfg.net.listenWhy)
	}
	for _, b := range cfg.net.binds {
		host, _, _ := net.SplitHostPort(b)
		d.line("binds %s (%s)", b, describeBind(host, &cfg.net.state))
	}
	url := advertisedURL(cfg, cfg.net.binds[0])
	d.line("phones use: %s", url)
	for _, o := range otherURLs(cfg, cfg.net.binds[0], url) {
		d.line("   also at: %s", o)
	}
	d.reach(cfg)
	for _, b := range cfg.net.binds {
		host, _, _ := net.SplitHostPort(b)
		if host == "" {
			host = "::"
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			continue
		}
		switch {
		case a.IsUnspecified():
			d.line("listening on every address: every network this machine joins (a café's Wi-Fi too) reaches the port; " +
				"a connection still needs a device token or a one-time pairing code (256-bit secrets, failed attempts rate-limited) over TLS, " +
				"and public addresses need the phone's acknowledgment. --listen tailnet or 127.0.0.1:7420 narrows it")
			for _, pub := range publicAddrs() {
				if cfg.allows(pairing.ModeDirectPublic) {
					d.warn("public address %s is reachable: direct_public connections are served after the phone acknowledges the risk; --allow-modes without direct_public refuses them", pub)
				} else {
					d.line("public address %s is reachable (direct_public connections are refused by --allow-modes)", pub)
				}
			}
		case !a.IsLoopback() && !a.IsPrivate() && !a.IsLinkLocalUnicast() && !slices.Contains(cfg.net.state.Addrs, a.Unmap()):
			if cfg.allows(pairing.ModeDirectPublic) {
				d.fail("listening on public address %s with direct_public connections allowed", a)
			} else {
				d.warn("listening on public address %s (direct_public connections are refused by --allow-modes)", a)
			}
		}
	}
}

// reach says whether a phone on the LAN and one on the tailnet can
// connect, and why not.
func (d *doctor) reach(cfg *config) {
	all, lan, tail, onlyLoopback := false, false, false, true
	for _, b := range cfg.net.binds {
		host, _, _ := net.SplitHostPort(b)
		a, err := netip.ParseAddr(host)
		switch {
		case host == "" || err == nil && a.IsUnspecified():
			all, onlyLoopback = true, false
		case err != nil:
			onlyLoopback = false
		case slices.Contains(cfg.net.state.Addrs, a.Unmap()):
			tail, onlyLoopback = true, false
		case a.IsPrivate() || a.IsLinkLocalUnicast():
			lan, onlyLoopback = true, false
		case !a.IsLoopback():
			onlyLoopback = false
		}
	}
	running := cfg.net.stateErr == nil && len(cfg.net.state.Addrs) > 0
	switch {
	case onlyLoopback:
		d.warn("a phone can connect: no; the daemon listens on loopback only (this machine). Drop --listen (auto) to serve the tailnet or the LAN")
		return
	case !cfg.allows(pairing.ModePrivateNetwork):
		d.line("a phone on the LAN can connect: no (--allow-modes refuses private_network)")
	case all || lan:
		d.line("a phone on the LAN can connect: yes (private_network), after it accepts the certificate")
	default:
		d.line("a phone on the LAN can connect: no (the daemon listens on no LAN address)")
	}
	switch {
	case !running:
		d.line("a phone on the tailnet can connect: no (no tailnet here)")
	case !cfg.allows(pairing.ModeSecureRemote):
		d.line("a phone on the tailnet can connect: no (--allow-modes refuses secure_remote)")
	case all || tail:
		d.line("a phone on the tailnet can connect: yes (secure_remote)")
	default:
		d.line("a phone on the tailnet can connect: no (the daemon listens on no tailnet address; --listen tailnet or auto)")
	}
}

func describeBind(host string, st *tailnet.State) string {
	a, err := netip.ParseAddr(host)
	switch {
	case host == "" || err == nil && a.IsUnspecified():
		return "all interfaces"
	case err != nil:
		return "a host name"
	case a.IsLoopback():
		return "loopback: this machine only"
	case slices.Contains(st.Addrs, a.Unmap()):
		return "tailnet"
	case a.IsPrivate() || a.IsLinkLocalUnicast():
		return "private network"
	default:
		return "public address"
	}
}

// publicAddrs are this machine's global unicast addresses outside private
// ranges and the tailnet's CGNAT range.
func publicAddrs() []string {
	var out []string
	for _, a := range machineAddrs() {
		if !a.IsPrivate() && !netip.MustParsePrefix("100.64.0.0/10").Contains(a) {
			out = append(out, a.String())
		}
	}
	return out
}

func (d *doctor) tls(ctx context.Context, cfg *config, flagTLS string) {
	d.section("TLS")
	source := cfg.TLS
	if flagTLS == tlsAuto {
		source += " (--tls auto: " + cfg.net.tlsWhy + ")"
	}
	d.line("source: %s", source)
	var leaf *x509.Certificate
	switch cfg.TLS {
	case tlsOff:
		d.line("no TLS: plain ws, accepted only from loopback (and from trusted proxies that report https)")
		if len(cfg.net.proxies) == 0 {
			d.warn("--tls off without --trusted-proxy: only this machine can connect")
		}
		return
	case tlsTailscale:
		cctx, cancel := context.WithTimeout(ctx, doctorCertTimeout)
		defer cancel()
		c, err := cfg.net.ts.Certificate(cctx, cfg.net.state.CertName())
		if err != nil {
			d.fail("the tailnet certificate cannot be fetched: %v", err)
			return
		}
		leaf = c.Leaf
	case tlsFiles:
		c, err := certs.LoadFiles(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			d.fail("the certificate files cannot be loaded: %v", err)
			return
		}
		leaf = c.Leaf
	case tlsSelfSigned:
		dir := filepath.Join(cfg.DataDir, tlsDir)
		c, err := certs.LoadFiles(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
		switch {
		case errors.Is(err, os.ErrNotExist):
			d.line("certificate: none yet; `tether serve` creates one in %s", dir)
		case err != nil:
			d.fail("the self-signed certificate in %s cannot be loaded: %v", dir, err)
			return
		default:
			leaf = c.Leaf
			d.line("fingerprint: %s (phones pin it from the pairing QR code)", pairing.Fingerprint(c.Leaf.Raw))
		}
		d.warn("the certificate is self-signed: apps that trust only the platform's certificate store (ReCursor) cannot connect, and iPhones refuse wss to it; use the tailnet's certificate (--tls tailscale, with HTTPS enabled in the tailnet), --tls local-ca, or a CA-issued one (--tls files --cert --key)")
	case tlsLocalCA:
		dir := filepath.Join(cfg.DataDir, localCADir)
		c, err := certs.LoadFiles(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
		switch {
		case errors.Is(err, os.ErrNotExist):
			d.line("local CA: none yet; `tether serve` creates it in %s", dir)
		case err != nil:
			d.fail("the local CA in %s cannot be loaded: %v", dir, err)
			return
		default:
			d.line("local CA: %s, fingerprint SHA-256 %s, valid until %s", c.Leaf.Subject.CommonName, certs.Fingerprint(c.Leaf), c.Leaf.NotAfter.UTC().Format(time.DateOnly))
		}
		d.line("each phone installs the CA once from https://ADDRESS:PORT/ca (iOS: the profile, then Certificate Trust Settings; Android: CA certificate); it can vouch only for this machine's names and private addresses")
	}
	if leaf == nil {
		return
	}
	left := time.Until(leaf.NotAfter)
	d.line("certificate: %s, valid until %s (%d days)", leafName(leaf), leaf.NotAfter.UTC().Format(time.RFC3339), int(left.Hours()/24))
	switch {
	case left <= 0:
		d.fail("the certificate expired on %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case left < bridge.CertExpiryWarning:
		d.warn("the certificate expires within %s", bridge.CertExpiryWarning)
	}
}

func leafName(c *x509.Certificate) string {
	if len(c.DNSNames) > 0 {
		return strings.Join(c.DNSNames, ", ")
	}
	return c.Subject.CommonName
}

func (d *doctor) modes(cfg *config) {
	d.section("Connection modes")
	allowed := pairing.Modes
	if cfg.net.allowed != nil {
		allowed = cfg.net.allowed
	}
	d.line("allowed: %s", strings.Join(allowed, ", "))
	if len(cfg.net.proxies) == 0 {
		d.line("trusted proxies: none (forwarding headers are ignored)")
	}
	for _, p := range cfg.net.proxies {
		d.line("trusted proxy: %s", p)
		if !p.Addr().IsLoopback() && !p.Addr().IsPrivate() {
			d.fail("--trusted-proxy %s is not a loopback or private range: anyone in it can claim any client address", p)
		}
	}
	if !cfg.allows(pairing.ModeSecureRemote) && cfg.net.stateErr == nil {
		d.warn("secure_remote is not allowed although tailscaled is running")
	}
}

// allows reports whether cfg accepts mode.
func (c *config) allows(mode string) bool {
	return c.net.allowed == nil || slices.Contains(c.net.allowed, mode)
}

func (d *doctor) sandbox(cfg *config) {
	d.section("Sandbox")
	caps := sandbox.Probe()
	layer := func(name string, l sandbox.Layer) {
		state := "available"
		if !l.Available {
			state = "missing"
			d.warn("sandbox layer %s is missing: %s", name, l.Detail)
		}
		d.line("%s: %s (%s)", name, state, l.Detail)
	}
	layer("bubblewrap", caps.Bwrap)
	netns := sandbox.Layer{Available: caps.Bwrap.Available, Detail: "each sandbox has its own network: nothing on this machine's loopback or network is reachable from it; claude-code reaches only " + strings.Join(claudeEgress(d.env, cfg.AllowHosts), ", ") + " and codex only " + strings.Join(codexEgress(d.env, cfg.AllowHosts), ", ") + " through tether's proxy"}
	if !caps.Bwrap.Available {
		netns.Detail = "without bubblewrap, agents share this machine's network, its loopback services included"
	}
	layer("network namespace", netns)
	layer("seccomp", caps.Seccomp)
	layer("cgroups", caps.Cgroup)
	if caps.Cgroup.Available {
		d.line("cgroup version: %d", caps.CgroupVersion)
	}
}

func (d *doctor) daemon(cfg *config) {
	d.section("Daemon")
	info, err := readRuntimeInfo(cfg.DataDir)
	if err != nil || !processAlive(info.PID) {
		d.line("not running (data directory %s)", cfg.DataDir)
		return
	}
	d.line("running: pid %d, version %s, serving %s since %s", info.PID, info.Version, info.URL, info.StartedAt.Local().Format(time.RFC3339))
}

func (d *doctor) report() {
	d.section("Verdict")
	for _, w := range d.warnings {
		d.line("warning: %s", w)
	}
	for _, u := range d.unsafe {
		d.line("UNSAFE: %s", u)
	}
	if len(d.unsafe) > 0 {
		d.line("this setup is unsafe: fix the lines marked UNSAFE")
		return
	}
	d.line("ok")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func joinAddrs(as []netip.Addr) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return orNone(strings.Join(out, ", "))
}
