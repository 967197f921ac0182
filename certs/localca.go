package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CALifetime is how long the local certificate authority is valid: phones
// install it once.
const CALifetime = 10 * 365 * 24 * time.Hour

// caRanges are the address ranges the local CA may certify besides the
// machine's own public addresses: loopback, private networks (RFC 1918,
// IPv6 ULA), link-local, and the tailnet's CGNAT range. A DHCP lease that
// changes the machine's LAN address stays inside them, so the phone keeps
// trusting the CA; a leaked CA key cannot vouch for a public site.
var caRanges = []string{
	"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
	"169.254.0.0/16", "fc00::/7", "fe80::/10", "100.64.0.0/10",
}

// LocalCA is a certificate authority of this machine's own, made for
// phones on a LAN without a tailnet: the user installs its certificate on
// the phone once, and the serving certificate it issues is then trusted
// like any other (WebKit's wss, service workers, push).
type LocalCA struct {
	// CA is the authority's certificate, the one phones install.
	CA *x509.Certificate
	// Serving is the certificate the daemon serves, issued by CA.
	Serving *Cert
}

// LoadLocalCA loads the local CA kept in dir (ca.pem, ca-key.pem), making
// it on the first call, and the serving certificate it issued (cert.pem,
// key.pem), issuing a new one when it is missing, ends within RenewBefore
// or no longer covers hosts. Keys are written 0600. The CA is
// name-constrained: it can certify only the machine's names (hosts' DNS
// names, also under .local) and addresses (caRanges, and hosts' public
// addresses exactly).
func LoadLocalCA(dir string, hosts []string, now time.Time) (*LocalCA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	caCert, caKey, err := loadOrMakeCA(dir, hosts, now)
	if err != nil {
		return nil, err
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if c, err := LoadFiles(certFile, keyFile); err == nil && c.Leaf.NotAfter.Sub(now) > RenewBefore &&
		c.Leaf.CheckSignatureFrom(caCert) == nil && covers(c.Leaf, hosts) {
		return &LocalCA{CA: caCert, Serving: withChain(c, caCert)}, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: key: %w", err)
	}
	tmpl, err := template(hosts, now, now.Add(SelfSignedLifetime))
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("certs: issue: %w", err)
	}
	if err := writeKeyPair(certFile, keyFile, der, key); err != nil {
		return nil, err
	}
	c, err := LoadFiles(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &LocalCA{CA: caCert, Serving: withChain(c, caCert)}, nil
}

// withChain makes the served chain end with the CA, for clients that
// look for the issuer in what the server sends.
func withChain(c *Cert, ca *x509.Certificate) *Cert {
	c.TLS.Certificate = append(c.TLS.Certificate[:1:1], ca.Raw)
	return c
}

func loadOrMakeCA(dir string, hosts []string, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if c, err := LoadFiles(certFile, keyFile); err == nil {
		if c.Leaf.NotAfter.Sub(now) > RenewBefore {
			signer, ok := c.TLS.PrivateKey.(crypto.Signer)
			if !ok {
				return nil, nil, errors.New("certs: the local CA's key cannot sign")
			}
			return c.Leaf, signer, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	hostname, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: "tether local CA on " + hostname, Organization: []string{"tether"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(CALifetime),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
	}
	for _, r := range caRanges {
		_, n, _ := net.ParseCIDR(r)
		tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, n)
	}
	for _, h := range hosts {
		a, err := netip.ParseAddr(h)
		switch {
		case err != nil && h != "":
			tmpl.PermittedDNSDomains = append(tmpl.PermittedDNSDomains, h)
			if !strings.Contains(h, ".") && h != "localhost" {
				tmpl.PermittedDNSDomains = append(tmpl.PermittedDNSDomains, h+".local")
			}
		case err == nil && !inRanges(a):
			tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())})
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: create the local CA: %w", err)
	}
	if err := writeKeyPair(certFile, keyFile, der, key); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	return ca, key, nil
}

func inRanges(a netip.Addr) bool {
	for _, r := range caRanges {
		if netip.MustParsePrefix(r).Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

// covers reports whether leaf names every host.
func covers(leaf *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
				return false
			}
		} else if h != "" && !slices.Contains(leaf.DNSNames, h) {
			return false
		}
	}
	return true
}

// writeKeyPair writes a certificate (0644) and its key (0600) as PEM.
func writeKeyPair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: key: %w", err)
	}
	if err := writeFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// Fingerprint of a certificate, as phones show it: SHA-256 of the DER in
// upper-case hex pairs separated by spaces (what iOS shows).
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	var b bytes.Buffer
	for i, x := range sum {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%02X", x)
	}
	return b.String()
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial: %w", err)
	}
	return serial, nil
}
