package history

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// The benchmarks run on a generated history of benchSessions Claude Code
// transcripts totalling about benchBytes, in benchProjects projects, made
// once per run of the package (and removed after it) in the lines' shape
// Claude Code 2.1.197 writes (session/testdata): prompts, answers, tool
// calls, and tool results of 2 to 60 KB. One session in 500 mentions
// benchNeedle in a prompt. The lists and reads also have a store of
// benchTether tether sessions (benchStore). Under -short (the test
// script's single run of every benchmark, which checks that they work and
// not what they measure) the history is benchShort times smaller.
//
//	go test -run XXX -bench History -benchtime 5x -count 5 ./history
const (
	benchSessions = 10000
	benchBytes    = 2 << 30
	benchProjects = 400
	benchNeedle   = "flamingo"
	benchTether   = 200
	benchShort    = 50
)

// benchCount is the number of generated transcripts.
func benchCount() int {
	if testing.Short() {
		return benchSessions / benchShort
	}
	return benchSessions
}

var (
	benchOnce sync.Once
	benchHome string
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchHome != "" {
		os.RemoveAll(benchHome)
	}
	os.Exit(code)
}

// benchHistory returns the home of the generated history.
func benchHistory(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		benchHome, benchErr = os.MkdirTemp("", "tether-history-bench-")
		if benchErr == nil {
			benchErr = generate(filepath.Join(benchHome, ".claude", "projects"))
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchHome
}

// generate writes the history's transcripts under projects.
func generate(projects string) error {
	per := benchBytes / benchSessions
	work := make(chan int)
	errs := make(chan error, benchCount())
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range work {
				errs <- writeTranscript(projects, i, per)
			}
		})
	}
	for i := range benchCount() {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func writeTranscript(projects string, i, size int) error {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	cwd := fmt.Sprintf("/home/dev/src/project-%03d", i%benchProjects)
	dir := filepath.Join(projects, strings.ReplaceAll(cwd, "/", "-"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	f, err := os.Create(filepath.Join(dir, id+".jsonl"))
	if err != nil {
		return err
	}
	defer f.Close()
	// Sizes vary around the mean: from a fifth of it to twice it.
	target := size/5 + r.IntN(size*9/5)
	head := fmt.Sprintf(`"isSidechain":false,"userType":"external","entrypoint":"cli","cwd":%q,"sessionId":%q,"version":"2.1.197","gitBranch":"main"`, cwd, id)
	written, n := 0, 0
	minute := 0
	line := func(s string) error {
		k, err := io.WriteString(f, s+"\n")
		written += k
		return err
	}
	for written < target {
		n++
		minute++
		ts := fmt.Sprintf("2026-%02d-%02dT%02d:%02d:00.000Z", 1+i%12, 1+i%28, (minute/60)%24, minute%60)
		prompt := fmt.Sprintf("please look at module %d of project %d and fix what fails", n, i%benchProjects)
		if n == 1 && i%500 == 0 {
			prompt += " in the " + benchNeedle + " handler"
		}
		call := fmt.Sprintf("toolu_%d_%d", i, n)
		result := strings.Repeat("ok  \tgithub.com/example/pkg\t0.012s\n", (2000+r.IntN(60000))/36)
		for _, l := range []string{
			fmt.Sprintf(`{"parentUuid":null,%s,"type":"user","message":{"role":"user","content":%q},"uuid":"u-%d-%d","timestamp":%q,"permissionMode":"default","promptSource":"typed"}`, head, prompt, i, n, ts),
			fmt.Sprintf(`{"parentUuid":"u-%d-%d",%s,"type":"assistant","message":{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":%q}],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":20}},"uuid":"a-%d-%d","timestamp":%q}`, i, n, head, n, strings.Repeat("I'll run the tests first. ", 8+r.IntN(40)), i, n, ts),
			fmt.Sprintf(`{"parentUuid":"a-%d-%d",%s,"type":"assistant","message":{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":%q,"name":"Bash","input":{"command":"go test ./...","description":"Run the tests"}}]},"uuid":"c-%d-%d","timestamp":%q}`, i, n, head, n, call, i, n, ts),
			fmt.Sprintf(`{"parentUuid":"c-%d-%d",%s,"type":"user","message":{"role":"user","content":[{"tool_use_id":%q,"type":"tool_result","content":%q,"is_error":false}]},"uuid":"r-%d-%d","timestamp":%q,"toolUseResult":{"stdout":%q,"stderr":"","interrupted":false}}`, i, n, head, call, result, i, n, ts, result),
		} {
			if err := line(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchStore is a store of benchTether tether sessions: half of them
// claude-code sessions of generated transcripts, half demo sessions with
// 20 logged prompts and answers each.
func benchStore(b *testing.B) *store.Store {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "tether.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	now := time.Now()
	seq := int64(0)
	for i := range benchTether {
		rec := store.Session{ID: fmt.Sprintf("sess-%d", i), Agent: "demo", Source: "sandbox", WorkingDirectory: "/home/dev/src/demo", Title: "demo",
			Status: store.StatusClosed, CreatedAt: now, UpdatedAt: now}
		if i%2 == 0 {
			rec.Agent, rec.AgentSessionID = "claude-code", fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		}
		if err := st.CreateSession(ctx, rec); err != nil {
			b.Fatal(err)
		}
		var events []store.Event
		for j := range 20 {
			seq++
			typ := wire.TypeUserMessage
			if j%2 == 1 {
				typ = wire.TypeStreamStart
			}
			frame := fmt.Appendf(nil, `{"type":%q,"seq":%d,"payload":{"session_id":%q,"content":"prompt %d"}}`, typ, seq, rec.ID, j)
			events = append(events, store.Event{Seq: seq, SessionID: rec.ID, Type: typ, Frame: frame, CreatedAt: now})
		}
		if err := st.AppendEvents(ctx, events, nil); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

func benchIndex(b *testing.B) *Index {
	b.Helper()
	x := New(Config{ClaudeDirs: []string{filepath.Join(benchHistory(b), ".claude")}, Store: benchStore(b)})
	if err := x.Scan(context.Background()); err != nil {
		b.Fatal(err)
	}
	if x.Len() != benchCount() {
		b.Fatalf("indexed %d files", x.Len())
	}
	return x
}

// BenchmarkHistoryIndex: the first scan of the whole history (warm page
// cache), and the memory the index holds after it.
func BenchmarkHistoryIndex(b *testing.B) {
	home := benchHistory(b)
	var x *Index
	for b.Loop() {
		x = New(Config{ClaudeDirs: []string{filepath.Join(home, ".claude")}})
		if err := x.Scan(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	runtime.KeepAlive(x)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(before.HeapAlloc-after.HeapAlloc)/(1<<20), "index-MiB")
}

// BenchmarkHistoryReadAll is the floor of BenchmarkHistoryIndex: every
// byte of every file read, as many at once as the index reads, nothing
// done with it.
func BenchmarkHistoryReadAll(b *testing.B) {
	home := benchHistory(b)
	r := root{SourceClaude, filepath.Join(home, ".claude", "projects")}
	files := New(Config{}).listFiles(r, ".")
	for b.Loop() {
		work := make(chan string)
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				buf := make([]byte, readBuffer)
				for rel := range work {
					f, _, err := session.OpenTranscript(r.dir, rel)
					if err != nil {
						b.Error(err)
						continue
					}
					for {
						if _, err := f.Read(buf); err != nil {
							break
						}
					}
					f.Close()
				}
			})
		}
		for _, rel := range files {
			work <- rel
		}
		close(work)
		wg.Wait()
	}
}

// BenchmarkHistoryFirstPage: the phone's first page (50 sessions).
func BenchmarkHistoryFirstPage(b *testing.B) {
	x := benchIndex(b)
	for b.Loop() {
		p, err := x.List(context.Background(), Query{Limit: 50})
		if err != nil || len(p.Sessions) != 50 || p.Next == "" {
			b.Fatal(len(p.Sessions), err)
		}
	}
}

// BenchmarkHistorySearch: a search whose word is in 20 sessions' prompts.
func BenchmarkHistorySearch(b *testing.B) {
	x := benchIndex(b)
	for b.Loop() {
		p, err := x.List(context.Background(), Query{Text: benchNeedle, Limit: 50})
		if err != nil || len(p.Sessions) != (benchCount()+499)/500 {
			b.Fatal(len(p.Sessions), err)
		}
	}
}

// BenchmarkHistoryUpdate: a line appended to one transcript, read in.
func BenchmarkHistoryUpdate(b *testing.B) {
	x := benchIndex(b)
	r := root{SourceClaude, filepath.Join(benchHistory(b), ".claude", "projects")}
	rel := x.listFiles(r, ".")[0]
	f, err := os.OpenFile(filepath.Join(r.dir, rel), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for b.Loop() {
		f.WriteString(`{"type":"user","message":{"role":"user","content":"one more"},"uuid":"m","timestamp":"2026-12-01T00:00:00Z"}` + "\n")
		x.update(r, rel)
	}
}

// BenchmarkHistoryRead: the newest page (200 events) of a transcript of
// about the mean size.
func BenchmarkHistoryRead(b *testing.B) {
	x := benchIndex(b)
	p, err := x.List(context.Background(), Query{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c, err := x.Read(context.Background(), p.Sessions[0].ID, 0, 200)
		if err != nil || len(c.Frames) == 0 {
			b.Fatal(len(c.Frames), err)
		}
	}
}
