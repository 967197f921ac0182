// Package certs provides the TLS certificate the daemon serves: a
// self-signed one that it creates on first start and keeps in the data
// directory (renewed when near its end), or a certificate and key from files
// the user names.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Lifetime of a self-signed certificate, and how close to its end it is
// replaced by a new one at start.
const (
	SelfSignedLifetime = 397 * 24 * time.Hour
	RenewBefore        = 30 * 24 * time.Hour
)

// Cert is a loaded certificate.
type Cert struct {
	TLS  tls.Certificate
	Leaf *x509.Certificate
	// SelfSigned is true for the daemon's own certificate, which phones
	// pin by fingerprint.
	SelfSigned bool
}

// LoadFiles loads a PEM certificate chain and key.
func LoadFiles(certFile, keyFile string) (*Cert, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	return &Cert{TLS: c, Leaf: c.Leaf}, nil
}

// SelfSigned loads the self-signed certificate kept in dir (cert.pem and
// key.pem), creating it for hosts, or replacing it when it ends within
// RenewBefore. It is not replaced when the machine's addresses change:
// paired phones pin its fingerprint. The key file is written 0600.
func SelfSigned(dir string, hosts []string, now time.Time) (*Cert, error) {
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if c, err := LoadFiles(certFile, keyFile); err == nil {
		if c.Leaf.NotAfter.Sub(now) > RenewBefore {
			c.SelfSigned = true
			return c, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	certPEM, keyPEM, err := generate(hosts, now)
	if err != nil {
		return nil, err
	}
	if err := writeFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(certFile, certPEM, 0o644); err != nil {
		return nil, err
	}
	c, err := LoadFiles(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c.SelfSigned = true
	return c, nil
}

func generate(hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key: %w", err)
	}
	tmpl, err := template(hosts, now, now.Add(SelfSignedLifetime))
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: create: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// template is the template of a serving certificate for hosts.
func template(hosts []string, now, notAfter time.Time) (*x509.Certificate, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tether on " + hostname, Organization: []string{"tether"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return tmpl, nil
}

// writeFile replaces path atomically with data at mode perm.
func writeFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("certs: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("certs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// DefaultHosts are the names a self-signed certificate covers: localhost,
// the loopback addresses, this machine's hostname and the unicast
// addresses of its interfaces.
func DefaultHosts() []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			hosts = append(hosts, n.IP.String())
		}
	}
	return hosts
}
