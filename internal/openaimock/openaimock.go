// Package openaimock is a small mock of the OpenAI Responses API for tests,
// in the style of internal/anthropicmock. It listens on loopback, answers
// POST /v1/responses with scripted replies streamed as server-sent events
// the way the Codex CLI reads them (docs/codex-observed.md), and records
// every request so that a test can assert what the CLI sent: the user's
// messages, and the output of the tools it ran. CodexBin and
// Server.CodexConfig find the real CLI that scripts/install-deps installs and
// point it at the mock.
package openaimock

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server is a running mock. Build it with New; it closes itself when the
// test ends.
type Server struct {
	// URL is the base URL of the API, e.g. "http://127.0.0.1:34567/v1":
	// the CLI POSTs to URL+"/responses".
	URL string

	tb  testing.TB
	srv *httptest.Server

	respondMu sync.Mutex
	respond   Responder
	replies   int

	mu       sync.Mutex
	requests []*Request
}

// Responder decides the reply to one Responses API request. It is called
// from the server's handler goroutines, one call at a time.
type Responder func(req *Request) Reply

// New starts a mock on loopback that answers with respond, and closes it
// when tb's test ends. Requests to other paths are logged and answered 404.
func New(tb testing.TB, respond Responder) *Server {
	tb.Helper()
	s := &Server{tb: tb, respond: respond}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.srv.URL + "/v1"
	tb.Cleanup(s.srv.Close)
	return s
}

// Requests returns the POST /v1/responses requests received so far, in
// arrival order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

func (s *Server) serveHTTP(w http.ResponseWriter, hr *http.Request) {
	if hr.URL.Path != "/v1/responses" || hr.Method != http.MethodPost {
		s.tb.Logf("openaimock: unknown request %s %s", hr.Method, hr.URL.RequestURI())
		writeError(w, http.StatusNotFound, "openaimock: no such endpoint")
		return
	}
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body")
		return
	}
	req, err := ParseRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	req.Header = hr.Header.Clone()
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	s.respondMu.Lock()
	reply := s.respond(req)
	s.replies++
	n := s.replies
	s.respondMu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	if err := reply.stream(hr.Context(), w, n); err != nil {
		s.tb.Logf("openaimock: stream reply: %v", err)
	}
}

func writeError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"type": "invalid_request_error", "message": message}})
	_, _ = w.Write(b)
}

// CodexConfig returns the -c overrides (each "key=value", the value TOML)
// that make the Codex CLI use s as its model provider, with the API key
// from the environment variable keyEnv and the model "gpt-5.5", which the
// CLI's catalog knows.
func (s *Server) CodexConfig(keyEnv string) []string {
	return []string{
		`model="gpt-5.5"`,
		`model_provider="mock"`,
		`model_providers.mock.name="Mock"`,
		fmt.Sprintf(`model_providers.mock.base_url=%q`, s.URL),
		fmt.Sprintf(`model_providers.mock.env_key=%q`, keyEnv),
		`model_providers.mock.wire_api="responses"`,
	}
}
