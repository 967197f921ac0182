package sandbox_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
)

// reportPercentiles reports the p50 and p99 of lat in microseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkRoundTrip measures command in → first event out: "bridge" is a
// query to the demo agent in a real sandbox (first message: system/init),
// "echo" a line echoed by the same binary over a bare Unix socket, the floor
// the bridge's own overhead sits on.
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("bridge", func(b *testing.B) {
		sb, err := sandbox.Spawn(context.Background(), newSpec(b, "demo"))
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Close()
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if err := sb.Query("benchmark prompt", "s", true); err != nil {
				b.Fatal(err)
			}
			if ev := next(b, sb, 10*time.Second); ev.Ev != sandbox.EvMessage {
				b.Fatalf("first event %+v", ev)
			}
			lat = append(lat, time.Since(start))
			if err := sb.Interrupt(); err != nil {
				b.Fatal(err)
			}
			for ev := next(b, sb, 10*time.Second); ev.Ev != sandbox.EvDone; ev = next(b, sb, 10*time.Second) {
			}
		}
		reportPercentiles(b, lat)
	})
	b.Run("echo", func(b *testing.B) {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		sock := filepath.Join(b.TempDir(), "echo.sock")
		cmd := exec.Command(exe, "echo-server", sock)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		enc, r := sandbox.NewEncoder(conn), bufio.NewReader(conn)
		cmdLine := sandbox.BridgeCommand{Cmd: sandbox.CmdQuery, Prompt: "benchmark prompt", SessionID: "s", IncludePartialMessages: true}
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if err := enc.Encode(cmdLine); err != nil {
				b.Fatal(err)
			}
			if _, err := r.ReadBytes('\n'); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		reportPercentiles(b, lat)
	})
}

// BenchmarkSpawnReady measures Spawn until "ready" for the demo agent, with
// every layer this machine offers, and the teardown after it.
func BenchmarkSpawnReady(b *testing.B) { spawnReady(b, nil) }

// BenchmarkSpawnReadyEgress is BenchmarkSpawnReady for a sandbox with
// egress: the bridge hands its proxy's listener over before it is ready.
func BenchmarkSpawnReadyEgress(b *testing.B) { spawnReady(b, []string{"api.example.com:443"}) }

func spawnReady(b *testing.B, egress []string) {
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		spec := newSpec(b, "demo")
		spec.Egress = egress
		start := time.Now()
		sb, err := sandbox.Spawn(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		sb.Close()
	}
	reportPercentiles(b, lat)
}

// BenchmarkLookAlikes: the search for look-alikes of working directories
// four levels below a temporary directory, among 200 siblings at each
// level: one directory ("one"), and 400 projects side by side in one pass
// ("pass", as the history's list does), each beside os.Stat of the same
// directories, the least a check of them could cost.
func BenchmarkLookAlikes(b *testing.B) {
	dir := b.TempDir()
	for _, level := range []string{"home", "dev", "src"} {
		for i := range 200 {
			if err := os.Mkdir(filepath.Join(dir, level+"-sibling-"+strconv.Itoa(i)), 0o700); err != nil {
				b.Fatal(err)
			}
		}
		dir = filepath.Join(dir, level)
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	work := make([]string, 400)
	for i := range work {
		work[i] = filepath.Join(dir, "project-"+strconv.Itoa(i))
		if err := os.Mkdir(work[i], 0o700); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []int{1, len(work)} {
		name := "one"
		if n > 1 {
			name = "pass"
		}
		b.Run(name+"-walk", func(b *testing.B) {
			for b.Loop() {
				var l sandbox.LookAlikes
				for _, w := range work[:n] {
					if l.Shared(w) {
						b.Fatal("a look-alike found")
					}
				}
			}
		})
		b.Run(name+"-stat", func(b *testing.B) {
			for b.Loop() {
				for _, w := range work[:n] {
					if _, err := os.Stat(w); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
