// Command tether is a daemon that lets a phone drive coding agents on this
// machine: it pairs phones by QR code and serves them over wss.
//
// Usage:
//
//	tether serve                 run the daemon
//	tether pair [--json|--app]   issue a pairing code and show its QR
//	tether devices list|revoke|rename
//	tether doctor                what serve would do, and whether it is safe
//	tether hooks install|uninstall|token
//	tether hook                  the command hook Claude Code runs
//	tether claude [ARGS…]        claude in this terminal, offered to the phone
//	tether service install|uninstall|status
//	tether backup FILE           copy the database, also while serve runs
//	tether runs list|status|export
//	tether version
//
// Every flag can also be set by an environment variable: TETHER_ and the
// flag's name in upper case with - as _ (TETHER_DATA, TETHER_LISTEN, …).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `tether lets your phone drive coding agents on this machine.

Usage:
  tether serve      run the daemon (wss on port 7420 of the addresses a phone can reach)
  tether pair       issue a one-time pairing code and show its QR code
  tether devices    list, rename or revoke paired devices
  tether doctor     check the setup: addresses, TLS, tailnet, modes, sandbox
  tether hooks      install or uninstall Claude Code hooks, print the hook token
  tether hook       the command Claude Code runs for its hooks (reads stdin)
  tether claude     run claude here, its session offered to the phone: a message
                    from the phone takes it over, a key press takes it back
  tether service    install, uninstall or show tether serve as a service of
                    your user (systemd on Linux, launchd on macOS)
  tether backup     copy the database to a file, also while the daemon runs
  tether runs       list the agent-to-agent runs, show or export one
  tether version    print the version

Run "tether COMMAND -h" for a command's flags. Every flag can also be set
by an environment variable: TETHER_ and the flag name in upper case with
- as _ (for example TETHER_DATA, TETHER_LISTEN).
`

// run is the whole program behind main, testable: it returns the exit code.
func run(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmds := map[string]func(context.Context, []string, []string, io.Writer, io.Writer) int{
		"serve":   serveCmd,
		"pair":    pairCmd,
		"devices": devicesCmd,
		"doctor":  doctorCmd,
		"hooks":   hooksCmd,
		"hook":    hookCmd,
		"claude":  claudeCmd,
		"service": serviceCmd,
		"backup":  backupCmd,
		"runs":    runsCmd,
		// The process inside each session's sandbox, and the MCP server
		// of a run's tools that its agent starts there; not for users.
		"sandbox-bridge": sandboxBridgeCmd,
		"mcp":            mcpCmd,
	}
	switch name := args[0]; name {
	case "version", "--version":
		fmt.Fprint(stdout, versionText(debug.ReadBuildInfo))
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		cmd, ok := cmds[name]
		if !ok {
			fmt.Fprintf(stderr, "tether: unknown command %q\n\n%s", name, usage)
			return 2
		}
		return cmd(ctx, args[1:], env, stdout, stderr)
	}
}
