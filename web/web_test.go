package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Result(), string(body)
}

func TestHandler(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/", 200, "text/html", `<script type="module" src="/app.js">`},
		{"HEAD", "/", 200, "text/html", ""},
		{"GET", "/app.js", 200, "text/javascript", "new Connection("},
		{"GET", "/style.css", 200, "text/css", "prefers-color-scheme: dark"},
		{"GET", "/manifest.webmanifest", 200, "", `"display": "standalone"`},
		{"GET", "/sw.js", 200, "text/javascript", "tether-shell"},
		{"GET", "/icon-192.png", 200, "image/png", "PNG"},
		{"GET", "/vendor/preact-htm.js", 200, "text/javascript", "export{"},
		{"GET", "/vendor/", 404, "", ""},
		{"GET", "/nothing", 404, "", ""},
		{"GET", "/../web.go", 404, "", ""},
		{"POST", "/", 405, "", ""},
		{"DELETE", "/app.js", 405, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp, body := get(t, tt.method, tt.path)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.ctype) || !strings.Contains(body, tt.body) {
				t.Fatalf("%s %.100q", resp.Header.Get("Content-Type"), body)
			}
			if resp.Header.Get("Content-Security-Policy") != contentSecurityPolicy || resp.Header.Get("X-Frame-Options") != "DENY" {
				t.Fatalf("headers %v", resp.Header)
			}
		})
	}
}

// TestAssetsAreComplete checks that every module import and every file the
// page, the manifest and the service worker name is embedded, so the
// client never asks for something the daemon does not have.
func TestAssetsAreComplete(t *testing.T) {
	t.Parallel()
	refs := map[string]string{}
	find := func(file string, re *regexp.Regexp, base string) {
		data, err := fs.ReadFile(Assets, file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			refs[strings.TrimPrefix(base+strings.TrimPrefix(m[1], "./"), "/")] = file
		}
	}
	imports := regexp.MustCompile(`from '(\./[^']+)'`)
	for _, js := range []string{"app.js", "conn.js", "text.js"} {
		find(js, imports, "")
	}
	find("index.html", regexp.MustCompile(`(?:src|href)="(/[^"]+)"`), "")
	find("manifest.webmanifest", regexp.MustCompile(`"src": "(/[^"]+)"`), "")
	find("sw.js", regexp.MustCompile(`'(/[^']+)'`), "")
	if len(refs) < 10 {
		t.Fatalf("found only %d references: %v", len(refs), refs)
	}
	for ref, from := range refs {
		if ref == "" {
			continue
		}
		if _, err := fs.Stat(Assets, ref); err != nil {
			t.Errorf("%s names %s, which is not embedded", from, ref)
		}
	}
	for _, lic := range []string{"vendor/LICENSE-htm", "vendor/LICENSE-preact", "vendor/VERSIONS"} {
		if _, err := fs.Stat(Assets, lic); err != nil {
			t.Errorf("%s: %v", lic, err)
		}
	}
}

// TestNoInlineMarkup keeps the client free of innerHTML and inline
// handlers, which the content security policy would block and which would
// let an agent's text become markup.
func TestNoInlineMarkup(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"app.js", "conn.js", "text.js", "sw.js", "index.html"} {
		data, _ := fs.ReadFile(Assets, f)
		for _, bad := range []string{"innerHTML", "dangerouslySetInnerHTML", "eval(", "onclick=", "style="} {
			if strings.Contains(string(data), bad) {
				t.Errorf("%s contains %q", f, bad)
			}
		}
	}
}
