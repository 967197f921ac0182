package main

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

const serviceUsage = `Usage:
  tether service install [SERVE FLAGS]   run "tether serve SERVE FLAGS" as a service of your
                                         user, started now and at every login (Linux: at boot
                                         too, with lingering on), restarted if it fails
  tether service uninstall               stop the service and remove it
  tether service status                  whether the service is installed and running

On Linux the service is a systemd user unit (~/.config/systemd/user/tether.service)
and logs to the journal: journalctl --user -u tether. On macOS it is a launchd
agent (~/Library/LaunchAgents/dev.tether.serve.plist) logging to
~/Library/Logs/tether.log. The service runs this tether binary, with the data
directory, the TETHER_ variables and the PATH of the shell that installed it:
run install again after moving the binary or to change its flags.
`

// Names of the service on each platform.
const (
	systemdUnitName = "tether.service"
	launchdLabel    = "dev.tether.serve"
)

// serviceSpec is what the service runs: `Exe serve Args…` with Env.
type serviceSpec struct {
	Exe  string   // absolute path of the tether binary
	Args []string // serve's flags
	// Env holds the variables the daemon gets besides its service
	// manager's own, sorted: TETHER_DATA (always, absolute), PATH and the
	// installing shell's other TETHER_ variables.
	Env []string
	// Log is launchd's log file (systemd logs to the journal).
	Log string
}

// serviceStep is one command of the service manager's.
type serviceStep struct {
	argv []string
	// mayFail marks a command expected to fail at times (stopping an
	// agent that is not loaded): its failure and output are not shown.
	mayFail bool
}

// argv is serve's command line after the binary. A pairing code and the
// pairing page's key are not printed: they would stay in the log, which
// others than the user may read (the adm group reads every journal).
func (s serviceSpec) argv() []string {
	return append([]string{"serve", "--print-pairing=false", "--keep-running-turns"}, s.Args...)
}

// servicePlatform is how one platform's service manager is driven.
type servicePlatform struct {
	file      string        // the unit or agent file
	text      string        // its contents
	install   []serviceStep // run after writing file
	uninstall []serviceStep // run before removing file
	removed   []serviceStep // run after removing it
	status    []string      // the command status runs
	// linger reports whether the service runs without a login session;
	// nil where the question does not arise.
	linger func(ctx context.Context) (bool, error)
}

func serviceCmd(ctx context.Context, args, envList []string, stdout, stderr io.Writer) int {
	env := envMap(envList)
	if len(args) == 0 {
		fmt.Fprint(stderr, serviceUsage)
		return 2
	}
	sub := args[0]
	if sub != "install" && len(args) > 1 || !slices.Contains([]string{"install", "uninstall", "status"}, sub) {
		fmt.Fprint(stderr, serviceUsage)
		return 2
	}
	spec, err := newServiceSpec(args[1:], env, stderr)
	if err != nil {
		if !errors.Is(err, errFlags) {
			fmt.Fprintln(stderr, "tether service:", err)
		}
		return 2
	}
	u, err := user.Current()
	if err != nil {
		fmt.Fprintln(stderr, "tether service:", err)
		return 1
	}
	p, err := newServicePlatform(runtime.GOOS, env, u, spec)
	if err != nil {
		fmt.Fprintln(stderr, "tether service:", err)
		return 1
	}
	sh := serviceShell{env: envList, path: env["PATH"], stdout: stdout, stderr: stderr}
	switch sub {
	case "install":
		err = p.doInstall(ctx, sh)
	case "uninstall":
		err = p.doUninstall(ctx, sh)
	default:
		return p.doStatus(ctx, sh)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tether service "+sub+":", err)
		return 1
	}
	return 0
}

// errFlags is a flag error already reported by the flag package.
var errFlags = errors.New("bad flags")

// newServiceSpec checks serve's flags as serve would parse them (so that a
// typo fails here, not in a restart loop) and fixes what the service runs.
func newServiceSpec(args []string, env map[string]string, stderr io.Writer) (serviceSpec, error) {
	var cfg config
	fs := newFlagSet("service install", stderr, &cfg, env)
	addServerFlags(fs, &cfg)
	addDaemonFlags(fs, &cfg)
	if err := parseFlags(fs, args, env); err != nil {
		return serviceSpec{}, errFlags
	}
	if fs.NArg() > 0 {
		return serviceSpec{}, fmt.Errorf("serve takes no arguments, only flags: %q", fs.Args())
	}
	exe, err := os.Executable()
	if err != nil {
		return serviceSpec{}, fmt.Errorf("finding the tether binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return serviceSpec{}, fmt.Errorf("finding the tether binary: %w", err)
	}
	// `go run` runs tether from <tmp>/go-buildN/…/exe/tether.
	if strings.Contains(exe, string(filepath.Separator)+"go-build") && filepath.Base(filepath.Dir(exe)) == "exe" {
		return serviceSpec{}, fmt.Errorf("%s is a build of `go run`, gone once it exits: install tether first (go install ./cmd/tether) and run that", exe)
	}
	data, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return serviceSpec{}, fmt.Errorf("data directory: %w", err)
	}
	spec := serviceSpec{Exe: exe, Args: args, Env: []string{"TETHER_DATA=" + data}}
	if p := env["PATH"]; p != "" {
		spec.Env = append(spec.Env, "PATH="+p)
	}
	// serve's own settings only: the shell may hold other TETHER_
	// variables (a load tool's device token), which a unit file would keep.
	fs.VisitAll(func(f *flag.Flag) {
		if k := envName(f.Name); k != "TETHER_DATA" {
			if v, ok := env[k]; ok {
				spec.Env = append(spec.Env, k+"="+v)
			}
		}
	})
	slices.Sort(spec.Env)
	for _, s := range append(append([]string{exe}, args...), spec.Env...) {
		if strings.ContainsAny(s, "\n\r\x00") {
			return serviceSpec{}, fmt.Errorf("%q: a service cannot hold a line break or NUL", s)
		}
	}
	return spec, nil
}

func newServicePlatform(goos string, env map[string]string, u *user.User, spec serviceSpec) (servicePlatform, error) {
	home := env["HOME"]
	if home == "" {
		home = u.HomeDir
	}
	switch goos {
	case "linux":
		dir := filepath.Join(home, ".config")
		if x := env["XDG_CONFIG_HOME"]; x != "" && filepath.IsAbs(x) {
			dir = x
		}
		return servicePlatform{
			file: filepath.Join(dir, "systemd", "user", systemdUnitName),
			text: systemdUnit(spec),
			install: []serviceStep{
				{argv: []string{"systemctl", "--user", "daemon-reload"}},
				{argv: []string{"systemctl", "--user", "enable", systemdUnitName}},
				// restart, not start: a second install runs the new unit.
				{argv: []string{"systemctl", "--user", "restart", systemdUnitName}},
			},
			uninstall: []serviceStep{{argv: []string{"systemctl", "--user", "disable", "--now", systemdUnitName}}},
			removed:   []serviceStep{{argv: []string{"systemctl", "--user", "daemon-reload"}}},
			status:    []string{"systemctl", "--user", "--no-pager", "status", systemdUnitName},
			linger: func(ctx context.Context) (bool, error) {
				out, err := exec.CommandContext(ctx, lookPathIn("loginctl", env["PATH"]), "show-user", u.Username, "--property=Linger", "--value").Output()
				if err != nil {
					return false, err
				}
				return strings.TrimSpace(string(out)) == "yes", nil
			},
		}, nil
	case "darwin":
		spec.Log = filepath.Join(home, "Library", "Logs", "tether.log")
		domain := "gui/" + u.Uid
		file := filepath.Join(home, "Library", "LaunchAgents", launchdLabel+".plist")
		return servicePlatform{
			file: file,
			text: launchdPlist(spec),
			install: []serviceStep{
				// A second install replaces the loaded agent.
				{argv: []string{"launchctl", "bootout", domain + "/" + launchdLabel}, mayFail: true},
				{argv: []string{"launchctl", "bootstrap", domain, file}},
			},
			uninstall: []serviceStep{{argv: []string{"launchctl", "bootout", domain + "/" + launchdLabel}}},
			status:    []string{"launchctl", "print", domain + "/" + launchdLabel},
		}, nil
	default:
		return servicePlatform{}, fmt.Errorf("no service manager known on %s: run `tether serve` under yours", goos)
	}
}

// serviceShell runs the service manager's commands, found on the PATH of
// the environment tether was given.
type serviceShell struct {
	env            []string
	path           string
	stdout, stderr io.Writer
}

// run runs one step, its output going to the shell's.
func (sh serviceShell) run(ctx context.Context, step serviceStep) error {
	argv := step.argv
	cmd := exec.CommandContext(ctx, lookPathIn(argv[0], sh.path), argv[1:]...)
	cmd.Env = sh.env
	if !step.mayFail {
		cmd.Stdout, cmd.Stderr = sh.stdout, sh.stderr
	}
	if err := cmd.Run(); err != nil && !step.mayFail {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}

// lookPathIn finds name in the directories of path, else returns name
// (and running it fails with a clear error).
func lookPathIn(name, path string) string {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}

func (p servicePlatform) doInstall(ctx context.Context, sh serviceShell) error {
	if err := os.MkdirAll(filepath.Dir(p.file), 0o755); err != nil {
		return err
	}
	// 0600: the unit holds serve's settings, some of which may be secret.
	if err := writeFileAtomic(p.file, []byte(p.text), 0o600); err != nil {
		return err
	}
	fmt.Fprintln(sh.stdout, "wrote", p.file)
	for _, step := range p.install {
		if err := sh.run(ctx, step); err != nil {
			return err
		}
	}
	fmt.Fprintln(sh.stdout, "tether serve is running as a service; `tether service status` shows it, `tether pair` pairs a phone.")
	if p.linger != nil {
		p.lingerHint(ctx, sh.stdout)
		fmt.Fprintln(sh.stdout, "Its log: journalctl --user -u tether")
	}
	return nil
}

// lingerHint says how to keep the service running without a login session,
// where it would not.
func (p servicePlatform) lingerHint(ctx context.Context, w io.Writer) {
	on, err := p.linger(ctx)
	switch {
	case err != nil:
		fmt.Fprintf(w, "Could not tell whether lingering is on (%v). Without it the service stops when you log out: `loginctl enable-linger` keeps it running.\n", err)
	case !on:
		fmt.Fprintln(w, "Lingering is off for your user: the service stops when you log out and starts at your next login. To keep it running (and start it at boot), run: loginctl enable-linger")
	}
}

func (p servicePlatform) doUninstall(ctx context.Context, sh serviceShell) error {
	if _, err := os.Stat(p.file); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(sh.stdout, "no service installed at", p.file)
		return nil
	}
	for _, step := range p.uninstall {
		if err := sh.run(ctx, step); err != nil {
			return err
		}
	}
	if err := os.Remove(p.file); err != nil {
		return err
	}
	fmt.Fprintln(sh.stdout, "removed", p.file)
	for _, step := range p.removed {
		if err := sh.run(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// doStatus prints whether the service is installed and the service
// manager's own status; its exit code is the manager's (0: running).
func (p servicePlatform) doStatus(ctx context.Context, sh serviceShell) int {
	if _, err := os.Stat(p.file); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(sh.stdout, "not installed (no %s): `tether service install` installs it\n", p.file)
		return 3
	}
	fmt.Fprintln(sh.stdout, "installed:", p.file)
	if p.linger != nil {
		p.lingerHint(ctx, sh.stdout)
	}
	err := sh.run(ctx, serviceStep{argv: p.status})
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(sh.stderr, "tether service status:", err)
		return 1
	}
	return 0
}

// systemdUnit is the user unit that runs spec.
func systemdUnit(spec serviceSpec) string {
	var b strings.Builder
	b.WriteString(`# Written by "tether service install"; run it again to change this unit.
[Unit]
Description=tether: your phone drives coding agents on this machine
Documentation=https://github.com/tetherdev/tether

[Service]
Type=exec
`)
	b.WriteString("ExecStart=" + systemdQuote(spec.Exe))
	for _, a := range spec.argv() {
		b.WriteString(" " + systemdQuote(a))
	}
	b.WriteString("\n")
	for _, kv := range spec.Env {
		b.WriteString("Environment=" + systemdQuoteEnv(kv) + "\n")
	}
	b.WriteString(`# stderr, where tether logs, goes to the journal: journalctl --user -u tether
StandardOutput=journal
StandardError=journal
SyslogIdentifier=tether
Restart=on-failure
RestartSec=5s
# Exit code 2 is a flag error: restarting would not mend it.
RestartPreventExitStatus=2
# Sessions' sandboxes get cgroups of their own below the daemon's.
Delegate=yes
# The sandboxes of running turns outlive a restart, an upgrade or a crash
# (--keep-running-turns), and the next daemon adopts them: systemd kills
# the daemon only. The daemon stops the other sandboxes itself.
KillMode=process

[Install]
WantedBy=default.target
`)
	return b.String()
}

// systemdQuote quotes s as one word of a unit file's command line: double
// quotes around anything but plain characters, with specifiers (%) and
// variable expansion ($) escaped.
func systemdQuote(s string) string { return unitQuote(s, true) }

// systemdQuoteEnv quotes an Environment= assignment, where "$" has no
// special meaning (systemd.exec(5)) and is kept as it is.
func systemdQuoteEnv(s string) string { return unitQuote(s, false) }

func unitQuote(s string, dollar bool) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,@+-%") == "" {
		return s
	}
	esc := []string{`\`, `\\`, `"`, `\"`}
	if dollar {
		esc = append(esc, `$`, `$$`)
	}
	return `"` + strings.NewReplacer(esc...).Replace(s) + `"`
}

// launchdPlist is the launchd agent that runs spec.
func launchdPlist(spec serviceSpec) string {
	var b strings.Builder
	esc := func(s string) string {
		var e strings.Builder
		_ = xml.EscapeText(&e, []byte(s)) // a strings.Builder does not fail
		return e.String()
	}
	str := func(indent, s string) { b.WriteString(indent + "<string>" + esc(s) + "</string>\n") }
	key := func(indent, k string) { b.WriteString(indent + "<key>" + esc(k) + "</key>\n") }
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by "tether service install"; run it again to change this agent. -->
<plist version="1.0">
<dict>
`)
	key("\t", "Label")
	str("\t", launchdLabel)
	key("\t", "ProgramArguments")
	b.WriteString("\t<array>\n")
	for _, a := range append([]string{spec.Exe}, spec.argv()...) {
		str("\t\t", a)
	}
	b.WriteString("\t</array>\n")
	key("\t", "EnvironmentVariables")
	b.WriteString("\t<dict>\n")
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		key("\t\t", k)
		str("\t\t", v)
	}
	b.WriteString("\t</dict>\n")
	key("\t", "RunAtLoad")
	b.WriteString("\t<true/>\n")
	// Restarted when it fails, not after a clean stop.
	key("\t", "KeepAlive")
	b.WriteString("\t<dict>\n")
	key("\t\t", "SuccessfulExit")
	b.WriteString("\t\t<false/>\n\t</dict>\n")
	key("\t", "ThrottleInterval")
	b.WriteString("\t<integer>5</integer>\n")
	key("\t", "StandardOutPath")
	str("\t", spec.Log)
	key("\t", "StandardErrorPath")
	str("\t", spec.Log)
	b.WriteString("</dict>\n</plist>\n")
	return b.String()
}

// writeFileAtomic writes data to name through a temporary file renamed
// over it, so that a service manager never reads half a file.
func writeFileAtomic(name string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
