// Package runmcp gives an agent in a sandbox the tools of its agent-to-agent
// run as an MCP server (`tether mcp`, which the agent's CLI starts over
// stdio), and carries their calls to the sandbox bridge, which passes them
// to the daemon over its socket.
//
// The sandbox has no Unix sockets of its own (its seccomp filter refuses
// them), so the bridge listens on the loopback of the sandbox's own network
// namespace, which nothing outside the sandbox reaches, and every
// connection opens with a token the bridge made: the relay. A relay
// connection carries lines of JSON: the token first, then [Request]s up
// and [Reply]s down, matched by id, several at once.
package runmcp

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"github.com/tetherdev/tether/sandbox/agent"
)

// MaxLine is the longest relay line: a message's content is at most
// agent.MaxRunContent bytes, which JSON may escape to six times as many.
const MaxLine = 8 << 20

// Environment variables that tell `tether mcp` where the relay is.
const (
	EnvAddr  = "TETHER_RUN_ADDR"
	EnvToken = "TETHER_RUN_TOKEN"
)

// ErrBadLine is a relay line that is not what the relay expects.
var ErrBadLine = errors.New("runmcp: bad relay line")

// Request is a tool call on the relay.
type Request struct {
	ID   string        `json:"id"`
	Call agent.RunCall `json:"call"`
}

// Reply answers the Request of the same id: Result, or Error.
type Reply struct {
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// DecodeRequest parses one relay line as a Request.
func DecodeRequest(line []byte) (Request, error) {
	var r Request
	if err := json.Unmarshal(line, &r); err != nil {
		return Request{}, fmt.Errorf("%w: %w", ErrBadLine, err)
	}
	if r.ID == "" {
		return Request{}, fmt.Errorf("%w: request without id", ErrBadLine)
	}
	switch r.Call.Tool {
	case agent.ToolSend, agent.ToolReceive, agent.ToolStatus:
	default:
		return Request{}, fmt.Errorf("%w: unknown tool %q", ErrBadLine, r.Call.Tool)
	}
	return r, nil
}

// DecodeReply parses one relay line as a Reply.
func DecodeReply(line []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(line, &r); err != nil {
		return Reply{}, fmt.Errorf("%w: %w", ErrBadLine, err)
	}
	if r.ID == "" {
		return Reply{}, fmt.Errorf("%w: reply without id", ErrBadLine)
	}
	if r.Error == "" && !json.Valid(r.Result) {
		return Reply{}, fmt.Errorf("%w: reply without result or error", ErrBadLine)
	}
	return r, nil
}

func newScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	return sc
}

// ServeRelay accepts relay connections on ln until ctx ends, and answers
// each request of a connection that opened with token through calls. A
// connection that opens with anything else is closed.
func ServeRelay(ctx context.Context, ln net.Listener, token string, calls agent.RunCaller, log *slog.Logger) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveConn(ctx, c, token, calls, log)
		}()
	}
}

func serveConn(ctx context.Context, c net.Conn, token string, calls agent.RunCaller, log *slog.Logger) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	sc := newScanner(c)
	if !sc.Scan() || subtle.ConstantTimeCompare(sc.Bytes(), []byte(token)) != 1 {
		log.Warn("run tools: a relay connection without the token; closed")
		return
	}
	var wmu sync.Mutex
	enc := json.NewEncoder(c)
	reply := func(r Reply) {
		wmu.Lock()
		defer wmu.Unlock()
		if err := enc.Encode(r); err != nil {
			// The client is gone: the read loop ends with the connection.
			c.Close()
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for sc.Scan() {
		req, err := DecodeRequest(sc.Bytes())
		if err != nil {
			log.Warn("run tools: bad relay request", "err", err)
			reply(Reply{ID: "?", Error: err.Error()})
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := calls.Call(ctx, req.Call)
			if err != nil {
				reply(Reply{ID: req.ID, Error: err.Error()})
				return
			}
			reply(Reply{ID: req.ID, Result: res})
		}()
	}
}

// Client is a relay connection: an agent.RunCaller for `tether mcp`.
type Client struct {
	conn net.Conn

	wmu sync.Mutex
	enc *json.Encoder

	mu      sync.Mutex
	next    uint64
	waiting map[string]chan Reply
	err     error // why the connection ended
}

// Dial connects to the relay at addr and opens with token.
func Dial(ctx context.Context, addr, token string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("runmcp: dial the sandbox bridge: %w", err)
	}
	if _, err := io.WriteString(conn, token+"\n"); err != nil {
		conn.Close()
		return nil, fmt.Errorf("runmcp: dial the sandbox bridge: %w", err)
	}
	c := &Client{conn: conn, enc: json.NewEncoder(conn), waiting: map[string]chan Reply{}}
	go c.read()
	return c, nil
}

func (c *Client) read() {
	sc := newScanner(c.conn)
	for sc.Scan() {
		r, err := DecodeReply(sc.Bytes())
		if err != nil {
			continue
		}
		c.mu.Lock()
		ch := c.waiting[r.ID]
		delete(c.waiting, r.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	err := sc.Err()
	if err == nil {
		err = io.EOF
	}
	c.mu.Lock()
	c.err = fmt.Errorf("runmcp: the sandbox bridge hung up: %w", err)
	for id, ch := range c.waiting {
		close(ch)
		delete(c.waiting, id)
	}
	c.mu.Unlock()
}

// Call implements agent.RunCaller.
func (c *Client) Call(ctx context.Context, call agent.RunCall) (json.RawMessage, error) {
	ch := make(chan Reply, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.next++
	id := strconv.FormatUint(c.next, 10)
	c.waiting[id] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	err := c.enc.Encode(Request{ID: id, Call: call})
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("runmcp: send to the sandbox bridge: %w", err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			c.mu.Lock()
			defer c.mu.Unlock()
			return nil, c.err
		}
		if r.Error != "" {
			return nil, errors.New(r.Error)
		}
		return r.Result, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, ctx.Err()
	}
}

func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }
