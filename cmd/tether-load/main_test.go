package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const testFP = "sha256:12f42fcd1fdf6da6d74229ec773d1c6dc36ef3236a79fd7622fa7f59b8137282"

func TestParseTarget(t *testing.T) {
	t.Parallel()
	fp, err := parseFingerprint(testFP)
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.Repeat([]byte{0xab}, sha256.Size)
	env := map[string]string{"TOK": "from-env"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		in   string
		def  tlsDefaults
		want target
		err  bool
	}{
		{in: "node=wss://127.0.0.1:8443/ws,tok", def: tlsDefaults{Insecure: true},
			want: target{Name: "node", URL: "wss://127.0.0.1:8443/ws", Token: "tok", Insecure: true}},
		{in: "t=wss://[::1]:7420/ws,tok,1234", def: tlsDefaults{Fingerprint: other},
			want: target{Name: "t", URL: "wss://[::1]:7420/ws", Token: "tok", PID: 1234, Fingerprint: other}},
		{in: "t=wss://h:1/ws,env:TOK,," + testFP, def: tlsDefaults{Insecure: true},
			want: target{Name: "t", URL: "wss://h:1/ws", Token: "from-env", Fingerprint: fp}},
		{in: "t=wss://h:1/ws,tok,7,insecure", def: tlsDefaults{Fingerprint: other},
			want: target{Name: "t", URL: "wss://h:1/ws", Token: "tok", PID: 7, Insecure: true}},
		{in: "plain=ws://127.0.0.1:8080/ws,tok,42",
			want: target{Name: "plain", URL: "ws://127.0.0.1:8080/ws", Token: "tok", PID: 42}},
		{in: "wss://h:1/ws,tok", err: true},
		{in: "=wss://h:1/ws,tok", err: true},
		{in: "t=wss://h:1/ws", err: true},
		{in: "t=http://h:1/ws,tok", err: true},
		{in: "t=wss:///ws,tok", err: true},
		{in: "t=wss://h:1/ws,", err: true},
		{in: "t=wss://h:1/ws,env:UNSET", err: true},
		{in: "t=wss://h:1/ws,tok,abc", err: true},
		{in: "t=wss://h:1/ws,tok,-3", err: true},
		{in: "t=wss://h:1/ws,tok,1,sha256:abcd", err: true},
		{in: "t=wss://h:1/ws,tok,1,md5:" + strings.Repeat("0", 64), err: true},
		{in: "t=wss://h:1/ws,tok,1,insecure,extra", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseTarget(tt.in, tt.def, getenv)
			if tt.err {
				if !errors.Is(err, errBadTarget) {
					t.Fatalf("parseTarget(%q) = %+v, %v; want errBadTarget", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseTarget(%q): %v", tt.in, err)
			}
			if got.Name != tt.want.Name || got.URL != tt.want.URL || got.Token != tt.want.Token ||
				got.PID != tt.want.PID || got.Insecure != tt.want.Insecure || !bytes.Equal(got.Fingerprint, tt.want.Fingerprint) {
				t.Errorf("parseTarget(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseFingerprintForms(t *testing.T) {
	t.Parallel()
	want, err := parseFingerprint(testFP)
	if err != nil {
		t.Fatal(err)
	}
	hexPart := strings.TrimPrefix(testFP, "sha256:")
	var pairs []string
	for i := 0; i < len(hexPart); i += 2 {
		pairs = append(pairs, strings.ToUpper(hexPart[i:i+2]))
	}
	got, err := parseFingerprint("sha256:" + strings.Join(pairs, ":"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("openssl-style fingerprint = %x, %v; want %x", got, err, want)
	}
	if _, err := parseFingerprint(hexPart); err == nil {
		t.Error("fingerprint without sha256: prefix accepted")
	}
}

func TestParseInts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []int
		err  bool
	}{
		{in: "1000,10000", want: []int{1000, 10000}},
		{in: " 1, 32", want: []int{1, 32}},
		{in: "5", want: []int{5}},
		{in: "", err: true},
		{in: "1,,2", err: true},
		{in: "0", err: true},
		{in: "-1", err: true},
		{in: "1k", err: true},
	}
	for _, tt := range tests {
		got, err := parseInts(tt.in)
		if (err != nil) != tt.err || !slices.Equal(got, tt.want) {
			t.Errorf("parseInts(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", []time.Duration{7}, 99, 7},
		{"p50 of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p100 of 1..100", hundred, 100, 100 * time.Millisecond},
		{"p1 of 1..100", hundred, 1, time.Millisecond},
		{"p50 of four", []time.Duration{1, 2, 3, 4}, 50, 2},
		{"p51 of four", []time.Duration{1, 2, 3, 4}, 51, 3},
		{"p99 of four", []time.Duration{1, 2, 3, 4}, 99, 4},
		{"p0 clamps to the smallest", []time.Duration{1, 2, 3}, 0, 1},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: percentile(p=%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, -2, 7, 7, 1}, 7},
		{[]float64{812.5, 790, 805.25, 1200, 400}, 805.25},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.in)
		if got := median(in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("median reordered its input: %v", in)
		}
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
}

func TestParseVmRSS(t *testing.T) {
	t.Parallel()
	status := "Name:\tnode\nVmPeak:\t  999 kB\nVmRSS:\t  102400 kB\nRssAnon:\t 1 kB\n"
	got, err := parseVmRSS([]byte(status))
	if err != nil || got != 100<<20 {
		t.Errorf("parseVmRSS = %d, %v; want %d", got, err, 100<<20)
	}
	if _, err := parseVmRSS([]byte("Name:\tkthreadd\n")); !errors.Is(err, errNoField) {
		t.Errorf("status without VmRSS: err = %v, want errNoField", err)
	}
	if _, err := parseVmRSS([]byte("VmRSS:\t12 MB\n")); !errors.Is(err, errNoField) {
		t.Errorf("VmRSS in MB: err = %v, want errNoField", err)
	}
}

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses, utime 250 and stime 50 ticks.
	stat := "4242 (my (odd) server) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 11 0 100 1000000 2500"
	got, err := parseStatCPU([]byte(stat))
	if want := 3 * time.Second; err != nil || got != want {
		t.Errorf("parseStatCPU = %v, %v; want %v", got, err, want)
	}
	if _, err := parseStatCPU([]byte("4242 (x) S 1 2")); !errors.Is(err, errNoField) {
		t.Errorf("short stat: err = %v, want errNoField", err)
	}
	self, err := procCPU(os.Getpid())
	if err != nil || self < 0 {
		t.Errorf("procCPU(self) = %v, %v", self, err)
	}
}

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// user 100, nice 10, system 50, idle 9999, iowait 7, irq 1, softirq 2, steal 37.
	stat := "cpu  100 10 50 9999 7 1 2 37 0 0\ncpu0 50 5 25 5000 3 0 1 18 0 0\n"
	got, err := parseProcStat([]byte(stat))
	if want := 2 * time.Second; err != nil || got != want {
		t.Errorf("parseProcStat = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 x 3 4 5 6 7 8\n", "cpu 1 -2 3 4 5 6 7 8\n"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
	if _, err := machineCPU(); err != nil {
		t.Errorf("machineCPU: %v", err)
	}
}

func TestParseCtxSwitches(t *testing.T) {
	t.Parallel()
	status := "Name:\tx\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t 3\n"
	if got, err := parseCtxSwitches([]byte(status)); err != nil || got != 123 {
		t.Errorf("parseCtxSwitches = %d, %v; want 123", got, err)
	}
	for _, bad := range []string{"", "voluntary_ctxt_switches:\t1\n", "voluntary_ctxt_switches:\tx\nnonvoluntary_ctxt_switches:\t1\n", "voluntary_ctxt_switches:\t-1\nnonvoluntary_ctxt_switches:\t1\n"} {
		if _, err := parseCtxSwitches([]byte(bad)); err == nil {
			t.Errorf("parseCtxSwitches(%q) accepted", bad)
		}
	}
	if cpu, n, err := threadStats(os.Getpid()); err != nil || n <= 0 || cpu <= 0 {
		t.Errorf("threadStats(self) = %v, %d, %v", cpu, n, err)
	}
	if ns, err := parseSchedstat([]byte("123456 789 10\n")); err != nil || ns != 123456 {
		t.Errorf("parseSchedstat = %v, %v", ns, err)
	}
	for _, bad := range []string{"", "x 1 2", "-5 1 2"} {
		if _, err := parseSchedstat([]byte(bad)); err == nil {
			t.Errorf("parseSchedstat(%q) accepted", bad)
		}
	}
}

func TestParseOpenFileLimit(t *testing.T) {
	t.Parallel()
	limits := "Limit                     Soft Limit           Hard Limit           Units\n" +
		"Max processes             95000                95000                processes\n" +
		"Max open files            1024                 524288               files\n"
	if got, err := parseOpenFileLimit([]byte(limits)); err != nil || got != 1024 {
		t.Errorf("parseOpenFileLimit = %d, %v; want 1024", got, err)
	}
	unl := strings.Replace(limits, "1024 ", "unlimited ", 1)
	if got, err := parseOpenFileLimit([]byte(unl)); err != nil || got != math.MaxInt64 {
		t.Errorf("unlimited: parseOpenFileLimit = %d, %v", got, err)
	}
	if _, err := parseOpenFileLimit([]byte("Max processes 1 1 processes\n")); !errors.Is(err, errNoField) {
		t.Errorf("no open-files line: err = %v, want errNoField", err)
	}
}

func TestPingFrame(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 16, 10, 32, 0, 5000, time.UTC)
	var e struct {
		Type      string         `json:"type"`
		ID        string         `json:"id"`
		Timestamp time.Time      `json:"timestamp"`
		Payload   map[string]any `json:"payload"`
	}
	buf := pingFrame(make([]byte, 0, 8), "p3-17", now)
	if err := json.Unmarshal(buf, &e); err != nil {
		t.Fatalf("pingFrame is not JSON: %s: %v", buf, err)
	}
	if e.Type != "heartbeat_ping" || e.ID != "p3-17" || !e.Timestamp.Equal(now) || e.Payload == nil || len(e.Payload) != 0 {
		t.Errorf("pingFrame = %s", buf)
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		if k == "TETHER_LOAD_TOKEN" {
			return "envtok"
		}
		return ""
	}
	cfg, err := parseFlags([]string{"-url", "wss://127.0.0.1:7420/ws", "-pid", "99", "-insecure", "-mode", "idle,heartbeat", "-n", "10,20", "-start", "server=sleep 1"}, getenv, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := target{Name: "server", URL: "wss://127.0.0.1:7420/ws", Token: "envtok", PID: 99, Insecure: true, Start: "sleep 1"}
	if len(cfg.targets) != 1 || fmt.Sprint(cfg.targets[0]) != fmt.Sprint(want) {
		t.Errorf("targets = %+v, want [%+v]", cfg.targets, want)
	}
	if !slices.Equal(cfg.modes, []string{"idle", "heartbeat"}) || !slices.Equal(cfg.ns, []int{10, 20}) || !slices.Equal(cfg.cs, []int{1, 32}) || cfg.runs != 5 {
		t.Errorf("config = %+v", cfg)
	}

	// -fp given after -target still applies to it.
	cfg, err = parseFlags([]string{"-target", "a=wss://h:1/ws,t", "-target", "b=ws://h:2/ws,t,5", "-fp", testFP}, getenv, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.targets) != 2 || cfg.targets[0].Fingerprint == nil || cfg.targets[1].PID != 5 {
		t.Errorf("targets = %+v", cfg.targets)
	}

	bad := [][]string{
		{},
		{"-url", "wss://h:1/ws", "-target", "a=wss://h:1/ws,t"},
		{"-target", "a=wss://h:1/ws,t", "-target", "a=wss://h:2/ws,t"},
		{"-target", "a=wss://h:1/ws,t", "-start", "b=sleep 1"},
		{"-target", "a=wss://h:1/ws,t", "-mode", "soak"},
		{"-target", "a=wss://h:1/ws,t", "-c", "0"},
		{"-target", "a=wss://h:1/ws,t", "-runs", "0"},
		{"-target", "a=wss://h:1/ws,t", "-fp", "sha256:00"},
		{"-target", "a=wss://h:1/ws,t", "stray"},
	}
	for _, args := range bad {
		if _, err := parseFlags(args, func(string) string { return "" }, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, getenv, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-target") {
		t.Errorf("-h: err %v, usage %q", err, help.String())
	}
}

// testToken is the device token the in-process protocol server accepts.
const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// protocolServer is a small server of the protocol's connection subset,
// standing in for tether's bridge: auth, connection_ack or
// connection_error, heartbeat_ping and heartbeat_pong.
func protocolServer(t *testing.T) *httptest.Server {
	t.Helper()
	return protocolServerDropping(t, 0)
}

// protocolServerDropping is protocolServer, but when drop is positive it
// closes each connection that long after its connection_ack.
func protocolServerDropping(t *testing.T, drop time.Duration) *httptest.Server {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		var in struct {
			Type    string `json:"type"`
			ID      string `json:"id"`
			Payload struct {
				Token string `json:"token"`
			} `json:"payload"`
		}
		if err := conn.ReadJSON(&in); err != nil {
			return
		}
		if in.Type != "auth" || in.Payload.Token != testToken {
			conn.WriteJSON(map[string]any{"type": "connection_error", "id": in.ID,
				"payload": map[string]string{"code": "AUTH_FAILED", "message": "Invalid or expired token"}})
			return
		}
		// An unsolicited frame before the ack, which clients must skip.
		conn.WriteJSON(map[string]any{"type": "notification", "payload": map[string]string{}})
		conn.WriteJSON(map[string]any{"type": "connection_ack", "id": in.ID, "payload": map[string]any{"connection_mode": "local_only"}})
		if drop > 0 {
			time.AfterFunc(drop, func() { conn.Close() })
		}
		for {
			if err := conn.ReadJSON(&in); err != nil {
				return
			}
			if in.Type == "heartbeat_ping" {
				conn.WriteJSON(map[string]any{"type": "heartbeat_pong", "id": in.ID, "payload": map[string]any{}})
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// runJSON runs the tool with -json and returns its series by
// "mode param metric".
func runJSON(t *testing.T, args ...string) map[string]series {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), append(args, "-json"), os.Getenv, &stdout, &stderr); code != 0 {
		t.Fatalf("run %q = %d\nstderr: %s", args, code, stderr.String())
	}
	out := map[string]series{}
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var s series
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("output is not JSON lines: %v", err)
		}
		out[s.Target+" "+s.Mode+" "+s.Param+" "+s.Metric] = s
	}
	return out
}

func TestModesAgainstServer(t *testing.T) {
	t.Parallel()
	srv := protocolServer(t)
	url := "wss" + strings.TrimPrefix(srv.URL, "https") + "/ws"
	fp := fmt.Sprintf("sha256:%x", sha256.Sum256(srv.Certificate().Raw))
	out := runJSON(t,
		"-target", fmt.Sprintf("go=%s,%s,%d,%s", url, testToken, os.Getpid(), fp),
		"-mode", "idle,handshake,heartbeat,quiet", "-n", "20", "-c", "1,3", "-d", "200ms",
		"-runs", "2", "-settle", "50ms", "-idle-ping", "10ms", "-warmup", "50ms")

	for _, key := range []string{"handshake c=1", "handshake c=3", "heartbeat c=1", "heartbeat c=3"} {
		rate, ok := out["go "+key+" rate"]
		if !ok || len(rate.Runs) != 2 || rate.Median <= 0 || rate.Unit != "1/s" {
			t.Errorf("%s rate = %+v", key, rate)
		}
		if e := out["go "+key+" errors"]; e.Median != 0 || len(e.Runs) != 2 {
			t.Errorf("%s errors = %+v", key, e)
		}
		p50, p99 := out["go "+key+" p50"], out["go "+key+" p99"]
		if p50.Median <= 0 || p99.Median < p50.Median {
			t.Errorf("%s p50 %v, p99 %v", key, p50.Median, p99.Median)
		}
		if strings.HasPrefix(key, "handshake") {
			if a := out["go "+key+" auth_ack_p50"]; a.Median <= 0 || a.Median > p50.Median {
				t.Errorf("%s auth_ack_p50 %v, p50 %v", key, a.Median, p50.Median)
			}
		}
		if cpu := out["go "+key+" client_cpu"]; cpu.Median <= 0 {
			t.Errorf("%s client_cpu = %+v", key, cpu)
		}
	}
	if kib, ok := out["go idle n=20 kib_per_conn"]; !ok || len(kib.Runs) != 2 || kib.Unit != "KiB" {
		t.Errorf("idle kib_per_conn = %+v", kib)
	}
	if rss := out["go idle n=20 rss_after"]; rss.Median <= 0 {
		t.Errorf("idle rss_after = %+v", rss)
	}
	// The server is this process: its pings make it switch.
	for _, key := range []string{"quiet c=1", "quiet c=3"} {
		if cs := out["go "+key+" ctx_switches"]; len(cs.Runs) != 2 || cs.Median <= 0 || cs.Unit != "count" {
			t.Errorf("%s ctx_switches = %+v", key, cs)
		}
		if cpu, ok := out["go "+key+" server_cpu_ms"]; !ok || cpu.Median < 0 || cpu.Unit != "ms" {
			t.Errorf("%s server_cpu_ms = %+v", key, cpu)
		}
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	srv := protocolServer(t)
	url := "wss" + strings.TrimPrefix(srv.URL, "https") + "/ws"
	fp := fmt.Sprintf("sha256:%x", sha256.Sum256(srv.Certificate().Raw))
	tests := []struct {
		name, target, mode, wantErr string
	}{
		{"wrong token", "go=" + url + ",nottoken,," + fp, "handshake", "server refused auth: AUTH_FAILED"},
		{"wrong token, heartbeat", "go=" + url + ",nottoken,," + fp, "heartbeat", "server refused auth: AUTH_FAILED"},
		{"wrong fingerprint", "go=" + url + "," + testToken + ",," + testFP, "handshake", "certificate fingerprint mismatch"},
		{"no certificate check", "go=" + url + "," + testToken, "handshake", "wss needs a certificate check"},
		{"idle without PID", "go=" + url + "," + testToken + ",,insecure", "idle", "idle mode needs the server's PID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), []string{"-target", tt.target, "-mode", tt.mode, "-n", "2", "-c", "1",
				"-d", "100ms", "-runs", "1", "-warmup", "0", "-timeout", "2s"}, os.Getenv, &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), tt.wantErr)
			}
		})
	}
}

func TestAlternatesTargets(t *testing.T) {
	t.Parallel()
	var args []string
	for _, name := range []string{"a", "b"} {
		srv := protocolServer(t)
		url := "wss" + strings.TrimPrefix(srv.URL, "https") + "/ws"
		args = append(args, "-target", name+"="+url+","+testToken+",,insecure")
	}
	var stdout, stderr bytes.Buffer
	args = append(args, "-mode", "heartbeat", "-c", "1", "-d", "50ms", "-runs", "3", "-warmup", "0")
	if code := run(t.Context(), args, os.Getenv, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var order []string
	for line := range strings.Lines(stderr.String()) {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "run" {
			order = append(order, f[1]+" "+f[2])
		}
	}
	want := []string{"1/3 a", "1/3 b", "2/3 a", "2/3 b", "3/3 a", "3/3 b"}
	if !slices.Equal(order, want) {
		t.Errorf("run order %q, want %q", order, want)
	}
	// The table puts the targets of one metric side by side.
	var rows []string
	for line := range strings.Lines(stdout.String()) {
		if f := strings.Fields(line); len(f) > 3 && f[3] == "rate" {
			rows = append(rows, f[0])
		}
	}
	if !slices.Equal(rows, []string{"a", "b"}) {
		t.Errorf("rate rows %q, want a then b:\n%s", rows, stdout.String())
	}
}

func TestIdleNoticesDroppedConnections(t *testing.T) {
	t.Parallel()
	srv := protocolServerDropping(t, 20*time.Millisecond)
	url := "wss" + strings.TrimPrefix(srv.URL, "https") + "/ws"
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"-target", fmt.Sprintf("go=%s,%s,%d,insecure", url, testToken, os.Getpid()),
		"-mode", "idle", "-n", "10", "-settle", "200ms", "-runs", "1", "-warmup", "0"}, os.Getenv, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "the server closed 10 of 10 idle connections") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestKeepsResultsBeforeAFailure(t *testing.T) {
	t.Parallel()
	srv := protocolServerDropping(t, 20*time.Millisecond)
	url := "wss" + strings.TrimPrefix(srv.URL, "https") + "/ws"
	var stdout, stderr bytes.Buffer
	// Handshakes succeed; then idle fails, as the server drops idle connections.
	code := run(t.Context(), []string{"-target", fmt.Sprintf("go=%s,%s,%d,insecure", url, testToken, os.Getpid()),
		"-mode", "handshake,idle", "-c", "1", "-d", "50ms", "-n", "5", "-settle", "200ms", "-runs", "1", "-warmup", "0", "-json"},
		os.Getenv, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "idle connections") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	var s series
	if err := json.NewDecoder(&stdout).Decode(&s); err != nil || s.Mode != "handshake" || s.Metric != "rate" || s.Median <= 0 {
		t.Errorf("first result %+v, %v; want the handshake rate", s, err)
	}
}

func TestTableOutput(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	all := []*series{
		{Target: "node", Mode: "heartbeat", Param: "c=32", Metric: "rate", Unit: "1/s", Runs: []float64{40000, 42000.4, 41000}, Median: 41000},
		{Target: "tether", Mode: "heartbeat", Param: "c=32", Metric: "rate", Unit: "1/s", Runs: []float64{50000, 52000, 51000}, Median: 51000},
	}
	if err := report(&b, all, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TARGET") ||
		strings.Join(strings.Fields(lines[1]), " ") != "node heartbeat c=32 rate 1/s 41000 40000 42000 41000" {
		t.Errorf("table:\n%s", b.String())
	}
}

func FuzzParseTarget(f *testing.F) {
	f.Add("node=wss://127.0.0.1:8443/ws,tok,123," + testFP)
	f.Add("t=ws://h:1/ws,env:TOK,,insecure")
	f.Add("x=wss://[::1]:1/,a,b,c,d")
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := parseTarget(s, tlsDefaults{}, func(string) string { return "v" })
		if err != nil {
			return
		}
		if tg.Name == "" || tg.Token == "" || tg.PID < 0 || checkURL(tg.URL) != nil {
			t.Errorf("parseTarget(%q) accepted %+v", s, tg)
		}
		if tg.Fingerprint != nil && (len(tg.Fingerprint) != sha256.Size || tg.Insecure) {
			t.Errorf("parseTarget(%q): fingerprint %x, insecure %v", s, tg.Fingerprint, tg.Insecure)
		}
	})
}

func FuzzParseStatCPU(f *testing.F) {
	f.Add([]byte("4242 (my (odd) server) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 11 0 100"))
	f.Add([]byte("1 () R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseStatCPU(b)
		if err == nil && d%(time.Second/userHZ) != 0 {
			t.Errorf("parseStatCPU(%q) = %v, not a whole number of ticks", b, d)
		}
	})
}

func FuzzParseCtxSwitches(f *testing.F) {
	f.Add([]byte("voluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := parseCtxSwitches(b); err == nil && n < 0 {
			t.Errorf("parseCtxSwitches(%q) = %d", b, n)
		}
	})
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("cpu  100 10 50 9999 7 1 2 37 0 0\ncpu0 50 5 25 5000 3 0 1 18 0 0\n"))
	f.Add([]byte("cpu 1 2 3 4 5 6 7 8"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseProcStat(b)
		if err == nil && (d < 0 || d%(time.Second/userHZ) != 0) {
			t.Errorf("parseProcStat(%q) = %v, not a whole, non-negative number of ticks", b, d)
		}
	})
}

// TestMinimalServer: the minimal reference server takes its token and
// nothing else, and serves every mode.
func TestMinimalServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(minimalHandler(testToken))
	t.Cleanup(srv.Close)
	url := "wss" + strings.TrimPrefix(srv.URL, "https") + "/ws"
	fp := fmt.Sprintf("sha256:%x", sha256.Sum256(srv.Certificate().Raw))
	out := runJSON(t,
		"-target", fmt.Sprintf("min=%s,%s,,%s", url, testToken, fp),
		"-mode", "handshake,heartbeat", "-c", "2", "-d", "100ms", "-runs", "1", "-warmup", "0")
	for _, key := range []string{"handshake c=2", "heartbeat c=2"} {
		if rate := out["min "+key+" rate"]; rate.Median <= 0 {
			t.Errorf("%s rate = %+v", key, rate)
		}
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-target", fmt.Sprintf("min=%s,wrong,,%s", url, fp), "-mode", "handshake", "-c", "1", "-d", "100ms", "-runs", "1", "-warmup", "0"},
		func(string) string { return "" }, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "AUTH_FAILED") {
		t.Errorf("a wrong token: exit %d, %s", code, stderr.String())
	}
}
