// Package web is tether's browser client: a mobile-first single-page app
// (Preact with htm, vendored; no build step) embedded in the binary and
// served by Handler. It speaks the same WebSocket protocol as a native app.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Assets is the client's files: index.html, the scripts, the styles, the
// manifest, the icons, the service worker and the vendored libraries.
var Assets = mustSub(static, "static")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// contentSecurityPolicy lets the page load only its own files and open a
// WebSocket to its own origin; nothing inline, nothing from elsewhere.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; manifest-src 'self'; worker-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// Handler serves the client for GET and HEAD: "/" is index.html, other
// paths are files of Assets; anything else is 404. Responses forbid
// framing and sniffing and carry a strict content security policy; the
// service worker and the page are revalidated on every load so an upgraded
// daemon serves its own client.
func Handler() http.Handler {
	files := http.FileServerFS(Assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == "/sw.js" {
			h.Set("Service-Worker-Allowed", "/")
		}
		if strings.HasSuffix(r.URL.Path, "/") && r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}
