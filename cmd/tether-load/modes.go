package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// errNoPID is returned by idle mode for a target without a PID.
var errNoPID = errors.New("idle mode needs the server's PID (-pid, or the third field of -target)")

// options are the settings every mode shares.
type options struct {
	// Duration is how long a handshake or heartbeat measurement runs.
	Duration time.Duration
	// Settle is how long idle mode waits after opening its connections
	// before it reads the server's memory, and after closing them.
	Settle time.Duration
	// IdlePing is how often each idle connection sends heartbeat_ping, as
	// a phone does; 0 sends none.
	IdlePing time.Duration
	// Open is how many connections idle and heartbeat mode open at once.
	Open int
	// Warn receives warnings about the setup, such as a server's low
	// open-file limit.
	Warn io.Writer
}

// A metric is one number a measurement produced.
type metric struct {
	Name  string
	Unit  string
	Value float64
}

// cpuMeter measures the CPU time the load tool, the server and everything
// else on the machine use, as a share of wall time: 1.0 is one core busy
// throughout.
type cpuMeter struct {
	pid     int
	wall    time.Time
	self    time.Duration
	server  time.Duration
	machine time.Duration
}

// startCPU starts measuring; pid 0 measures the load tool alone.
func startCPU(pid int) cpuMeter {
	m := cpuMeter{pid: pid, wall: time.Now(), self: selfCPU()}
	if pid != 0 {
		m.server, _ = procCPU(pid)
	}
	m.machine, _ = machineCPU()
	return m
}

// metrics reports client_cpu, server_cpu (with a PID) and other_cpu, the
// rest of the machine's busy time, in cores. other_cpu is what another
// tenant of the machine took: when it is high, the run was noisy.
func (m cpuMeter) metrics() []metric {
	wall := time.Since(m.wall).Seconds()
	self := selfCPU() - m.self
	out := []metric{{"client_cpu", "cores", self.Seconds() / wall}}
	var server time.Duration
	if m.pid != 0 {
		if s, err := procCPU(m.pid); err == nil {
			server = s - m.server
			out = append(out, metric{"server_cpu", "cores", server.Seconds() / wall})
		}
	}
	if mc, err := machineCPU(); err == nil && m.machine != 0 {
		other := max(mc-m.machine-self-server, 0)
		out = append(out, metric{"other_cpu", "cores", other.Seconds() / wall})
	}
	return out
}

// latencyMetrics summarises the operations that completed in elapsed from
// their latencies (which it sorts) and the count of failed ones.
func latencyMetrics(lat []time.Duration, elapsed time.Duration, failed int) []metric {
	slices.Sort(lat)
	return []metric{
		{"rate", "1/s", float64(len(lat)) / elapsed.Seconds()},
		{"p50", "ms", ms(percentile(lat, 50))},
		{"p99", "ms", ms(percentile(lat, 99))},
		{"errors", "count", float64(failed)},
	}
}

// fatal reports whether err means every further attempt fails the same way.
func fatal(err error) bool {
	return errors.Is(err, errRefused) || errors.Is(err, errFingerprint)
}

// collector gathers latencies and failures from concurrent workers, and
// keeps the first error, or the first fatal one if any.
type collector struct {
	mu       sync.Mutex
	lat      []time.Duration
	failed   int
	firstErr error
}

func (c *collector) add(lat []time.Duration, failed int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lat = append(c.lat, lat...)
	c.failed += failed
	if c.firstErr == nil || (fatal(err) && !fatal(c.firstErr)) {
		c.firstErr = err
	}
}

// measureHandshake runs conc clients that each, for o.Duration, do one
// full handshake after another: TCP connect, TLS, WebSocket upgrade, auth,
// connection_ack, and a clean close. A handshake's latency runs from the
// dial to the end of the close; auth_ack is the part from the auth frame
// sent to the connection_ack read, the server's own work.
func measureHandshake(ctx context.Context, c *client, conc int, o options) ([]metric, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var col, authCol collector
	cpu := startCPU(c.target.PID)
	start := time.Now()
	end := start.Add(o.Duration)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			var lat, authLat []time.Duration
			var failed int
			var firstErr error
			for ctx.Err() == nil && time.Now().Before(end) {
				t0 := time.Now()
				conn, authAck, err := c.connectTimed(ctx)
				if err == nil {
					err = c.close(conn)
				}
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
					if fatal(err) {
						stop()
					}
					continue
				}
				lat = append(lat, time.Since(t0))
				authLat = append(authLat, authAck)
			}
			col.add(lat, failed, firstErr)
			authCol.add(authLat, 0, nil)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(col.lat) == 0 || fatal(col.firstErr) {
		return nil, fmt.Errorf("handshake: %w", col.firstErr)
	}
	slices.Sort(authCol.lat)
	out := append(latencyMetrics(col.lat, elapsed, col.failed),
		metric{"auth_ack_p50", "ms", ms(percentile(authCol.lat, 50))},
		metric{"auth_ack_p99", "ms", ms(percentile(authCol.lat, 99))})
	return append(out, cpu.metrics()...), nil
}

// measureHeartbeat opens conc connections and then, for o.Duration, has
// each send heartbeat_ping and wait for heartbeat_pong in a loop.
func measureHeartbeat(ctx context.Context, c *client, conc int, o options) ([]metric, error) {
	conns, err := openConns(ctx, c, conc, o.Open, nil)
	if err != nil {
		return nil, err
	}
	defer closeConns(c, conns)
	var col collector
	cpu := startCPU(c.target.PID)
	start := time.Now()
	end := start.Add(o.Duration)
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() {
			var lat []time.Duration
			var buf []byte
			prefix := "p" + strconv.Itoa(i) + "-"
			for n := 0; ctx.Err() == nil && time.Now().Before(end); n++ {
				t0 := time.Now()
				var err error
				if buf, err = c.ping(conn, prefix+strconv.Itoa(n), buf); err != nil {
					col.add(lat, 1, err)
					return
				}
				lat = append(lat, time.Since(t0))
			}
			col.add(lat, 0, nil)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(col.lat) == 0 {
		return nil, fmt.Errorf("heartbeat: %w", col.firstErr)
	}
	return append(latencyMetrics(col.lat, elapsed, col.failed), cpu.metrics()...), nil
}

// openConns opens n authenticated connections, at most par at a time,
// and calls opened, if not nil, with each as soon as it is open. On failure
// it closes the ones it opened.
func openConns(ctx context.Context, c *client, n, par int, opened func(*websocket.Conn)) ([]*websocket.Conn, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	conns := make([]*websocket.Conn, n)
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for range min(par, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				conn, err := c.connect(ctx)
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("opening connection %d of %d: %w", i+1, n, err) })
					stop()
					return
				}
				conns[i] = conn
				if opened != nil {
					opened(conn)
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		for _, conn := range conns {
			if conn != nil {
				conn.Close()
			}
		}
		return nil, firstErr
	}
	return conns, nil
}

// closeConns closes conns cleanly, a few at a time.
func closeConns(c *client, conns []*websocket.Conn) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(64, len(conns)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(conns); i = int(next.Add(1)) - 1 {
				_ = c.close(conns[i]) // the measurement is over: a connection that closes badly changes nothing
			}
		})
	}
	wg.Wait()
}

// measureIdle opens n connections, lets them sit idle for o.Settle, and
// reports how much the server's resident memory grew, per connection.
func measureIdle(ctx context.Context, c *client, n int, o options) ([]metric, error) {
	pid := c.target.PID
	if pid == 0 {
		return nil, errNoPID
	}
	perConn := uint64(1)
	if pid == os.Getpid() {
		perConn = 2
	}
	if err := raiseOpenFileLimit(perConn*uint64(n) + 256); err != nil {
		return nil, err
	}
	if lim, err := openFileLimit(pid); err == nil && lim < int64(n)+64 {
		fmt.Fprintf(o.Warn, "warning: server %s (pid %d) may open only %d files, fewer than %d connections need; raise ulimit -n before starting it\n",
			c.target.Name, pid, lim, n)
	}
	before, err := rssBytes(pid)
	if err != nil {
		return nil, err
	}
	cpu := startCPU(pid)
	t0 := time.Now()
	idle, err := openIdle(ctx, c, n, o)
	if err != nil {
		return nil, err
	}
	opened := time.Since(t0)

	sleepErr := sleep(ctx, o.Settle)
	after, rssErr := rssBytes(pid)
	metrics := cpu.metrics()
	if err := errors.Join(sleepErr, rssErr, idle.close(c)); err != nil {
		return nil, err
	}
	if err := sleep(ctx, o.Settle); err != nil {
		return nil, err
	}
	return append([]metric{
		{"kib_per_conn", "KiB", float64(after-before) / 1024 / float64(n)},
		{"rss_before", "MiB", float64(before) / (1 << 20)},
		{"rss_after", "MiB", float64(after) / (1 << 20)},
		{"open_rate", "conn/s", float64(n) / opened.Seconds()},
	}, metrics...), nil
}

// pingIdle sends heartbeat_ping on each of conns once every interval,
// spread evenly, until ctx ends; the connections' readers discard the
// pongs. interval 0 sends nothing.
func pingIdle(ctx context.Context, c *client, conns []*websocket.Conn, interval time.Duration) {
	if interval <= 0 {
		return
	}
	tick := time.NewTicker(max(interval/time.Duration(len(conns)), time.Millisecond))
	defer tick.Stop()
	var buf []byte
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			conn := conns[i%len(conns)]
			buf = pingFrame(buf, "i"+strconv.Itoa(i), now)
			conn.SetWriteDeadline(now.Add(c.timeout))
			_ = conn.WriteMessage(websocket.TextMessage, buf) // a connection that failed is reported by its reader
		}
	}
}

// shutIdle sends a close frame on each of conns and gives the server
// c.timeout to answer, so that the readers of conns return.
func shutIdle(c *client, conns []*websocket.Conn) {
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	deadline := time.Now().Add(c.timeout)
	for _, conn := range conns {
		conn.SetReadDeadline(deadline)
		conn.WriteControl(websocket.CloseMessage, msg, deadline)
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// measureQuiet opens n connections that stay idle but for a phone's
// heartbeat_ping every o.IdlePing, waits o.Settle, and then for
// o.Duration counts the CPU time and the context switches of the server:
// what keeps an idle server awake.
func measureQuiet(ctx context.Context, c *client, n int, o options) ([]metric, error) {
	pid := c.target.PID
	if pid == 0 {
		return nil, errNoPID
	}
	if err := raiseOpenFileLimit(uint64(n) + 256); err != nil {
		return nil, err
	}
	idle, err := openIdle(ctx, c, n, o)
	if err != nil {
		return nil, err
	}
	err = sleep(ctx, o.Settle)
	var cpu0, cpu1 time.Duration
	var cs0, cs1 int64
	if err == nil {
		cpu0, cs0, err = threadStats(pid)
	}
	if err == nil {
		err = sleep(ctx, o.Duration)
	}
	if err == nil {
		cpu1, cs1, err = threadStats(pid)
	}
	if err := errors.Join(err, idle.close(c)); err != nil {
		return nil, err
	}
	return []metric{
		{"server_cpu_ms", "ms", ms(cpu1 - cpu0)},
		{"ctx_switches", "count", float64(cs1 - cs0)},
	}, nil
}

// idleSet is a set of connections that stay idle but for a phone's
// heartbeat_ping every o.IdlePing. Each has a reader as soon as it is
// open, which answers the server's WebSocket pings (a server may drop a
// connection that does not) and notices when the server closes it.
type idleSet struct {
	conns     []*websocket.Conn
	closing   atomic.Bool
	dropped   atomic.Int64
	readers   sync.WaitGroup
	stopPings context.CancelFunc
	pinger    chan struct{}
}

// openIdle opens n idle connections (o.Open at a time) and starts their
// heartbeats.
func openIdle(ctx context.Context, c *client, n int, o options) (*idleSet, error) {
	s := &idleSet{pinger: make(chan struct{})}
	conns, err := openConns(ctx, c, n, o.Open, s.read)
	if err != nil {
		s.closing.Store(true)
		s.readers.Wait()
		return nil, err
	}
	s.conns = conns
	pingCtx, stop := context.WithCancel(ctx)
	s.stopPings = stop
	go func() {
		defer close(s.pinger)
		pingIdle(pingCtx, c, conns, o.IdlePing)
	}()
	return s, nil
}

func (s *idleSet) read(conn *websocket.Conn) {
	s.readers.Go(func() {
		for {
			if _, _, err := conn.NextReader(); err != nil {
				if !s.closing.Load() {
					s.dropped.Add(1)
				}
				return
			}
		}
	})
}

// close stops the heartbeats and closes the connections as a client does;
// it reports connections the server closed before.
func (s *idleSet) close(c *client) error {
	s.stopPings()
	<-s.pinger
	s.closing.Store(true)
	shutIdle(c, s.conns)
	s.readers.Wait()
	for _, conn := range s.conns {
		_ = conn.Close() // shutIdle closed it already, as a client does
	}
	if d := s.dropped.Load(); d > 0 {
		return fmt.Errorf("the server closed %d of %d idle connections", d, len(s.conns))
	}
	return nil
}
