package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stubCommands puts shell scripts named like the service manager's
// commands in a directory and returns a PATH with it first and the file
// in which they record their command lines. No systemd user manager runs
// on a test machine (it needs systemd as PID 1), so systemctl and loginctl
// are stand-ins here; scripts/service-check runs the real ones.
func stubCommands(t *testing.T, linger string) (path, record string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(dir, "calls")
	for name, body := range map[string]string{
		"systemctl": `echo "systemctl $*" >> ` + record + `; case "$*" in *status*) echo "tether.service active (running)";; esac`,
		"loginctl":  `echo "loginctl $*" >> ` + record + `; echo ` + linger,
		"launchctl": `echo "launchctl $*" >> ` + record,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir + ":/usr/bin:/bin", record
}

func TestServiceInstallStatusUninstall(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("systemd units are installed on Linux")
	}
	home := t.TempDir()
	path, record := stubCommands(t, "no")
	env := []string{"HOME=" + home, "PATH=" + path, "TETHER_LISTEN=127.0.0.1:7499", "XDG_DATA_HOME=" + filepath.Join(home, "data")}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"service", "install", "--tls", "off", "--root", "/src/a b"}, env, &out, &errb); code != 0 {
		t.Fatalf("install: exit %d: %s", code, errb.String())
	}
	unitPath := filepath.Join(home, ".config", "systemd", "user", "tether.service")
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	for _, want := range []string{
		"ExecStart=" + systemdQuote(exe) + ` serve --print-pairing=false --keep-running-turns --tls off --root "/src/a b"`,
		"Environment=TETHER_DATA=" + filepath.Join(home, "data", "tether") + "\n",
		"Environment=TETHER_LISTEN=127.0.0.1:7499\n",
		"Environment=PATH=" + path + "\n",
		"StandardError=journal\n",
		"WantedBy=default.target\n",
	} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	if !strings.Contains(out.String(), "loginctl enable-linger") {
		t.Errorf("no lingering hint with lingering off:\n%s", out.String())
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []string{
		"systemctl --user daemon-reload",
		"systemctl --user enable tether.service",
		"systemctl --user restart tether.service",
		"loginctl show-user " + u.Username + " --property=Linger --value",
	}
	if got := calls(t, record); !slices.Equal(got, wantCalls) {
		t.Errorf("install ran\n%q\nwant\n%q", got, wantCalls)
	}

	out.Reset()
	if code := run(context.Background(), []string{"service", "status"}, env, &out, &errb); code != 0 {
		t.Fatalf("status: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "installed: "+unitPath) || !strings.Contains(out.String(), "active (running)") {
		t.Errorf("status says:\n%s", out.String())
	}

	if err := os.WriteFile(record, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), []string{"service", "uninstall"}, env, &out, &errb); code != 0 {
		t.Fatalf("uninstall: exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(unitPath); !os.IsNotExist(err) {
		t.Errorf("unit still there after uninstall: %v", err)
	}
	wantCalls = []string{"systemctl --user disable --now tether.service", "systemctl --user daemon-reload"}
	if got := calls(t, record); !slices.Equal(got, wantCalls) {
		t.Errorf("uninstall ran\n%q\nwant\n%q", got, wantCalls)
	}
	out.Reset()
	if code := run(context.Background(), []string{"service", "status"}, env, &out, &errb); code != 3 || !strings.Contains(out.String(), "not installed") {
		t.Errorf("status after uninstall: exit %d:\n%s", code, out.String())
	}
}

func TestServiceInstallRefusesBadServeFlags(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	path, record := stubCommands(t, "yes")
	env := []string{"HOME=" + home, "PATH=" + path}
	for _, args := range [][]string{{"--no-such-flag"}, {"extra-argument"}, {"--root", "a\nb"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"service", "install"}, args...), env, &out, &errb); code != 2 {
			t.Errorf("install %q: exit %d, want 2", args, code)
		}
	}
	if got := calls(t, record); len(got) != 0 {
		t.Errorf("a refused install ran %q", got)
	}
	if _, err := os.Stat(filepath.Join(home, ".config")); !os.IsNotExist(err) {
		t.Errorf("a refused install wrote files: %v", err)
	}
}

func calls(t *testing.T, record string) []string {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' })
}

// awkwardSpec has every character a unit file or a plist must escape.
func awkwardSpec(t *testing.T) serviceSpec {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return serviceSpec{
		Exe:  exe,
		Args: []string{"--root", `/home/me/100% "odd" $HOME\dir`, "--allow-origin=https://a.example/<&>"},
		Env:  []string{"PATH=/usr/bin:/bin", "TETHER_DATA=/home/me/my data/%h"},
		Log:  "/Users/me/Library/Logs/tether.log",
	}
}

// TestSystemdUnitVerifies has systemd's own parser check the unit, with
// arguments that need quoting.
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is missing: scripts/install-deps installs it (Debian's systemd)")
	}
	dir := t.TempDir()
	unit := filepath.Join(dir, "tether.service")
	if err := os.WriteFile(unit, []byte(systemdUnit(awkwardSpec(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	runtimeDir := t.TempDir()
	for _, mode := range []string{"--system", "--user"} {
		cmd := exec.Command(analyze, mode, "verify", unit)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtimeDir, "SYSTEMD_LOG_LEVEL=notice")
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze %s verify: %v\n%s\n%s", mode, err, out, systemdUnit(awkwardSpec(t)))
		}
	}
}

func TestSystemdQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/usr/bin/tether":   "/usr/bin/tether",
		"--listen=tailnet":  "--listen=tailnet",
		"a b":               `"a b"`,
		"100%":              "100%%",
		`say "hi" $HOME \n`: `"say \"hi\" $$HOME \\n"`,
		"":                  `""`,
	} {
		if got := systemdQuote(in); got != want {
			t.Errorf("systemdQuote(%q) = %s, want %s", in, got, want)
		}
	}
	// In Environment=, "$" is no variable: it stays single.
	if got, want := systemdQuoteEnv(`K=a$b c`), `"K=a$b c"`; got != want {
		t.Errorf("systemdQuoteEnv = %s, want %s", got, want)
	}
}

// TestLaunchdPlist reads the agent back as XML: it must be well formed and
// carry the command line and environment unchanged. launchd itself runs
// only on macOS.
func TestLaunchdPlist(t *testing.T) {
	t.Parallel()
	spec := awkwardSpec(t)
	text := launchdPlist(spec)
	var plist struct {
		Dict struct {
			Items []struct {
				XMLName xml.Name
				Text    string   `xml:",chardata"`
				Strings []string `xml:"string"`
				Keys    []string `xml:"key"`
			} `xml:",any"`
		} `xml:"dict"`
	}
	if err := xml.Unmarshal([]byte(text), &plist); err != nil {
		t.Fatalf("not XML: %v\n%s", err, text)
	}
	values := map[string]int{}
	var keys []string
	for i, it := range plist.Dict.Items {
		if it.XMLName.Local == "key" {
			keys = append(keys, it.Text)
			values[it.Text] = i + 1
		}
	}
	want := []string{"Label", "ProgramArguments", "EnvironmentVariables", "RunAtLoad", "KeepAlive", "ThrottleInterval", "StandardOutPath", "StandardErrorPath"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	items := plist.Dict.Items
	if got := items[values["Label"]].Text; got != launchdLabel {
		t.Errorf("Label %q", got)
	}
	if got, want := items[values["ProgramArguments"]].Strings, append([]string{spec.Exe}, spec.argv()...); !slices.Equal(got, want) {
		t.Errorf("ProgramArguments %q, want %q", got, want)
	}
	env := items[values["EnvironmentVariables"]]
	var kv []string
	for i, k := range env.Keys {
		kv = append(kv, k+"="+env.Strings[i])
	}
	if !slices.Equal(kv, spec.Env) {
		t.Errorf("EnvironmentVariables %q, want %q", kv, spec.Env)
	}
	if got := items[values["StandardErrorPath"]].Text; got != spec.Log {
		t.Errorf("StandardErrorPath %q", got)
	}
}

func TestServiceLaunchdCommands(t *testing.T) {
	t.Parallel()
	u := &user.User{Uid: "501", Username: "me", HomeDir: "/Users/me"}
	p, err := newServicePlatform("darwin", map[string]string{}, u, awkwardSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if p.file != "/Users/me/Library/LaunchAgents/dev.tether.serve.plist" {
		t.Errorf("agent at %s", p.file)
	}
	if !strings.Contains(p.text, "<string>/Users/me/Library/Logs/tether.log</string>") {
		t.Errorf("agent logs elsewhere:\n%s", p.text)
	}
	last := p.install[len(p.install)-1].argv
	if !slices.Equal(last, []string{"launchctl", "bootstrap", "gui/501", p.file}) {
		t.Errorf("install ends with %q", last)
	}
	if _, err := newServicePlatform("plan9", map[string]string{}, u, awkwardSpec(t)); err == nil {
		t.Error("a service on plan9")
	}
}

// TestServiceRealSystemd installs the service for a user of a Debian
// system booted with systemd in a container (systemd-nspawn, the root file
// system scripts/install-deps makes with debootstrap, a volatile overlay
// on it and a network of its own): the user's systemd manager runs the
// daemon, restarts it when it is killed, logs it to the journal without
// its pairing secrets, and uninstall stops it.
func TestServiceRealSystemd(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a container")
	}
	root := os.Getenv("TETHER_SYSTEMD_ROOT")
	if root == "" {
		root = "/var/cache/tether-systemd/bookworm"
	}
	if _, err := os.Stat(filepath.Join(root, "usr/lib/systemd/systemd")); err != nil {
		t.Skipf("skipped: no systemd root file system at %s; scripts/install-deps makes it", root)
	}
	nspawn, err := exec.LookPath("systemd-nspawn")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("skipped: needs root and systemd-nspawn (scripts/install-deps installs systemd-container)")
	}
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var console syncBuffer
	boot := exec.Command(nspawn, "--quiet", "--directory="+root, "--volatile=overlay", "--private-network",
		"--boot", "--register=no", "--keep-unit", "--console=pipe",
		"--machine=tether-test-"+strconv.Itoa(os.Getpid()), "--bind-ro="+exe+":/usr/local/bin/tether")
	boot.Stdout, boot.Stderr = &console, &console
	if err := boot.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- boot.Wait() }()
	var leader string
	t.Cleanup(func() {
		if leader != "" {
			_ = exec.Command("nsenter", "-t", leader, "-a", "systemctl", "poweroff").Run() // the kill below follows if it fails
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = boot.Process.Kill() // a container that does not power off
			<-exited
		}
	})
	waitFor(t, 30*time.Second, "the container's init", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", boot.Process.Pid, boot.Process.Pid))
		leader = strings.TrimSpace(string(b))
		return leader != ""
	})
	// sh runs a script in the container as root.
	sh := func(script string) (string, error) {
		out, err := exec.Command("nsenter", "-t", leader, "-a", "/bin/sh", "-c", script).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	must := func(script string) string {
		t.Helper()
		out, err := sh(script)
		if err != nil {
			t.Fatalf("%s: %v\n%s\ncontainer console:\n%s", script, err, out, console.String())
		}
		return out
	}
	waitFor(t, 60*time.Second, "systemd to boot", func() bool {
		out, _ := sh("systemctl is-system-running")
		return out == "running" || out == "degraded"
	})
	must("useradd --create-home tu && mkdir '/home/tu/a b' && chown tu '/home/tu/a b' && loginctl enable-linger tu")
	uid := must("id -u tu")
	waitFor(t, 30*time.Second, "tu's systemd manager", func() bool {
		_, err := sh("test -S /run/user/" + uid + "/systemd/private")
		return err == nil
	})
	// as runs a command as tu, in the environment of a login shell (and
	// the test binary as tether).
	as := "runuser -u tu -- env HOME=/home/tu XDG_RUNTIME_DIR=/run/user/" + uid + " PATH=/usr/local/bin:/usr/bin:/bin TETHER_TEST_AS_TETHER=1 "
	out := must(as + "TETHER_TAILSCALE_SOCKET=/nonexistent tether service install --tls off --listen 127.0.0.1:7420 --root '/home/tu/a b'")
	if strings.Contains(out, "enable-linger") {
		t.Errorf("a lingering hint with lingering on:\n%s", out)
	}
	healthz := `bash -c 'exec 3<>/dev/tcp/127.0.0.1/7420 && printf "GET /healthz HTTP/1.0\r\n\r\n" >&3 && cat <&3'`
	waitFor(t, 30*time.Second, "the daemon to answer /healthz", func() bool {
		out, _ := sh(healthz)
		return strings.Contains(out, `"status":"ok"`)
	})
	if got := must(as + "systemctl --user show --property=ExecStart tether.service"); !strings.Contains(got, "argv[]=/usr/local/bin/tether serve --print-pairing=false --keep-running-turns --tls off --listen 127.0.0.1:7420 --root /home/tu/a b ;") {
		t.Errorf("systemd runs %s", got)
	}
	// What the journal does not show, tether pair gives, from the
	// service's data directory.
	if out := must(as + "tether pair --json"); !strings.Contains(out, "ws://127.0.0.1:7420/ws") {
		t.Errorf("tether pair beside the service: %s", out)
	}
	journal := must("journalctl --boot --no-pager --output=cat _SYSTEMD_USER_UNIT=tether.service")
	if !strings.Contains(journal, "tether serving") || strings.Contains(journal, "key=") || strings.Contains(journal, "#pair=") {
		t.Errorf("the journal says:\n%s", journal)
	}

	pid := must(as + "systemctl --user show --property=MainPID --value tether.service")
	must("kill -9 " + pid)
	waitFor(t, 30*time.Second, "systemd to restart the killed daemon", func() bool {
		now, _ := sh(as + "systemctl --user show --property=MainPID --value tether.service")
		out, _ := sh(healthz)
		return now != pid && now != "0" && strings.Contains(out, `"status":"ok"`)
	})
	if out := must(as + "tether service status"); !strings.Contains(out, "active (running)") {
		t.Errorf("status says:\n%s", out)
	}

	must(as + "tether service uninstall")
	if out, _ := sh(as + "systemctl --user is-active tether.service"); out != "inactive" {
		t.Errorf("after uninstall the service is %q", out)
	}
	if _, err := sh("test -e /home/tu/.config/systemd/user/tether.service"); err == nil {
		t.Error("the unit file is still there after uninstall")
	}
}
