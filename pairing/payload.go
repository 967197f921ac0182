package pairing

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	qrcode "github.com/skip2/go-qrcode"
)

// Payload is what a pairing QR code encodes for native apps.
type Payload struct {
	V     int    `json:"v"`
	URL   string `json:"url"`
	Token Secret `json:"token"`
	// FP pins a self-signed certificate: "sha256:" and the lower-case hex
	// SHA-256 of its DER encoding. Empty when the certificate is trusted by
	// the platform (tailnet or files).
	FP  string `json:"fp,omitempty"`
	Exp string `json:"exp"`
}

// NewPayload builds the QR payload for code.
func NewPayload(url string, code Code, fingerprint string) Payload {
	return Payload{V: 1, URL: url, Token: code.Secret, FP: fingerprint, Exp: code.Expires.UTC().Format(time.RFC3339)}
}

// JSON encodes p on one line. The token is included: this is the one place
// a secret is meant to leave the daemon.
func (p Payload) JSON() []byte {
	type plain struct {
		V     int    `json:"v"`
		URL   string `json:"url"`
		Token string `json:"token"`
		FP    string `json:"fp,omitempty"`
		Exp   string `json:"exp"`
	}
	b, _ := json.Marshal(plain{p.V, p.URL, string(p.Token), p.FP, p.Exp})
	return b
}

// Fingerprint returns "sha256:HEX" of a DER certificate.
func Fingerprint(der []byte) string {
	h := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(h[:])
}

// TerminalQR renders data as a QR code of Unicode half blocks for a
// terminal, with its quiet zone, drawn for the usual light-on-dark terminal.
func TerminalQR(data []byte) (string, error) {
	q, err := qrcode.New(string(data), qrcode.Low)
	if err != nil {
		return "", fmt.Errorf("pairing: qr: %w", err)
	}
	return q.ToSmallString(false), nil
}

// PNG renders data as a QR code image, size pixels square.
func PNG(data []byte, size int) ([]byte, error) {
	png, err := qrcode.Encode(string(data), qrcode.Medium, size)
	if err != nil {
		return nil, fmt.Errorf("pairing: qr: %w", err)
	}
	return png, nil
}
