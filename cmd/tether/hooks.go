package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/tetherdev/tether/hooks"
)

const hooksUsage = `Usage:
  tether hooks install [--project DIR]     add tether's hooks to Claude Code's settings
  tether hooks uninstall [--project DIR]   remove exactly the hooks install added
  tether hooks token                       print the hook secret

Without --project the user's settings are edited ($CLAUDE_CONFIG_DIR or
~/.claude, settings.json); with it, DIR/.claude/settings.json.
`

// hookCmd is `tether hook`, the command Claude Code runs for each hook
// event: it never fails Claude Code (exit 2 would block the tool call), so
// every outcome but a bad command line exits 0, with nothing on stdout
// when the daemon had no answer.
func hookCmd(ctx context.Context, args, envList []string, stdout, stderr io.Writer) int {
	env := envMap(envList)
	var cfg config
	fs := newFlagSet("hook", stderr, &cfg, env)
	timeout := fs.Duration("timeout", hooks.DefaultClientTimeout, "how long to wait for the daemon's answer")
	if err := parseFlags(fs, args, env); err != nil {
		return 1
	}
	if err := runHook(ctx, cfg.DataDir, *timeout, os.Stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "tether hook: no decision, Claude Code decides:", err)
	}
	return 0
}

// runHook posts the hook input to the daemon recorded in dataDir.
func runHook(ctx context.Context, dataDir string, timeout time.Duration, stdin io.Reader, stdout io.Writer) error {
	info, err := readRuntimeInfo(dataDir)
	if err != nil {
		return fmt.Errorf("the daemon is not running: %w", err)
	}
	if !processAlive(info.PID) {
		return errors.New("the daemon is not running")
	}
	token, err := hooks.ReadToken(dataDir)
	if err != nil {
		return err
	}
	cfg := hookClientConfig(info)
	cfg.Token, cfg.Timeout = token, timeout
	return hooks.RunHook(ctx, stdin, stdout, cfg)
}

// hookClientConfig is where the daemon of info serves hooks: on loopback
// when it listens there (the endpoint answers only loopback by default),
// else at its recorded address; https unless it runs without TLS.
func hookClientConfig(info runtimeInfo) hooks.ClientConfig {
	cfg := hooks.ClientConfig{Fingerprint: info.Fingerprint}
	scheme := "https"
	if u, err := url.Parse(info.URL); err == nil {
		if u.Scheme == "ws" {
			scheme = "http"
		}
		cfg.ServerName = u.Hostname()
	}
	host, port, _ := net.SplitHostPort(info.Listen)
	addr := info.Listen
	loopback := net.JoinHostPort("127.0.0.1", port)
	switch a, err := netip.ParseAddr(host); {
	case err == nil && a.IsLoopback():
	case err == nil && a.IsUnspecified():
		addr = loopback
	default:
		// Listening on the tailnet includes loopback; on a specific
		// address it may not.
		if c, err := net.DialTimeout("tcp", loopback, time.Second); err == nil {
			c.Close()
			addr = loopback
		}
	}
	cfg.URL = scheme + "://" + addr + hooks.Path
	return cfg
}

func hooksCmd(ctx context.Context, args, envList []string, stdout, stderr io.Writer) int {
	env := envMap(envList)
	if len(args) == 0 {
		fmt.Fprint(stderr, hooksUsage)
		return 2
	}
	sub := args[0]
	var cfg config
	fs := newFlagSet("hooks "+sub, stderr, &cfg, env)
	project := fs.String("project", "", "edit DIR/.claude/settings.json instead of the user's settings")
	command := fs.String("command", "", "the command Claude Code runs (default: this tether binary, `hook`, and --data when not the default)")
	timeout := fs.Int("timeout", hooks.DefaultTimeout, "hook timeout in seconds written to the settings (keep it over the daemon's wait of "+hooks.DefaultWait.String()+")")
	if err := parseFlags(fs, args[1:], env); err != nil {
		return 2
	}
	if len(fs.Args()) != 0 {
		fmt.Fprint(stderr, hooksUsage)
		return 2
	}
	if sub == "token" {
		tok, err := hooks.LoadOrCreateToken(cfg.DataDir)
		if err != nil {
			fmt.Fprintln(stderr, "tether hooks token:", err)
			return 1
		}
		fmt.Fprintln(stdout, tok)
		return 0
	}
	path, err := settingsPath(*project, env)
	if err != nil {
		fmt.Fprintf(stderr, "tether hooks %s: %v\n", sub, err)
		return 2
	}
	switch sub {
	case "install":
		cmd := *command
		if cmd == "" {
			if cmd, err = defaultHookCommand(cfg.DataDir, env); err != nil {
				fmt.Fprintln(stderr, "tether hooks install:", err)
				return 1
			}
		}
		if *timeout <= 0 {
			fmt.Fprintln(stderr, "tether hooks install: --timeout must be positive")
			return 2
		}
		changed, err := hooks.Install(path, cmd, *timeout)
		if err != nil {
			fmt.Fprintln(stderr, "tether hooks install:", err)
			return 1
		}
		if changed {
			fmt.Fprintf(stdout, "Installed tether's hooks in %s (%d events, command %s).\n", path, len(hooks.Events), cmd)
		} else {
			fmt.Fprintf(stdout, "tether's hooks are already installed in %s.\n", path)
		}
	case "uninstall":
		changed, err := hooks.Uninstall(path)
		if err != nil {
			fmt.Fprintln(stderr, "tether hooks uninstall:", err)
			return 1
		}
		if changed {
			fmt.Fprintf(stdout, "Removed tether's hooks from %s.\n", path)
		} else {
			fmt.Fprintf(stdout, "No tether hooks in %s.\n", path)
		}
	default:
		fmt.Fprint(stderr, hooksUsage)
		return 2
	}
	return 0
}

// settingsPath is Claude Code's settings file: the project's, or the
// user's.
func settingsPath(project string, env map[string]string) (string, error) {
	if project != "" {
		dir, err := filepath.Abs(project)
		if err != nil {
			return "", err
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("--project %s: not a directory", project)
		}
		return filepath.Join(dir, ".claude", "settings.json"), nil
	}
	if d := env["CLAUDE_CONFIG_DIR"]; d != "" {
		return filepath.Join(d, "settings.json"), nil
	}
	return filepath.Join(homeDir(env), ".claude", "settings.json"), nil
}

// defaultHookCommand runs this binary as `tether hook`, naming the data
// directory when it is not the default one.
func defaultHookCommand(dataDir string, env map[string]string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the tether binary: %w", err)
	}
	cmd := shellQuote(exe) + " hook"
	if dataDir != defaultDataDir(env) {
		abs, err := filepath.Abs(dataDir)
		if err != nil {
			return "", err
		}
		cmd += " --data " + shellQuote(abs)
	}
	return cmd, nil
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9/._+:@%=-]+$`)

// shellQuote quotes s for the shell Claude Code runs hook commands with.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
