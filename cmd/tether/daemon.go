package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/tetherdev/tether/certs"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
)

// Files in the data directory.
const (
	dbFile      = "tether.db"
	tlsDir      = "tls"
	localCADir  = "local-ca"
	runtimeFile = "daemon.json"
)

// runtimeInfo is what a running daemon records in the data directory so
// that `tether pair` can build a pairing payload without asking it.
type runtimeInfo struct {
	URL         string `json:"url"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Listen      string `json:"listen"`
	// PairPage is the address of the pairing page, with the key it needs.
	PairPage string `json:"pair_page,omitempty"`
	// OtherURLs are the other URLs phones can use (other addresses).
	OtherURLs []string  `json:"other_urls,omitempty"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
}

// closeStore closes a command's store on its way out, saying so if that
// fails (its transactions are committed by then; a failed close can still
// mean a checkpoint that did not happen).
func closeStore(st *store.Store, stderr io.Writer) {
	if err := st.Close(); err != nil {
		fmt.Fprintln(stderr, "tether: closing the database:", err)
	}
}

// openDataDir creates the data directory 0700 (tightening an existing one)
// and opens the database in it with open (store.Open, or store.OpenChecked
// for the daemon).
func openDataDir(ctx context.Context, dir string, open func(context.Context, string) (*store.Store, error)) (*store.Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	return open(ctx, filepath.Join(dir, dbFile))
}

// loadCert returns the certificate for cfg.TLS: nil for off, and for
// tailscale, whose certificate tailscaled keeps (see serverTLS).
func loadCert(cfg *config, now time.Time) (*certs.Cert, error) {
	switch cfg.TLS {
	case tlsFiles:
		return certs.LoadFiles(cfg.CertFile, cfg.KeyFile)
	case tlsSelfSigned:
		return certs.SelfSigned(filepath.Join(cfg.DataDir, tlsDir), certs.DefaultHosts(), now)
	case tlsLocalCA:
		ca, err := localCA(cfg, now)
		if err != nil {
			return nil, err
		}
		return ca.Serving, nil
	default:
		return nil, nil
	}
}

// localCA loads (making it on first use) the local certificate authority
// of --tls local-ca and the serving certificate it issued.
func localCA(cfg *config, now time.Time) (*certs.LocalCA, error) {
	return certs.LoadLocalCA(filepath.Join(cfg.DataDir, localCADir), certs.DefaultHosts(), now)
}

func fingerprint(c *certs.Cert) string {
	if c == nil || !c.SelfSigned {
		return ""
	}
	return pairing.Fingerprint(c.Leaf.Raw)
}

// advertisedURL is the URL phones use: --url, else the MagicDNS name
// with the tailnet's certificate, else the listen address (an unspecified
// host replaced by this machine's primary address; tailnet by its first
// tailnet address).
func advertisedURL(cfg *config, listenAddr string) string {
	if cfg.URL != "" {
		return cfg.URL
	}
	host, port, _ := net.SplitHostPort(listenAddr)
	switch a, err := netip.ParseAddr(host); {
	case cfg.TLS == tlsTailscale && cfg.net.state.CertName() != "":
		host = cfg.net.state.CertName()
	case host == listenTailnet && len(cfg.net.binds) > 0:
		host, _, _ = net.SplitHostPort(cfg.net.binds[0])
	case host == "" || err == nil && a.IsUnspecified():
		host = primaryAddr()
	}
	scheme := "wss"
	if cfg.TLS == tlsOff {
		scheme = "ws"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/ws"
}

// primaryAddr picks the address other machines most likely reach this one
// at: the address of the interface that holds the default route, else the
// first private IPv4 address, else any global unicast address, else
// loopback.
func primaryAddr() string {
	if a, ok := routeAddr(); ok {
		return a.String()
	}
	addrs := machineAddrs()
	for _, a := range addrs {
		if a.Is4() && a.IsPrivate() {
			return a.String()
		}
	}
	if len(addrs) > 0 {
		return addrs[0].String()
	}
	return "127.0.0.1"
}

// routeAddr is the source address of this machine's IPv4 default route:
// connecting a UDP socket picks the route and sends nothing.
func routeAddr() (netip.Addr, bool) {
	c, err := net.Dial("udp4", "192.0.2.1:9") // TEST-NET-1, never answered
	if err != nil {
		return netip.Addr{}, false
	}
	defer c.Close()
	a := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	return a, a.IsValid() && !a.IsLoopback() && !a.IsUnspecified()
}

// machineAddrs are this machine's global unicast addresses (LAN, tailnet,
// public), in the order of its interfaces.
func machineAddrs() []netip.Addr {
	ifAddrs, _ := net.InterfaceAddrs()
	var out []netip.Addr
	for _, ia := range ifAddrs {
		n, ok := ia.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if a, ok := netip.AddrFromSlice(n.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// otherURLs are the URLs besides advertised that phones can use: every
// address the daemon listens on, or every address of the machine when it
// listens on all of them; never loopback.
func otherURLs(cfg *config, listenAddr, advertised string) []string {
	if cfg.URL != "" {
		return nil
	}
	_, port, _ := net.SplitHostPort(listenAddr)
	var hosts []netip.Addr
	for _, b := range cfg.net.binds {
		host, _, _ := net.SplitHostPort(b)
		a, err := netip.ParseAddr(host)
		switch {
		case host == "" || err == nil && a.IsUnspecified():
			hosts = append(hosts, machineAddrs()...)
		case err == nil && !a.IsLoopback():
			hosts = append(hosts, a.Unmap())
		}
	}
	scheme := "wss"
	if cfg.TLS == tlsOff {
		scheme = "ws"
	}
	var out []string
	for _, a := range hosts {
		u := scheme + "://" + net.JoinHostPort(a.String(), port) + "/ws"
		if u != advertised && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

func writeRuntimeInfo(dir string, info runtimeInfo) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, runtimeFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, runtimeFile))
}

func readRuntimeInfo(dir string) (runtimeInfo, error) {
	var info runtimeInfo
	b, err := os.ReadFile(filepath.Join(dir, runtimeFile))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("%s: %w", runtimeFile, err)
	}
	return info, nil
}

// printPairing shows a pairing payload as a terminal QR code with the
// facts a user needs beside it.
func printPairing(w io.Writer, p pairing.Payload) error {
	qr, err := pairing.TerminalQR(p.JSON())
	if err != nil {
		return err
	}
	exp, _ := time.Parse(time.RFC3339, p.Exp)
	fmt.Fprintf(w, "Scan this QR code with the app to pair a device:\n\n%s\n", qr)
	fmt.Fprintf(w, "  server:       %s\n", p.URL)
	if p.FP != "" {
		fmt.Fprintf(w, "  certificate:  %s\n", p.FP)
	}
	fmt.Fprintf(w, "  code expires: %s (in %s); it works once\n\n", exp.Local().Format("15:04:05"), time.Until(exp).Round(time.Second))
	return nil
}

// processAlive reports whether pid names a running process.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return !errors.Is(err, os.ErrNotExist)
}
