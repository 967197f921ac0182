package main

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strings"
	texttemplate "text/template"

	"github.com/tetherdev/tether/certs"
)

var caGuide = template.Must(template.New("ca").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Trust this computer's tether</title>
<style>
body{font-family:system-ui,sans-serif;max-width:34rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#111;background:#fff}
@media (prefers-color-scheme:dark){body{color:#eee;background:#111}a{color:#8cf}}
code{word-break:break-all}
a.button{display:inline-block;padding:.6rem 1rem;border-radius:.5rem;background:#2563eb;color:#fff;text-decoration:none;margin:.25rem 0}
</style></head><body>
<h1>Trust this computer's tether</h1>
<p>This computer serves tether with a certificate from its own certificate
authority, <b>{{.Name}}</b>. Install it once on this phone; the browser then
trusts tether like any site (live updates, installing the app, notifications).
It can vouch only for this computer's names and private addresses.</p>
<p>Check its fingerprint against the one <code>tether serve</code> printed:<br>
<code>SHA-256 {{.FP}}</code></p>
<h2>iPhone, iPad</h2>
<ol>
<li><a class="button" href="/ca.mobileconfig">Download the profile</a>, in Safari, and allow it.</li>
<li>Settings → General → VPN &amp; Device Management → the tether profile → Install.</li>
<li>Settings → General → About → Certificate Trust Settings → turn on full trust for <b>{{.Name}}</b>.</li>
</ol>
<h2>Android</h2>
<ol>
<li><a class="button" href="/ca.crt">Download the certificate</a>.</li>
<li>Settings → Security → More security settings → Encryption &amp; credentials → Install a certificate → CA certificate, and pick the downloaded file.</li>
</ol>
<p>Then open tether again, or scan the pairing code.</p>
</body></html>
`))

var caProfile = texttemplate.Must(texttemplate.New("profile").Parse(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>PayloadContent</key>
	<array>
		<dict>
			<key>PayloadCertificateFileName</key>
			<string>tether-ca.cer</string>
			<key>PayloadContent</key>
			<data>{{.DER}}</data>
			<key>PayloadDisplayName</key>
			<string>{{.Name}}</string>
			<key>PayloadIdentifier</key>
			<string>dev.tether.ca.{{.ID}}</string>
			<key>PayloadType</key>
			<string>com.apple.security.root</string>
			<key>PayloadUUID</key>
			<string>{{.CertUUID}}</string>
			<key>PayloadVersion</key>
			<integer>1</integer>
		</dict>
	</array>
	<key>PayloadDisplayName</key>
	<string>tether: {{.Name}}</string>
	<key>PayloadIdentifier</key>
	<string>dev.tether.profile.{{.ID}}</string>
	<key>PayloadType</key>
	<string>Configuration</string>
	<key>PayloadUUID</key>
	<string>{{.ProfileUUID}}</string>
	<key>PayloadVersion</key>
	<integer>1</integer>
</dict>
</plist>
`))

// caPages serves the local certificate authority to phones: /ca, a short
// guide; /ca.crt, the certificate (DER, what Android installs);
// /ca.mobileconfig, an iOS configuration profile holding it. The
// certificate is public: anyone may fetch it, as anyone may see it in a
// TLS handshake.
func caPages(mux *http.ServeMux, ca *x509.Certificate) {
	sum := sha256.Sum256(ca.Raw)
	data := map[string]any{
		"Name":        ca.Subject.CommonName,
		"FP":          certs.Fingerprint(ca),
		"DER":         base64.StdEncoding.EncodeToString(ca.Raw),
		"ID":          fmt.Sprintf("%x", sum[:8]),
		"CertUUID":    uuidOf(sum[:16]),
		"ProfileUUID": uuidOf(sum[16:]),
	}
	var name strings.Builder
	_ = xml.EscapeText(&name, []byte(ca.Subject.CommonName)) // a strings.Builder does not fail
	data["Name"] = name.String()
	guide, profile := render(caGuide, data), render(caProfile, data)
	mux.HandleFunc("GET /ca", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		fmt.Fprint(w, guide)
	})
	mux.HandleFunc("GET /ca.crt", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-x509-ca-cert")
		w.Header().Set("Content-Disposition", `attachment; filename="tether-ca.crt"`)
		w.Write(ca.Raw)
	})
	mux.HandleFunc("GET /ca.mobileconfig", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-apple-aspen-config")
		w.Header().Set("Content-Disposition", `attachment; filename="tether.mobileconfig"`)
		fmt.Fprint(w, profile)
	})
}

// page is an html/template or a text/template.
type page interface {
	Execute(w io.Writer, data any) error
	Name() string
}

// render executes a page's template: both and their data are fixed, so an
// error is a bug, which TestLocalCATrustedByAPhone would show at once.
func render(t page, data any) string {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		panic(fmt.Sprintf("tether: the %s template: %v", t.Name(), err))
	}
	return b.String()
}

// uuidOf formats 16 bytes as a UUID (the profile's identifiers stay the
// same for the same certificate, so installing it again replaces it).
func uuidOf(b []byte) string {
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
