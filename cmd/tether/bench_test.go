package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/wire"
)

// percentiles reports p50 and p99 of durations as custom metrics.
func percentiles(b *testing.B, name string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	b.ReportMetric(float64(at(0.50).Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(at(0.99).Microseconds()), name+"-p99-µs")
}

// BenchmarkHotPath measures a phone's message frame in to the first
// streamed text frame out over wss, through the daemon, the sandboxed
// bridge and the demo agent (its first chunk is not delayed) ("daemon"),
// and, in the same run, the sandboxed bridge and demo agent alone: query
// command in to the first text delta out over the Unix socket ("bridge").
// The daemon's share is the difference.
func BenchmarkHotPath(b *testing.B) {
	b.Run("daemon", benchDaemonHotPath)
	b.Run("bridge", benchBridgeHotPath)
}

func benchBridgeHotPath(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	caps := sandbox.Probe()
	// The same agent state as the daemon's sessions: the demo agent saves
	// its transcript there before it answers.
	sb, err := sandbox.Spawn(context.Background(), sandbox.Spec{ID: "benchhot", Executable: exe, Agent: "demo",
		WorkDir: b.TempDir(), StateDir: b.TempDir(), Capabilities: &caps})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := sb.Query("hi", "s", true); err != nil {
			b.Fatal(err)
		}
		for ev := range sb.Events() {
			if ev.Ev == sandbox.EvMessage && strings.Contains(string(ev.Data), `"text_delta"`) {
				break
			}
		}
		lat = append(lat, time.Since(start))
		for ev := range sb.Events() {
			if ev.Ev == sandbox.EvDone {
				break
			}
		}
	}
	b.StopTimer()
	percentiles(b, "first-delta", lat)
}

func benchDaemonHotPath(b *testing.B) {
	d := newDaemon(b)
	c, _ := d.phone(nil)
	const id = "hot"
	c.Send(wire.TypeSessionStart, "s", map[string]any{"agent": "demo", "session_id": id, "working_directory": d.project, "policy": "auto_approve"})
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		c.Send(wire.TypeMessage, fmt.Sprintf("m%d", i), map[string]any{"session_id": id, "content": "hi"})
		c.WaitFor(wire.TypeStreamChunk, nil, nil)
		lat = append(lat, time.Since(start))
		c.WaitFor(wire.TypeSessionStatus, nil, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), `"idle"`) })
		c.Seen = nil
	}
	b.StopTimer()
	percentiles(b, "first-chunk", lat)
}

// BenchmarkSessionStart measures session_start to session_ready with the
// full sandbox (bubblewrap, cgroup, rlimits where the machine has them).
func BenchmarkSessionStart(b *testing.B) {
	d := newDaemon(b)
	c, _ := d.phone(nil)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("start-%d", i)
		start := time.Now()
		c.Send(wire.TypeSessionStart, id, map[string]any{"agent": "demo", "session_id": id, "working_directory": d.project})
		c.WaitFor(wire.TypeSessionReady, nil, func(e wire.Envelope) bool { return e.ID == id })
		lat = append(lat, time.Since(start))
		b.StopTimer()
		c.Send(wire.TypeSessionEnd, "", map[string]any{"session_id": id})
		c.WaitFor(wire.TypeSessionEnd, nil, nil)
		c.Seen = nil
		b.StartTimer()
	}
	b.StopTimer()
	percentiles(b, "ready", lat)
}

// BenchmarkFileRoundTrip measures file_list of a 1,000-entry directory and
// file_read of a 100 KiB file over wss, request frame out to reply frame in.
func BenchmarkFileRoundTrip(b *testing.B) {
	d := newDaemon(b)
	big := filepath.Join(d.project, "big")
	os.MkdirAll(big, 0o755)
	for i := range 1000 {
		os.WriteFile(filepath.Join(big, fmt.Sprintf("file-%04d.txt", i)), []byte("x\n"), 0o644)
	}
	os.WriteFile(filepath.Join(d.project, "100k.txt"), []byte(strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n", 1600)), 0o644)
	c, _ := d.phone(nil)
	c.Send(wire.TypeSessionStart, "s", map[string]any{"agent": "demo", "session_id": "files", "working_directory": d.project})
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	for _, tt := range []struct {
		name, typ, reply string
		payload          map[string]any
		size             int // the least a reply holds
	}{
		{"list1000", wire.TypeFileList, wire.TypeFileListResponse, map[string]any{"session_id": "files", "path": "big"}, 1000 * len(`{"name":"file-0000.txt"}`)},
		{"read100KiB", wire.TypeFileRead, wire.TypeFileReadResponse, map[string]any{"session_id": "files", "path": "100k.txt"}, 100 << 10},
	} {
		b.Run(tt.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			// The client reads each frame into the same buffer:
			// ReadMessage's growing of a new one for each reply made
			// more garbage than the daemon, and both share this
			// process's collector, which a phone's client does not.
			var buf bytes.Buffer
			for i := range b.N {
				id := fmt.Sprintf("%s-%d", tt.name, i)
				// The reply is recognised by its first bytes, not decoded:
				// decoding 100 KiB of JSON in the test's client took twice
				// as long as the daemon's whole answer.
				want := []byte(`{"type":"` + tt.reply + `","id":"` + id + `"`)
				start := time.Now()
				c.Send(tt.typ, id, tt.payload)
				var reply []byte
				for !bytes.HasPrefix(reply, want) {
					_, r, err := c.WS.NextReader()
					if err != nil {
						b.Fatal(err)
					}
					buf.Reset()
					if _, err := buf.ReadFrom(r); err != nil {
						b.Fatal(err)
					}
					reply = buf.Bytes()
				}
				lat = append(lat, time.Since(start))
				if i == 0 && len(reply) < tt.size {
					b.Fatalf("%s: a reply of %d bytes", tt.name, len(reply))
				}
			}
			percentiles(b, "round-trip", lat)
		})
	}
}

// BenchmarkTimeToPair measures what a new user waits for on a LAN: from
// `tether serve` with its defaults (a fresh data directory, --listen auto)
// to a phone paired with the code of the QR code the banner shows, the
// phone dialing the advertised LAN address and pinning the printed
// fingerprint. The user types one command and scans once; nothing else is
// needed, which the benchmark checks by using only the banner's output.
// It includes making the certificate and the database.
func BenchmarkTimeToPair(b *testing.B) {
	lan, ok := routeAddr()
	if !ok {
		b.Skip("this machine has no default route: no address a phone could use")
	}
	link := regexp.MustCompile(`open: +(https://\S+)/#pair=(\S+)`)
	var took []time.Duration
	for range b.N {
		root := b.TempDir()
		env := []string{"TETHER_DATA=" + filepath.Join(root, "data"), "HOME=" + root, "TETHER_ROOT=" + root}
		start := time.Now()
		info, stdout, stop := startDaemon(b, env, "--listen", "auto:0")
		m := link.FindStringSubmatch(stdout.String())
		if m == nil || !strings.Contains(m[1], lan.String()) {
			b.Fatalf("the banner shows no LAN pairing link:\n%s", stdout)
		}
		ws := strings.Replace(m[1], "https://", "wss://", 1) + "/ws"
		c := wstest.Dial(b, wstest.PinnedDialer(info.Fingerprint), ws, nil)
		if env := c.Auth(m[2], nil); env.Type != wire.TypeConnectionAck {
			b.Fatalf("pairing with the banner's code: %s %s", env.Type, env.Payload)
		}
		took = append(took, time.Since(start))
		c.Close()
		stop()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "serve-to-paired-ms-p50")
}
