package gitops

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestDiffIsBounded: a 25 MB untracked file and a tracked file changed by
// 5 MB reach the phone cut to MaxFileDiffBytes each and marked, the whole
// diff stays within MaxDiffBytes, and the daemon never holds either file
// whole (the allocation is measured).
// TestDiffIsBounded measures the process's allocations: it is not
// parallel, so that it runs before the package's parallel tests and alone.
func TestDiffIsBounded(t *testing.T) {
	r := newRepo(t)
	r.write("small.txt", "one\n")
	r.write("tracked.txt", "start\n")
	r.commitAll("first")
	line := strings.Repeat("x", 99) + "\n"
	r.write("tracked.txt", "start\n"+strings.Repeat(line, 50_000))
	writeHugeLog(t, r)
	r.write("small.txt", "one\ntwo\n")
	res, alloc := measuredDiff(t, r)
	t.Logf("diff of a 5 MB change and a 25 MB untracked file allocated %.1f MB", float64(alloc)/(1<<20))
	if alloc > 48<<20 {
		t.Errorf("allocated %d bytes: a file was read whole", alloc)
	}
	total := 0
	byPath := map[string]FileDiff{}
	for _, fd := range res.Files {
		byPath[fd.Path] = fd
		size := 0
		for _, h := range fd.Hunks {
			for _, l := range h.Lines {
				size += len(l.Content) + 1
			}
		}
		if size > MaxFileDiffBytes {
			t.Errorf("%s: %d bytes of lines", fd.Path, size)
		}
		total += size
	}
	if total > MaxDiffBytes {
		t.Errorf("%d bytes in all", total)
	}
	for _, p := range []string{"tracked.txt", "huge.log"} {
		if fd, ok := byPath[p]; !ok || !fd.Truncated || fd.Additions == 0 || fd.Additions*100 > MaxFileDiffBytes {
			t.Errorf("%s: present %v, truncated %v, %d additions", p, ok, fd.Truncated, fd.Additions)
		}
	}
	if fd := byPath["small.txt"]; fd.Truncated || fd.Additions != 1 {
		t.Errorf("small.txt: %+v", fd)
	}
}

// TestUntrackedFileIsReadBounded: a 25 MB untracked file alone costs the
// diff about its cap, not its size.
func TestUntrackedFileIsReadBounded(t *testing.T) {
	r := newRepo(t)
	r.write("small.txt", "one\n")
	r.commitAll("first")
	writeHugeLog(t, r)
	res, alloc := measuredDiff(t, r)
	t.Logf("diff with a 25 MB untracked file allocated %.2f MB", float64(alloc)/(1<<20))
	if alloc > 4<<20 {
		t.Errorf("allocated %d bytes for a 25 MB untracked file", alloc)
	}
	if len(res.Files) != 1 {
		t.Fatalf("%d files", len(res.Files))
	}
	if fd := res.Files[0]; !fd.Truncated || fd.Additions == 0 || fd.Additions >= 250_000 {
		t.Errorf("%s: truncated %v, %d additions shown", fd.Path, fd.Truncated, fd.Additions)
	}
}

// writeHugeLog writes huge.log, an untracked file of 25 MB.
func writeHugeLog(t *testing.T, r *testRepo) {
	t.Helper()
	f, err := os.Create(r.path("huge.log"))
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 99) + "\n"
	for range 250_000 {
		f.WriteString(line)
	}
	f.Close()
}

// measuredDiff is the repository's diff and the bytes it allocated.
func measuredDiff(t *testing.T, r *testRepo) (*DiffResult, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := direct.Diff(context.Background(), r.dir, nil, false)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	return res, after.TotalAlloc - before.TotalAlloc
}
