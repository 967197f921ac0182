package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeReference returns the path of bench/node-reference/server.mjs,
// skipping the test when node or the reference's dependencies (installed
// by scripts/install-deps) are missing.
func nodeReference(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed; scripts/install-deps installs it")
	}
	dir, err := filepath.Abs("../../bench/node-reference")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ws", "package.json")); err != nil {
		t.Skip("bench/node-reference has no node_modules; scripts/install-deps runs npm ci there")
	}
	return filepath.Join(dir, "server.mjs")
}

// selfSigned writes a self-signed P-256 certificate for 127.0.0.1 and its
// key into dir and returns their paths and the certificate's fingerprint.
func selfSigned(t *testing.T, dir string) (certFile, keyFile, fp string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, fmt.Sprintf("sha256:%x", sha256.Sum256(der))
}

// freePort returns a loopback TCP port that nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestNodeReference runs every mode against the Node reference bridge,
// over wss and plain ws, started afresh for each run by -start; and checks
// that it refuses a wrong token.
func TestNodeReference(t *testing.T) {
	server := nodeReference(t)
	certFile, keyFile, fp := selfSigned(t, t.TempDir())
	t.Setenv("REF_TOKEN", testToken)
	wssPort, wsPort := freePort(t), freePort(t)
	start := fmt.Sprintf("node %s --port %d --cert %s --key %s", server, wssPort, certFile, keyFile)
	// This one writes to stderr before it starts, which the load tool
	// passes on to its own stderr while it writes progress there.
	startPlain := fmt.Sprintf("sh -c 'echo node-ws starting >&2; exec node %s --port %d --plain'", server, wsPort)

	out := runJSON(t,
		"-target", fmt.Sprintf("node=wss://127.0.0.1:%d/ws,env:REF_TOKEN,,%s", wssPort, fp), "-start", "node="+start,
		"-target", fmt.Sprintf("node-ws=ws://127.0.0.1:%d/ws,env:REF_TOKEN", wsPort), "-start", "node-ws="+startPlain,
		"-mode", "idle,handshake,heartbeat", "-n", "50", "-c", "1,4", "-d", "300ms",
		"-runs", "1", "-settle", "100ms", "-warmup", "100ms")
	for _, name := range []string{"node", "node-ws"} {
		for _, key := range []string{"handshake c=1", "handshake c=4", "heartbeat c=1", "heartbeat c=4"} {
			if rate := out[name+" "+key+" rate"]; rate.Median <= 0 {
				t.Errorf("%s %s rate = %+v", name, key, rate)
			}
			if e := out[name+" "+key+" errors"]; e.Median != 0 {
				t.Errorf("%s %s errors = %+v", name, key, e)
			}
			if cpu := out[name+" "+key+" server_cpu"]; len(cpu.Runs) != 1 {
				t.Errorf("%s %s server_cpu = %+v", name, key, cpu)
			}
		}
		// Node holds at least a socket and its buffers per connection.
		if rss := out[name+" idle n=50 rss_after"]; rss.Median <= 0 {
			t.Errorf("%s idle rss_after = %+v", name, rss)
		}
	}

	var stdout, stderr strings.Builder
	code := run(t.Context(), []string{
		"-target", fmt.Sprintf("node=wss://127.0.0.1:%d/ws,wrong-token,,%s", wssPort, fp), "-start", "node=" + start,
		"-mode", "handshake", "-c", "1", "-d", "100ms", "-runs", "1", "-warmup", "0", "-timeout", "3s",
	}, os.Getenv, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "AUTH_FAILED") {
		t.Errorf("wrong token: exit %d, stderr %q", code, stderr.String())
	}
}
