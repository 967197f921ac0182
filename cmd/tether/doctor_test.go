package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestDoctor(t *testing.T) {
	ts := newFakeTailscaled(t, []string{"100.64.0.1", "fd7a:115c:a1e0::1"}, nil)
	none := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		name    string
		args    []string
		code    int
		want    []string
		notWant []string
	}{
		{"defaults without tailscaled", []string{"--tailscale-socket", none}, 0,
			[]string{"tailscaled:      not reachable", "auto chose: no tailnet (tailscaled is not reachable): every address of this machine",
				"binds :7420 (all interfaces)", "listening on every address", "a phone on the LAN can connect: yes", "a phone on the tailnet can connect: no (no tailnet here)",
				"source: self-signed (--tls auto: tailscaled is not reachable)",
				"ReCursor", "allowed: local_only, secure_remote, private_network, direct_public", "bubblewrap:", "seccomp:", "cgroups:", "\n  ok\n"},
			[]string{"UNSAFE"}},
		{"tailnet certificate", []string{"--tailscale-socket", ts.socket, "--tls", "tailscale"}, 0,
			[]string{"tailscaled:      running (kernel TUN)", "tailnet:         alice@example.com", "MagicDNS name:   " + magicName,
				"HTTPS certificates: available for " + magicName, "source: tailscale", "certificate: " + magicName + ", valid until", "phones use: wss://" + magicName + ":7420/ws"},
			[]string{"ReCursor", "UNSAFE"}},
		{"defaults with a tailnet", []string{"--tailscale-socket", ts.socket}, 0,
			[]string{"auto chose: tailscaled is connected: the tailnet addresses and loopback", "binds 100.64.0.1:7420 (tailnet)", "binds 127.0.0.1:7420 (loopback",
				"phones use: wss://" + magicName + ":7420/ws", "a phone on the tailnet can connect: yes", "a phone on the LAN can connect: no (the daemon listens on no LAN address)"},
			[]string{"UNSAFE", "listening on every address"}},
		{"listen tailnet", []string{"--tailscale-socket", ts.socket, "--listen", "tailnet"}, 0,
			[]string{"binds 100.64.0.1:7420 (tailnet)", "binds [fd7a:115c:a1e0::1]:7420 (tailnet)", "binds 127.0.0.1:7420 (loopback", "source: tailscale (--tls auto: tailscaled offers a certificate for " + magicName + ")"},
			[]string{"UNSAFE"}},
		{"auto on loopback stays self-signed", []string{"--tailscale-socket", ts.socket, "--listen", "127.0.0.1:7420"}, 0,
			[]string{"source: self-signed (--tls auto: --listen 127.0.0.1:7420 is not reachable from the tailnet)", "binds 127.0.0.1:7420 (loopback: this machine only)",
				"warning: a phone can connect: no; the daemon listens on loopback only"}, nil},
		{"listen tailnet without tailscaled", []string{"--tailscale-socket", none, "--listen", "tailnet"}, 1,
			[]string{"UNSAFE: the settings are invalid: --listen tailnet:"}, nil},
		{"tls tailscale without tailscaled", []string{"--tailscale-socket", none, "--tls", "tailscale"}, 1,
			[]string{"UNSAFE: the settings are invalid: --tls tailscale:"}, nil},
		{"public listen address", []string{"--tailscale-socket", none, "--listen", "203.0.113.9:7420"}, 1,
			[]string{"binds 203.0.113.9:7420 (public address)", "UNSAFE: listening on public address 203.0.113.9", "this setup is unsafe"}, nil},
		{"public listen address, direct_public refused", []string{"--tailscale-socket", none, "--listen", "203.0.113.9:7420", "--allow-modes", "local_only,secure_remote"}, 0,
			[]string{"warning: listening on public address 203.0.113.9", "allowed: local_only, secure_remote"}, []string{"UNSAFE"}},
		{"all interfaces", []string{"--tailscale-socket", none, "--listen", "0.0.0.0:7420", "--allow-modes", "local_only,private_network"}, 0,
			[]string{"binds 0.0.0.0:7420 (all interfaces)", "listening on every address", "a phone on the tailnet can connect: no"}, []string{"UNSAFE"}},
		{"local CA", []string{"--tailscale-socket", none, "--tls", "local-ca"}, 0,
			[]string{"source: local-ca", "local CA: none yet", "each phone installs the CA once"}, []string{"UNSAFE"}},
		{"trusted proxy everywhere", []string{"--tailscale-socket", none, "--trusted-proxy", "0.0.0.0/0"}, 1,
			[]string{"UNSAFE: --trusted-proxy 0.0.0.0/0 is not a loopback or private range"}, nil},
		{"loopback proxy without TLS", []string{"--tailscale-socket", none, "--listen", "127.0.0.1:7420", "--tls", "off", "--trusted-proxy", "127.0.0.1,::1"}, 0,
			[]string{"source: off", "trusted proxy: 127.0.0.1/32", "trusted proxy: ::1/128"}, []string{"UNSAFE", "ReCursor"}},
		{"unknown mode", []string{"--tailscale-socket", none, "--allow-modes", "local_only,lan"}, 1,
			[]string{`--allow-modes: "lan" is not one of`}, nil},
		{"bad proxy", []string{"--tailscale-socket", none, "--trusted-proxy", "10.0.0.0/99"}, 1,
			[]string{`--trusted-proxy "10.0.0.0/99"`}, nil},
		{"serve's command line", []string{"--tailscale-socket", none, "--root", "/srv", "--sandbox-memory-mb", "512", "--hooks-from", "10.0.0.0/8",
			"--allow-origin", "https://tether.example", "--log-max-age", "24h"}, 0,
			[]string{"\n  ok\n"}, []string{"UNSAFE"}},
		{"tls off on all interfaces", []string{"--tailscale-socket", none, "--tls", "off", "--listen", "0.0.0.0:7420"}, 1,
			[]string{"--tls off is allowed only when listening on loopback"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{"TETHER_DATA=" + filepath.Join(t.TempDir(), "data"), "HOME=" + t.TempDir()}
			code, out, errOut := runCmd(t, env, append([]string{"doctor"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestDoctorSeesTheCertificate checks that doctor reports the self-signed
// certificate a daemon created, with the fingerprint phones pin, and the
// running daemon.
func TestDoctorSeesTheCertificate(t *testing.T) {
	root := t.TempDir()
	env := []string{"TETHER_DATA=" + filepath.Join(root, "data"), "HOME=" + root, "TETHER_ROOT=" + root, "TETHER_TAILSCALE_SOCKET=" + filepath.Join(root, "none.sock")}
	info, _, _ := startDaemon(t, env)
	code, out, _ := runCmd(t, env, "doctor")
	if code != 0 || !strings.Contains(out, "fingerprint: "+info.Fingerprint) || !strings.Contains(out, "(397 days)") && !strings.Contains(out, "(396 days)") ||
		!strings.Contains(out, "running: pid") || !strings.Contains(out, info.URL) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
