// Command tether-load measures a server that speaks the connection-level
// part of the phone protocol (auth, connection_ack, heartbeat_ping,
// heartbeat_pong over ws or wss): tether itself, or the Node reference
// bridge in bench/node-reference, or both side by side.
//
// It has three modes. idle opens N authenticated connections, keeps them
// idle and reports the server's resident memory per connection. handshake
// does full connections (TCP, TLS, WebSocket upgrade, auth, ack, close)
// one after another or from C clients at once, and reports their rate and
// latency. heartbeat reports the round-trip time of heartbeat_ping on one
// connection and the total ping rate over C connections.
//
// Each measurement is repeated -runs times, alternating between the
// targets run by run, and printed with every run and the median, together
// with the CPU the load tool itself used: on a small machine the client
// can be the bottleneck, and this shows when it is. Run it with -h for
// every flag.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if len(os.Args) > 1 && os.Args[1] == minimalCommand {
		code = runMinimal(ctx, os.Args[2:], os.Getenv, os.Stderr)
	} else {
		code = run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

// The modes.
const (
	modeIdle      = "idle"
	modeHandshake = "handshake"
	modeHeartbeat = "heartbeat"
	modeQuiet     = "quiet"
)

// config is everything the flags say.
type config struct {
	modes   []string
	ns      []int
	cs      []int
	runs    int
	warmup  time.Duration
	timeout time.Duration
	json    bool
	targets []target
	opts    options
}

const usageText = `tether-load measures servers that speak the phone protocol's auth and heartbeat.

Usage:
  tether-load [flags] -url wss://127.0.0.1:8443/ws -token TOKEN -fp sha256:HEX [-pid PID]
  tether-load [flags] -target NAME=URL,TOKEN[,PID[,CERT]] [-target ...]
  tether-load minimal-server [-listen ADDR] [-cert PEM -key PEM] [-token env:VAR]

minimal-server serves only TLS, the upgrade, auth against one fixed token,
connection_ack and heartbeat_pong, storing nothing: the ceiling of a Go
server for the connection paths, to measure a server against.

Targets: either one server with -url, -token, -pid, -fp/-insecure, or any
number of -target NAME=URL,TOKEN[,PID[,CERT]], measured side by side and
alternately run by run (A B A B ...) so that machine noise hits all alike.
TOKEN is the token, or env:VAR to read it from the environment variable VAR.
PID (may be empty) is the server's process id: idle mode needs it, and with
it every mode also reports the server's CPU use. CERT is sha256:HEX, the
SHA-256 of the server's leaf certificate (DER), or "insecure"; without it a
target takes -fp or -insecure.

-start NAME=COMMAND makes the load tool run that target's server itself
(sh -c COMMAND, so its PID is known), afresh for every run, warmed up with
-warmup before measuring and stopped with SIGTERM after. Idle mode needs it
for runs after the first to mean anything: a server process (Node, Go) keeps
the memory that the previous run's connections used and reuses it, so on a
long-running server only the first idle run shows the real growth.

Modes (-mode, comma-separated):
  idle       opens N connections (-n), authenticates them, waits -settle, and
             reports the server's RSS growth (VmRSS of /proc/PID/status) per
             connection in KiB; it raises its own open-file limit and warns
             when the server's is too low for N.
  handshake  for -d, C clients (-c) each do full handshakes back to back: TCP,
             TLS (no session resumption), WebSocket upgrade, auth,
             connection_ack, close frame and the server's close; reports the
             rate and the p50/p99 latency of one handshake.
  heartbeat  opens C connections (-c); for -d, each sends heartbeat_ping and
             waits for heartbeat_pong in a loop; reports the total rate and
             the p50/p99 round trip.
  quiet      opens C idle connections (-c) that ping as a phone does
             (-idle-ping), waits -settle, then for -d reports the CPU time
             the server used (ms) and its context switches, over all its
             threads: what an idle daemon costs the machine.

Every measurement also reports client_cpu, the load tool's own CPU time over
wall time (1.0 = one core busy), server_cpu likewise when the PID is known,
and other_cpu, the rest of the machine's busy time (from /proc/stat). When
client_cpu plus server_cpu nears the machine's core count, the client is part
of what is measured; when other_cpu is high, something else on the machine
took CPU from both and the run is noisy.

Output: progress on stderr; a table of every run and the median on stdout,
or with -json one JSON object a line per metric:
  {"target","mode","param","metric","unit","runs":[...],"median"}
When a measurement fails, the ones completed before it are still printed and
the exit code is 1.

Flags:
`

// parseFlags turns the command line into a config. It returns
// flag.ErrHelp for -h.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("tether-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	var (
		cfg      config
		rawTgts  []string
		modes    = fs.String("mode", "handshake,heartbeat", "modes to run, comma-separated: idle, handshake, heartbeat, quiet")
		ns       = fs.String("n", "1000", "idle mode: connection counts, comma-separated")
		cs       = fs.String("c", "1,32", "handshake and heartbeat modes: concurrent clients, comma-separated")
		url      = fs.String("url", "", "the one server's URL, ws://HOST:PORT/PATH or wss://HOST:PORT/PATH (instead of -target)")
		token    = fs.String("token", "", "the one server's device token (default $TETHER_LOAD_TOKEN)")
		pid      = fs.Int("pid", 0, "the one server's process id (idle mode needs it)")
		fp       = fs.String("fp", "", "pin the server certificate: sha256:HEX of its DER encoding (default for targets without CERT)")
		insecure = fs.Bool("insecure", false, "accept any server certificate (default for targets without CERT)")
	)
	fs.Func("target", "a server to measure, NAME=URL,TOKEN[,PID[,CERT]]; repeatable", func(s string) error {
		rawTgts = append(rawTgts, s)
		return nil
	})
	starts := map[string]string{}
	fs.Func("start", "NAME=COMMAND: start target NAME's server (the -url one is named \"server\") with sh -c COMMAND afresh for every run, and stop it after; repeatable", func(s string) error {
		name, command, ok := strings.Cut(s, "=")
		if !ok || name == "" || command == "" {
			return errors.New("want NAME=COMMAND")
		}
		starts[name] = command
		return nil
	})
	fs.IntVar(&cfg.runs, "runs", 5, "how many times to repeat each measurement")
	fs.DurationVar(&cfg.opts.Duration, "d", 10*time.Second, "handshake and heartbeat modes: how long one run lasts")
	fs.DurationVar(&cfg.opts.Settle, "settle", 3*time.Second, "idle mode: wait after opening before reading the server's memory, and after closing")
	fs.DurationVar(&cfg.opts.IdlePing, "idle-ping", 15*time.Second, "idle mode: each connection sends heartbeat_ping this often, as a phone does (0: never)")
	fs.IntVar(&cfg.opts.Open, "open", 64, "idle and heartbeat modes: connections opened at once")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "before measuring, handshake and ping each target for this long (0: no warm-up)")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "give up on a dial, read or write after this long")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object per metric instead of a table")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	var err error
	for m := range strings.SplitSeq(*modes, ",") {
		if !slices.Contains([]string{modeIdle, modeHandshake, modeHeartbeat, modeQuiet}, m) {
			return config{}, fmt.Errorf("-mode: unknown mode %q", m)
		}
		cfg.modes = append(cfg.modes, m)
	}
	if cfg.ns, err = parseInts(*ns); err != nil {
		return config{}, fmt.Errorf("-n: %w", err)
	}
	if cfg.cs, err = parseInts(*cs); err != nil {
		return config{}, fmt.Errorf("-c: %w", err)
	}
	if cfg.runs < 1 || cfg.opts.Open < 1 || cfg.opts.Duration <= 0 || cfg.timeout <= 0 {
		return config{}, errors.New("-runs, -open, -d and -timeout must be positive")
	}
	def := tlsDefaults{Insecure: *insecure}
	if *fp != "" {
		if def.Fingerprint, err = parseFingerprint(*fp); err != nil {
			return config{}, fmt.Errorf("-fp: %w", err)
		}
	}
	switch {
	case len(rawTgts) > 0 && *url != "":
		return config{}, errors.New("give either -url or -target, not both")
	case *url != "":
		if *token == "" {
			*token = getenv("TETHER_LOAD_TOKEN")
		}
		t, err := parseTarget("server="+*url+","+*token+","+pidField(*pid), def, getenv)
		if err != nil {
			return config{}, err
		}
		cfg.targets = []target{t}
	case len(rawTgts) == 0:
		return config{}, errors.New("no server to measure: give -url and -token, or -target")
	}
	names := map[string]bool{}
	for _, s := range rawTgts {
		t, err := parseTarget(s, def, getenv)
		if err != nil {
			return config{}, err
		}
		if names[t.Name] {
			return config{}, fmt.Errorf("%w: two targets named %q", errBadTarget, t.Name)
		}
		names[t.Name] = true
		cfg.targets = append(cfg.targets, t)
	}
	for i, t := range cfg.targets {
		cfg.targets[i].Start = starts[t.Name]
		delete(starts, t.Name)
	}
	for name := range starts {
		return config{}, fmt.Errorf("-start: no target named %q", name)
	}
	return cfg, nil
}

// pidField renders -pid as a target's PID field, empty for none.
func pidField(pid int) string {
	if pid == 0 {
		return ""
	}
	return strconv.Itoa(pid)
}

// A series is one metric of one measurement over all its runs.
type series struct {
	Target string    `json:"target"`
	Mode   string    `json:"mode"`
	Param  string    `json:"param"`
	Metric string    `json:"metric"`
	Unit   string    `json:"unit"`
	Runs   []float64 `json:"runs"`
	Median float64   `json:"median"`
}

// lockedWriter serialises writes to w: the load tool's progress and the
// stderr of the servers it starts share it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	stderr = &lockedWriter{w: stderr}
	cfg, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "tether-load: %v\n", err)
		return 2
	}
	cfg.opts.Warn = stderr
	all, err := measureAll(ctx, cfg, stderr)
	if rerr := report(stdout, all, cfg.json); err == nil {
		err = rerr
	}
	if err != nil {
		fmt.Fprintf(stderr, "tether-load: %v\n", err)
		return 1
	}
	return 0
}

// measureAll runs every measurement cfg asks for and returns the series,
// grouped by mode, parameter and metric, targets side by side. When a
// measurement fails it returns the series completed before it with the
// error.
func measureAll(ctx context.Context, cfg config, progress io.Writer) ([]*series, error) {
	clients := make([]*client, len(cfg.targets))
	for i, t := range cfg.targets {
		c, err := newClient(t, cfg.timeout)
		if err != nil {
			return nil, err
		}
		clients[i] = c
	}
	for _, c := range clients {
		if c.target.Start != "" {
			continue
		}
		if err := warmUp(ctx, c, cfg); err != nil {
			return nil, err
		}
		if slices.Contains(cfg.modes, modeIdle) && cfg.runs > 1 {
			fmt.Fprintf(progress, "warning: %s is not restarted between runs (-start), so idle runs after the first reuse memory its server kept from the one before\n", c.target.Name)
		}
	}

	var out []*series
	for _, mode := range cfg.modes {
		params, key := cfg.cs, "c"
		if mode == modeIdle {
			params, key = cfg.ns, "n"
		}
		for _, p := range params {
			param := key + "=" + strconv.Itoa(p)
			// byMetric[metric][target] is the series being filled.
			var order []string
			byMetric := map[string][]*series{}
			for r := 1; r <= cfg.runs; r++ {
				for ti, c := range clients {
					got, err := measureRun(ctx, cfg, mode, c, p, progress)
					if err != nil {
						return out, fmt.Errorf("%s %s %s run %d: %w", c.target.Name, mode, param, r, err)
					}
					fmt.Fprintf(progress, "run %d/%d %-10s %-9s %-7s %s\n", r, cfg.runs, c.target.Name, mode, param, summary(got))
					for _, m := range got {
						if byMetric[m.Name] == nil {
							order = append(order, m.Name)
							byMetric[m.Name] = make([]*series, len(clients))
						}
						s := byMetric[m.Name][ti]
						if s == nil {
							s = &series{Target: c.target.Name, Mode: mode, Param: param, Metric: m.Name, Unit: m.Unit}
							byMetric[m.Name][ti] = s
						}
						s.Runs = append(s.Runs, m.Value)
					}
				}
			}
			for _, name := range order {
				for _, s := range byMetric[name] {
					if s != nil {
						s.Median = median(s.Runs)
						out = append(out, s)
					}
				}
			}
		}
	}
	return out, nil
}

// warmUp handshakes and pings c's server for cfg.warmup, so that a
// server's first-use costs (JIT compilation, lazy initialisation) fall
// outside the measurements.
func warmUp(ctx context.Context, c *client, cfg config) error {
	if cfg.warmup <= 0 {
		return nil
	}
	w := cfg.opts
	w.Duration = cfg.warmup
	if _, err := measureHandshake(ctx, c, 1, w); err != nil {
		return fmt.Errorf("warm-up of %s: %w", c.target.Name, err)
	}
	if _, err := measureHeartbeat(ctx, c, 1, w); err != nil {
		return fmt.Errorf("warm-up of %s: %w", c.target.Name, err)
	}
	return nil
}

// measureRun runs one measurement of mode with parameter p against c,
// on a freshly started and warmed-up server when c's target has a start
// command.
func measureRun(ctx context.Context, cfg config, mode string, c *client, p int, stderr io.Writer) ([]metric, error) {
	if c.target.Start == "" {
		return measure(ctx, mode, c, p, cfg.opts)
	}
	srv, err := startServer(ctx, c, c.target.Start, stderr)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	if err := warmUp(ctx, c, cfg); err != nil {
		return nil, err
	}
	if mode == modeIdle {
		// Let the server finish the warm-up's clean-up before the baseline.
		if err := sleep(ctx, cfg.opts.Settle); err != nil {
			return nil, err
		}
	}
	return measure(ctx, mode, c, p, cfg.opts)
}

// measure runs one measurement of mode with parameter p against c.
func measure(ctx context.Context, mode string, c *client, p int, o options) ([]metric, error) {
	switch mode {
	case modeIdle:
		return measureIdle(ctx, c, p, o)
	case modeHandshake:
		return measureHandshake(ctx, c, p, o)
	case modeQuiet:
		return measureQuiet(ctx, c, p, o)
	default:
		return measureHeartbeat(ctx, c, p, o)
	}
}

// summary renders one run's metrics on one line.
func summary(metrics []metric) string {
	var b strings.Builder
	for i, m := range metrics {
		if i > 0 {
			b.WriteString("  ")
		}
		fmt.Fprintf(&b, "%s %s %s", m.Name, formatNum(m.Value), m.Unit)
	}
	return b.String()
}

// report prints the series as a table or as JSON lines; nothing for none.
func report(w io.Writer, all []*series, asJSON bool) error {
	if len(all) == 0 {
		return nil
	}
	if asJSON {
		enc := json.NewEncoder(w)
		for _, s := range all {
			if err := enc.Encode(s); err != nil {
				return fmt.Errorf("write JSON: %w", err)
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tMODE\tPARAM\tMETRIC\tUNIT\tMEDIAN\tRUNS")
	for _, s := range all {
		runs := make([]string, len(s.Runs))
		for i, v := range s.Runs {
			runs[i] = formatNum(v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Target, s.Mode, s.Param, s.Metric, s.Unit, formatNum(s.Median), strings.Join(runs, " "))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// formatNum prints v with about four significant digits.
func formatNum(v float64) string {
	a := max(v, -v)
	switch {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}
