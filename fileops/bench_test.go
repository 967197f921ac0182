package fileops

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cpuTime returns the CPU time (user and system, all threads) the process
// has used. Reported per operation beside ns/op, it shows the cost of an
// operation apart from the waiting that a shared, loaded machine adds.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// benchList builds a directory of 900 files and 100 directories.
func benchList(b *testing.B) *Root {
	b.Helper()
	dir := b.TempDir()
	for i := range 1000 {
		p := filepath.Join(dir, fmt.Sprintf("entry_%04d.go", i))
		var err error
		if i%10 == 0 {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, []byte("package x\n"), 0o644)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	r, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}

// benchRead builds a 100 KiB file of source-like lines.
func benchRead(b *testing.B) *Root {
	b.Helper()
	var sb strings.Builder
	for i := 0; sb.Len() < 100<<10; i++ {
		fmt.Fprintf(&sb, "\tif err := doSomething(ctx, %d); err != nil { return err }\n", i)
	}
	return openWith(b, "main.go", []byte(sb.String()[:100<<10]))
}

func BenchmarkList1000(b *testing.B) {
	r := benchList(b)
	b.ReportAllocs()
	defer reportCPU(b, cpuTime(b))
	for b.Loop() {
		l, err := r.List(".", ListOptions{})
		if err != nil || len(l.Entries) != 1000 {
			b.Fatal(len(l.Entries), err)
		}
	}
}

// BenchmarkList1000Floor measures the system calls any listing of the same
// directory needs (getdents and one fstatat a name), without the rest of
// List, as the floor List is compared with.
func BenchmarkList1000Floor(b *testing.B) {
	r := benchList(b)
	b.ReportAllocs()
	defer reportCPU(b, cpuTime(b))
	var st unix.Stat_t
	for b.Loop() {
		d, err := r.root.Open(".")
		if err != nil {
			b.Fatal(err)
		}
		names, err := d.Readdirnames(-1)
		if err != nil {
			b.Fatal(err)
		}
		fd := int(d.Fd())
		for _, name := range names {
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				b.Fatal(err)
			}
		}
		d.Close()
	}
}

func BenchmarkRead100KiB(b *testing.B) {
	r := benchRead(b)
	b.ReportAllocs()
	defer reportCPU(b, cpuTime(b))
	b.SetBytes(100 << 10)
	for b.Loop() {
		f, err := r.Read("main.go", ReadOptions{})
		if err != nil || len(f.Content) != 100<<10 {
			b.Fatal(err)
		}
	}
}
