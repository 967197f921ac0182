package hooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ClientConfig says where RunHook finds the daemon.
type ClientConfig struct {
	// URL is the daemon's hook endpoint, https://HOST:PORT/hooks/event (or
	// http:// on loopback when the daemon runs without TLS).
	URL string
	// Token is the hook secret.
	Token string
	// Fingerprint pins the daemon's self-signed certificate ("sha256:HEX"
	// of its DER, as recorded in daemon.json). When empty the certificate
	// is verified against the system's roots for ServerName.
	Fingerprint string
	// ServerName is the name the certificate is verified for when there is
	// no Fingerprint; the URL's host when empty.
	ServerName string
	// Timeout bounds the whole exchange; DefaultClientTimeout when zero.
	Timeout time.Duration
}

// ErrDaemon is returned by RunHook when the daemon could not be reached or
// did not answer with a decision; Claude Code then carries on as if there
// were no hook.
var ErrDaemon = errors.New("hooks: no answer from the daemon")

// RunHook is the command hook: it reads Claude Code's hook JSON from stdin,
// posts it to the daemon and writes the daemon's decision JSON to stdout.
// Whatever fails, nothing but a complete answer is ever written, so the
// caller exits 0 in every case and Claude Code decides as if there were no
// hook; the error says what went wrong.
func RunHook(ctx context.Context, stdin io.Reader, stdout io.Writer, cfg ClientConfig) error {
	body, err := io.ReadAll(io.LimitReader(stdin, MaxBody+1))
	if err != nil {
		return fmt.Errorf("hooks: reading the hook input: %w", err)
	}
	if len(body) > MaxBody {
		return fmt.Errorf("hooks: the hook input is over %d bytes", MaxBody)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultClientTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("hooks: daemon URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	tr := &http.Transport{TLSClientConfig: cfg.tlsConfig(), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDaemon, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrDaemon, err)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%w: status %s: %s", ErrDaemon, resp.Status, bytes.TrimSpace(answer))
	case len(answer) > MaxBody || !json.Valid(answer):
		return fmt.Errorf("%w: the answer is not JSON", ErrDaemon)
	}
	if _, err := stdout.Write(answer); err != nil {
		return fmt.Errorf("hooks: writing the answer: %w", err)
	}
	return nil
}

func (c ClientConfig) tlsConfig() *tls.Config {
	if c.Fingerprint == "" {
		return &tls.Config{ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
	}
	want := strings.ToLower(strings.TrimPrefix(c.Fingerprint, "sha256:"))
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The pinned fingerprint replaces the chain and name checks, as it
		// does for phones.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("hooks: no server certificate")
			}
			sum := sha256.Sum256(raw[0])
			if hex.EncodeToString(sum[:]) != want {
				return errors.New("hooks: the server certificate is not the pinned one")
			}
			return nil
		},
	}
}
