package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/store"
)

const devicesUsage = `Usage:
  tether devices list [--json]     show paired devices
  tether devices revoke ID         revoke a device; a running daemon closes its connections at once
  tether devices rename ID NAME    rename a device
`

func devicesCmd(ctx context.Context, args, envList []string, stdout, stderr io.Writer) int {
	env := envMap(envList)
	if len(args) == 0 {
		fmt.Fprint(stderr, devicesUsage)
		return 2
	}
	sub := args[0]
	var cfg config
	fs := newFlagSet("devices "+sub, stderr, &cfg, env)
	asJSON := fs.Bool("json", false, "print JSON (list)")
	if err := parseFlags(fs, args[1:], env); err != nil {
		return 2
	}
	rest := fs.Args()
	want := map[string]int{"list": 0, "revoke": 1, "rename": 2}
	n, ok := want[sub]
	if !ok || len(rest) != n {
		fmt.Fprint(stderr, devicesUsage)
		return 2
	}
	st, err := openDataDir(ctx, cfg.DataDir, store.Open)
	if err != nil {
		fmt.Fprintln(stderr, "tether devices:", err)
		return 1
	}
	defer closeStore(st, stderr)
	switch sub {
	case "list":
		err = listDevices(ctx, st, stdout, *asJSON)
	case "revoke":
		if err = st.RevokeDevice(ctx, rest[0], time.Now()); err == nil {
			fmt.Fprintf(stdout, "revoked %s\n", rest[0])
			err = tellDaemonOf(ctx, cfg.DataDir, rest[0], stdout,
				"the running daemon has closed its connections", "no daemon is running; it refuses the device when it starts")
		}
	case "rename":
		name := strings.TrimSpace(rest[1])
		if name == "" {
			fmt.Fprintln(stderr, "tether devices rename: the name must not be empty")
			return 2
		}
		if err = st.RenameDevice(ctx, rest[0], name); err == nil {
			fmt.Fprintf(stdout, "renamed %s to %q\n", rest[0], name)
			err = tellDaemonOf(ctx, cfg.DataDir, rest[0], stdout, "the running daemon uses the new name", "")
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(stderr, "tether devices %s: no device %q (see `tether devices list`)\n", sub, rest[0])
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, "tether devices:", err)
		return 1
	}
	return 0
}

// tellDaemonOf tells the running daemon, if any, that device id changed
// in the store, and says on w what happened: told when a daemon heard,
// notRunning (unless empty) when none runs.
func tellDaemonOf(ctx context.Context, dataDir, id string, w io.Writer, told, notRunning string) error {
	ok, err := tellDaemon(ctx, dataDir, id)
	switch {
	case err != nil:
		return fmt.Errorf("the store is changed, but the running daemon could not be told (restart it): %w", err)
	case ok:
		fmt.Fprintln(w, told)
	case notRunning != "":
		fmt.Fprintln(w, notRunning)
	}
	return nil
}

func listDevices(ctx context.Context, st *store.Store, w io.Writer, asJSON bool) error {
	devs, err := st.Devices(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if devs == nil {
			devs = []store.Device{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(devs)
	}
	if len(devs) == 0 {
		fmt.Fprintln(w, "No devices are paired. Run `tether pair` to pair one.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPLATFORM\tPAIRED\tLAST SEEN\tLAST ADDRESS\tSTATUS")
	for _, d := range devs {
		status := "active"
		if d.RevokedAt != nil {
			status = "revoked " + d.RevokedAt.Local().Format(time.DateTime)
		}
		// Names and platforms come from phones: never raw into a terminal.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, pairing.CleanLabel(d.Name), orDash(pairing.CleanLabel(d.Platform)),
			d.PairedAt.Local().Format(time.DateTime), d.LastSeen.Local().Format(time.DateTime), orDash(d.LastAddr), status)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
