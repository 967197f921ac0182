// Package egress is the forwarding proxy through which a sandbox reaches
// the network: the sandbox has a network namespace of its own with only a
// loopback interface, and its agent's HTTPS_PROXY names a listener there
// that the daemon serves (the listener's socket was made inside the
// namespace and handed to the daemon). The proxy forwards HTTP CONNECT
// tunnels and absolute-URI HTTP requests to the exact host:port
// destinations of its allow-list, and nothing else.
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits of a proxy.
const (
	// MaxConns is how many connections a sandbox may have open through it.
	MaxConns = 32
	// MaxHeader bounds a request's line and headers.
	MaxHeader = 16 << 10
	// HeaderTimeout bounds the wait for a request's headers.
	HeaderTimeout = 10 * time.Second
	// IdleTimeout closes a tunnel with no traffic either way.
	IdleTimeout = 5 * time.Minute
	// DialTimeout bounds the connection to a destination.
	DialTimeout = 10 * time.Second
)

// Proxy forwards a sandbox's connections to the destinations it allows.
type Proxy struct {
	// Allow are the destinations, "host:port", compared exactly (host
	// case-insensitively).
	Allow []string
	// Dial connects to a destination; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives refusals, rate-limited.
	Logger *slog.Logger

	once    sync.Once
	slots   chan struct{}
	refusal *rate.Limiter
}

func (p *Proxy) init() {
	p.once.Do(func() {
		p.slots = make(chan struct{}, MaxConns)
		p.refusal = rate.NewLimiter(rate.Every(time.Second), 5)
		if p.Logger == nil {
			p.Logger = slog.New(slog.DiscardHandler)
		}
		if p.Dial == nil {
			p.Dial = (&net.Dialer{Timeout: DialTimeout}).DialContext
		}
	})
}

// Allowed reports whether addr ("host:port") is a destination of the
// allow-list.
func (p *Proxy) Allowed(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return false
	}
	want := strings.ToLower(net.JoinHostPort(host, port))
	return slices.ContainsFunc(p.Allow, func(a string) bool { return strings.ToLower(a) == want })
}

// Serve accepts connections on ln until it is closed, and returns nil then.
func (p *Proxy) Serve(ln net.Listener) error {
	p.init()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		select {
		case p.slots <- struct{}{}:
		default:
			p.refuse(c, http.StatusServiceUnavailable, "too many connections through the sandbox's proxy", "")
			continue
		}
		wg.Go(func() {
			defer func() { <-p.slots }()
			p.handle(c)
		})
	}
}

// Request reads one proxy request from r: its method, its destination
// ("host:port") and, for plain HTTP, the request to forward. It is the
// proxy's decoder of untrusted bytes.
func Request(r *bufio.Reader) (*http.Request, string, error) {
	req, err := http.ReadRequest(r)
	if err != nil {
		return nil, "", err
	}
	dest := req.RequestURI
	if req.Method != http.MethodConnect {
		if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
			return nil, "", fmt.Errorf("a proxy request needs an absolute http URI or CONNECT, not %q", req.RequestURI)
		}
		dest = req.URL.Host
		if _, _, err := net.SplitHostPort(dest); err != nil {
			dest = net.JoinHostPort(strings.Trim(dest, "[]"), "80")
		}
	}
	if host, port, err := net.SplitHostPort(dest); err != nil || host == "" || port == "" {
		return nil, "", fmt.Errorf("a proxy request needs a destination host:port, not %q", req.RequestURI)
	}
	return req, dest, nil
}

func (p *Proxy) handle(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(HeaderTimeout))
	lr := &io.LimitedReader{R: c, N: MaxHeader}
	br := bufio.NewReaderSize(lr, MaxHeader)
	req, dest, err := Request(br)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		p.refuse(c, http.StatusRequestHeaderFieldsTooLarge, "request line and headers are limited to 16 KiB", "")
		return
	case err != nil:
		p.refuse(c, http.StatusBadRequest, err.Error(), "")
		return
	case !p.Allowed(dest):
		p.refuse(c, http.StatusForbidden, "tether's sandbox may not reach "+dest+" (allow it with --sandbox-allow-host)", dest)
		return
	}
	c.SetReadDeadline(time.Time{})
	lr.N = math.MaxInt64 // the headers are in; a body may follow
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	up, err := p.Dial(ctx, "tcp", dest)
	cancel()
	if err != nil {
		p.refuse(c, http.StatusBadGateway, "cannot reach "+dest, dest)
		return
	}
	defer up.Close()
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		// Bytes the client sent after its request line and headers (the
		// TLS hello, often) are in br already.
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			if _, err := up.Write(b); err != nil {
				return
			}
		}
		pipe(c, up)
		return
	}
	// One plain HTTP request a connection: hop-by-hop and proxy headers
	// stay here.
	req.RequestURI = ""
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	req.Close = true
	if err := req.Write(up); err != nil {
		return
	}
	pipe(c, up)
}

// pipe copies both ways until either side ends or neither moves for
// IdleTimeout.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			src.SetReadDeadline(time.Now().Add(IdleTimeout))
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			// It fails only for a connection already gone, which the
			// other direction's copy then sees.
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// refuse answers with an error status and logs the refusal (rate-limited).
func (p *Proxy) refuse(c net.Conn, status int, msg, dest string) {
	if p.refusal.Allow() {
		p.Logger.Warn("sandbox egress refused", "status", status, "destination", dest, "why", msg)
	}
	// A client that went away has nobody to tell; c closes next.
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s\n",
		status, http.StatusText(status), len(msg)+1, msg)
	c.Close()
}
