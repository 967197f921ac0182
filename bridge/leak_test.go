package bridge

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherdev/tether/sandbox"
)

// sandboxBridgeArg makes this test binary a session's sandbox bridge
// (with the built-in agents), as `tether sandbox-bridge` is the daemon's.
const sandboxBridgeArg = "sandbox-bridge"

// TestMain fails the package's tests if any goroutine of theirs (a
// connection's reader or writer, a request off the read loop, a replay, a
// watch) is still running once they are done.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandboxBridgeArg {
		os.Exit(runSandboxBridge())
	}
	goleak.VerifyTestMain(m)
}

func runSandboxBridge() int {
	cfg, err := sandbox.BridgeConfigFromEnv(os.Getenv)
	if err == nil {
		err = sandbox.RunBridge(context.Background(), cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox bridge:", err)
		return 1
	}
	return 0
}
