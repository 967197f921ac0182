package bridge

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine of theirs (a
// connection's reader or writer, a request off the read loop, a replay, a
// watch) is still running once they are done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
