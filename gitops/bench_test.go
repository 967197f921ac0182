package gitops

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
)

// Size of the generated benchmark repository.
const (
	benchDirs        = 500
	benchFilesPerDir = 100 // 50,000 files
	benchModified    = 200
	benchStaged      = 50
	benchDeleted     = 50
	benchUntracked   = 50
)

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

// benchRepo returns the path of a repository of 50,000 files with a few
// hundred changes, generated once per test process with git fast-import.
func benchRepo(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() { benchDir, benchErr = makeBenchRepo() })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDir
}

// removeBenchRepo deletes the benchmark repository, if one was made.
func removeBenchRepo() {
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
}

func benchFile(d, f int) string { return fmt.Sprintf("d%03d/f%03d.txt", d, f) }

func benchContent(d, f int) string {
	var s strings.Builder
	for i := range 12 {
		fmt.Fprintf(&s, "line %d of file %d in directory %d\n", i, f, d)
	}
	return s.String()
}

func makeBenchRepo() (string, error) {
	dir, err := os.MkdirTemp("", "gitops-bench-")
	if err != nil {
		return "", err
	}
	run := func(stdin []byte, args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Stdin = bytes.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run(nil, "init", "-q", "-b", "main"); err != nil {
		return "", err
	}
	var stream bytes.Buffer
	w := bufio.NewWriter(&stream)
	fmt.Fprintf(w, "commit refs/heads/main\ncommitter Bench <bench@example.com> 1700000000 +0000\ndata 4\nbase\n")
	for d := range benchDirs {
		for f := range benchFilesPerDir {
			c := benchContent(d, f)
			fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", benchFile(d, f), len(c), c)
		}
	}
	w.Flush()
	steps := [][]string{
		{"fast-import", "--quiet"},
		{"config", "user.name", "Bench"},
		{"config", "user.email", "bench@example.com"},
		{"reset", "-q", "--hard", "main"},
	}
	for i, args := range steps {
		var in []byte
		if i == 0 {
			in = stream.Bytes()
		}
		if err := run(in, args...); err != nil {
			return "", err
		}
	}
	// Spread the changes over the tree.
	n := 0
	next := func() (int, int) {
		n++
		return (n * 37) % benchDirs, (n * 11) % benchFilesPerDir
	}
	edit := func(d, f int, extra string) error {
		c := strings.Replace(benchContent(d, f), "line 5 ", "LINE 5 ", 1) + extra
		return os.WriteFile(filepath.Join(dir, benchFile(d, f)), []byte(c), 0o644)
	}
	var staged []string
	for range benchModified {
		d, f := next()
		if err := edit(d, f, ""); err != nil {
			return "", err
		}
	}
	for range benchStaged {
		d, f := next()
		if err := edit(d, f, "staged\n"); err != nil {
			return "", err
		}
		staged = append(staged, benchFile(d, f))
	}
	for range benchDeleted {
		d, f := next()
		if err := os.Remove(filepath.Join(dir, benchFile(d, f))); err != nil {
			return "", err
		}
	}
	for i := range benchUntracked {
		name := filepath.Join(dir, fmt.Sprintf("d%03d", i*7%benchDirs), fmt.Sprintf("new%03d.txt", i))
		if err := os.WriteFile(name, []byte(benchContent(i, i)), 0o644); err != nil {
			return "", err
		}
	}
	if err := run(nil, append([]string{"add", "--"}, staged...)...); err != nil {
		return "", err
	}
	// Refresh the index once, as any git status in a terminal would.
	if err := run(nil, "status", "--porcelain"); err != nil {
		return "", err
	}
	return dir, nil
}

// gitCLI runs git plainly, as a developer would, capturing its output.
func gitCLI(b *testing.B, dir string, args ...string) []byte {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("git %v: %v", args, err)
	}
	return out
}

// cpuTime is the CPU time of this process and of the processes it waited
// for (git, bubblewrap and what they waited for).
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return 0
	}
	var d time.Duration
	for _, tv := range []syscall.Timeval{self.Utime, self.Stime, children.Utime, children.Stime} {
		d += time.Duration(tv.Nano())
	}
	return d
}

// loopCPU runs op in b.Loop and reports, besides the wall time, the CPU
// time all processes spent on one operation (cpu-ms/op): on a loaded
// machine the wall time of git's processes swings with the other
// tenants, the CPU they need much less.
func loopCPU(b *testing.B, op func()) {
	start := cpuTime()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// sandboxed runs every git process as the daemon does: in sandbox.Command,
// the repository read-only; nil without bubblewrap.
func sandboxed(dir string) *Git {
	caps := sandbox.Probe()
	if !caps.Bwrap.Available {
		return nil
	}
	return &Git{Exec: func(ctx context.Context, c Call) (*exec.Cmd, error) {
		spec := sandbox.CommandSpec{Dir: c.Dir, ReadOnly: []string{dir}, Env: c.Env, Capabilities: &caps}
		cmd, _, err := sandbox.Command(ctx, spec, append([]string{"git"}, c.Args...))
		return cmd, err
	}}
}

// BenchmarkStatus compares Status, run directly and sandboxed, with the git
// commands it agrees with, run one after the other, and with a plain git
// status (the reference).
func BenchmarkStatus(b *testing.B) {
	dir := benchRepo(b)
	ctx := context.Background()
	b.Run("impl=gitops-sandboxed", func(b *testing.B) {
		g := sandboxed(dir)
		if g == nil {
			b.Skip("no bubblewrap")
		}
		// No cpu-ms/op: the sandbox's processes are not reaped by this
		// one, so their CPU does not reach its count of children's.
		for b.Loop() {
			if _, err := g.Status(ctx, dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=gitops", func(b *testing.B) {
		loopCPU(b, func() {
			st, err := direct.Status(ctx, dir)
			if err != nil {
				b.Fatal(err)
			}
			if len(st.Changes) < benchModified {
				b.Fatalf("%d changes", len(st.Changes))
			}
		})
	})
	b.Run("impl=go-git", func(b *testing.B) {
		// The list of changes only: go-git has no line counts, so this is
		// less than Status does.
		loopCPU(b, func() {
			st, err := goGitStatus(dir)
			if err != nil {
				b.Fatal(err)
			}
			if len(st) < benchModified {
				b.Fatalf("%d changes", len(st))
			}
		})
	})
	// The reference: a plain status, without the per-file counts
	// Status adds (target: Status within 1.1× of it).
	b.Run("impl=git-status-plain", func(b *testing.B) {
		loopCPU(b, func() { gitCLI(b, dir, "status", "--porcelain=v2") })
	})
	b.Run("impl=git-cli", func(b *testing.B) {
		loopCPU(b, func() {
			gitCLI(b, dir, "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all")
			gitCLI(b, dir, "diff", "--numstat", "-z")
			gitCLI(b, dir, "diff", "--numstat", "-z", "--cached")
		})
	})
}

// BenchmarkDiff compares the unstaged Diff, run directly and sandboxed,
// with a plain `git diff` (the reference: within 1.1× of it; Diff
// also lists the untracked files, which git diff leaves out).
func BenchmarkDiff(b *testing.B) {
	dir := benchRepo(b)
	ctx := context.Background()
	b.Run("impl=gitops-sandboxed", func(b *testing.B) {
		g := sandboxed(dir)
		if g == nil {
			b.Skip("no bubblewrap")
		}
		for b.Loop() { // no cpu-ms/op, as in BenchmarkStatus
			if _, err := g.diffFiles(ctx, dir, nil, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=gitops", func(b *testing.B) {
		loopCPU(b, func() {
			d, err := direct.diffFiles(ctx, dir, nil, false)
			if err != nil {
				b.Fatal(err)
			}
			if len(d) < benchModified {
				b.Fatalf("%d files", len(d))
			}
		})
	})
	b.Run("impl=git-cli", func(b *testing.B) {
		loopCPU(b, func() { gitCLI(b, dir, "diff") })
	})
}

// longHistory makes (once) a repository of 10,000 commits, each changing
// two of 100 small files, with git fast-import.
var (
	historyOnce sync.Once
	historyDir  string
	historyErr  error
)

func longHistory(b *testing.B) string {
	historyOnce.Do(func() {
		historyDir, historyErr = os.MkdirTemp("", "tether-history-")
		if historyErr != nil {
			return
		}
		if out, err := exec.Command("git", "init", "-q", "-b", "main", historyDir).CombinedOutput(); err != nil {
			historyErr = fmt.Errorf("git init: %v %s", err, out)
			return
		}
		var stream bytes.Buffer
		for i := range 10_000 {
			msg := fmt.Sprintf("commit %d\n\nChanges files %d and %d.\n", i, i%100, (i*7)%100)
			fmt.Fprintf(&stream, "commit refs/heads/main\nauthor Dev <dev@example.com> %d +0000\ncommitter Dev <dev@example.com> %d +0000\ndata %d\n%s",
				1_700_000_000+i*60, 1_700_000_000+i*60, len(msg), msg)
			for _, f := range []int{i % 100, (i * 7) % 100} {
				content := fmt.Sprintf("file %d\nrevision %d\nline\nline\n", f, i)
				fmt.Fprintf(&stream, "M 100644 inline f%03d.txt\ndata %d\n%s", f, len(content), content)
			}
			stream.WriteString("\n")
		}
		cmd := exec.Command("git", "fast-import", "--quiet")
		cmd.Dir, cmd.Stdin = historyDir, &stream
		if out, err := cmd.CombinedOutput(); err != nil {
			historyErr = fmt.Errorf("fast-import: %v %s", err, out)
			return
		}
		if out, err := exec.Command("git", "-C", historyDir, "reset", "-q", "--hard").CombinedOutput(); err != nil {
			historyErr = fmt.Errorf("reset: %v %s", err, out)
		}
	})
	if historyErr != nil {
		b.Fatal(historyErr)
	}
	return historyDir
}

// BenchmarkLogFirstPage reads the newest 50 commits of a 10,000-commit
// history with their changed files: Log (git log, here without a sandbox),
// and the same with go-git in-process, in the same run.
func BenchmarkLogFirstPage(b *testing.B) {
	dir := longHistory(b)
	b.Run("git-log", func(b *testing.B) {
		for b.Loop() {
			res, err := (Git{}).Log(context.Background(), dir, "", 50)
			if err != nil || len(res.Commits) != 50 || len(res.Commits[0].Files) != 2 {
				b.Fatalf("%v %+v", err, res)
			}
		}
	})
	b.Run("go-git", func(b *testing.B) {
		for b.Loop() {
			res, err := goGitLog(context.Background(), dir, "", 50)
			if err != nil || len(res.Commits) != 50 || len(res.Commits[0].Files) != 2 {
				b.Fatalf("%v %+v", err, res)
			}
		}
	})
}
