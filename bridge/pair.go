package bridge

import (
	"crypto/subtle"
	"encoding/base64"
	"html/template"
	"net"
	"net/http"
	"strings"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
)

var pairPage = template.Must(template.New("pair").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pair a device with tether</title>
<style>
body{font-family:system-ui,sans-serif;max-width:34rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#111;background:#fff}
@media (prefers-color-scheme:dark){body{color:#eee;background:#111}}
img{display:block;width:min(100%,22rem);height:auto;background:#fff;padding:.5rem;border-radius:.5rem}
code{word-break:break-all}
</style></head><body>
<h1>Pair a device</h1>
<p>Scan this code with the app. It works once and expires at <time datetime="{{.Exp}}">{{.Exp}}</time>.</p>
<img alt="Pairing QR code" src="data:image/png;base64,{{.PNG}}">
<p>Server: <code>{{.URL}}</code></p>
{{if .FP}}<p>Certificate fingerprint: <code>{{.FP}}</code></p>{{end}}
{{if .CA}}<p>First time on this phone? Open <a href="{{.CA}}">{{.CA}}</a> on the phone and install this computer's certificate authority.</p>{{end}}
<p>Reload this page for a new code. <code>tether devices list</code> shows paired devices.</p>
</body></html>
`))

// notHere answers a /pair request from anywhere but this machine's user.
const notHere = "pairing codes are shown only on this machine: open the /pair address `tether serve` printed, or run `tether pair`"

// servePair shows a fresh pairing code, to the user of this machine only:
// the request must carry the page key (PairKey, printed in the daemon's
// terminal and kept nowhere a sandbox can read), come from loopback under a
// loopback Host name (which also shuts out DNS rebinding from a web page),
// and be classified local_only like a /ws connection would be (a tailnet
// peer arriving through userspace networking also comes from 127.0.0.1).
// Reaching loopback is not enough: any process of the machine can. ?format=png
// returns the QR image alone, ?format=json the payload; ?kind=app issues an
// app code.
func (s *Server) servePair(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if !peerAddr(r).IsLoopback() || !loopbackHost(r.Host) {
		http.Error(w, notHere, http.StatusForbidden)
		return
	}
	if cl := s.classifier().Classify(r.Context(), r); cl.Refused != nil || cl.Mode != pairing.ModeLocalOnly {
		s.Logger.Warn("pairing page refused", "remote", r.RemoteAddr, "mode", cl.Mode, "detail", cl.Description)
		http.Error(w, notHere, http.StatusForbidden)
		return
	}
	key := r.URL.Query().Get("key")
	if s.PairKey == "" || subtle.ConstantTimeCompare([]byte(key), []byte(s.PairKey)) != 1 {
		s.Logger.Warn("pairing page refused: wrong key", "remote", r.RemoteAddr)
		http.Error(w, "this page needs the key `tether serve` printed with its address; or run `tether pair`", http.StatusForbidden)
		return
	}
	kind := store.CodeOnce
	if r.URL.Query().Get("kind") == "app" {
		kind = store.CodeApp
	}
	code, err := s.Pairer.NewCode(r.Context(), kind)
	if err != nil {
		s.Logger.Error("issuing pairing code", "err", err)
		http.Error(w, "could not issue a pairing code", http.StatusInternalServerError)
		return
	}
	p := pairing.NewPayload(s.BridgeURL, code, s.Fingerprint)
	data := p.JSON()
	format := r.URL.Query().Get("format")
	if format == "json" {
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(data, '\n'))
		return
	}
	png, err := pairing.PNG(data, 512)
	if err != nil {
		s.Logger.Error("rendering pairing QR", "err", err)
		http.Error(w, "could not render the QR code", http.StatusInternalServerError)
		return
	}
	if format == "png" {
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src data:; style-src 'unsafe-inline'")
	if err := pairPage.Execute(w, map[string]string{
		"PNG": base64.StdEncoding.EncodeToString(png), "URL": p.URL, "FP": p.FP, "Exp": p.Exp, "CA": s.CAGuide,
	}); err != nil {
		s.Logger.Debug("writing the pairing page", "err", err)
	}
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
