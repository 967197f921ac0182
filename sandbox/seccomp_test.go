package sandbox

import (
	"runtime"
	"testing"
)

// TestFilterAssembles keeps the filter buildable where it is offered: the
// attack tests skip a machine without the seccomp layer.
func TestFilterAssembles(t *testing.T) {
	if _, ok := auditArch[runtime.GOARCH]; !ok {
		t.Skipf("no filter for %s", runtime.GOARCH)
	}
	prog, err := filterOnce()
	if err != nil || len(prog) == 0 || len(prog)%8 != 0 {
		t.Fatalf("filter: %d bytes, %v", len(prog), err)
	}
}
