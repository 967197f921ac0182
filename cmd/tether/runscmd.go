package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/tetherdev/tether/runs"
	"github.com/tetherdev/tether/store"
)

const runsUsage = `Usage:
  tether runs list                  show the agent-to-agent runs, newest first
  tether runs status RUN            a run's status, in the bridge spec's layout
  tether runs export RUN [-o FILE]  a run's messages as the spec's bridge.jsonl
`

func runsCmd(ctx context.Context, args, envList []string, stdout, stderr io.Writer) int {
	env := envMap(envList)
	if len(args) == 0 {
		fmt.Fprint(stderr, runsUsage)
		return 2
	}
	sub := args[0]
	var cfg config
	fs := newFlagSet("runs "+sub, stderr, &cfg, env)
	out := fs.String("o", "", "write to FILE instead of standard output (export)")
	if err := parseFlags(fs, args[1:], env); err != nil {
		return 2
	}
	// Flags may also follow the run (export 4 -o FILE).
	var rest []string
	for fs.NArg() > 0 {
		rest = append(rest, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return 2
		}
	}
	want := map[string]int{"list": 0, "status": 1, "export": 1}
	n, ok := want[sub]
	if !ok || len(rest) != n {
		fmt.Fprint(stderr, runsUsage)
		return 2
	}
	var id int64
	if n == 1 {
		var err error
		if id, err = strconv.ParseInt(rest[0], 10, 64); err != nil || id <= 0 {
			fmt.Fprintf(stderr, "tether runs %s: %q is not a run number\n", sub, rest[0])
			return 2
		}
	}
	// A machine whose daemon never ran has no runs: nothing is created.
	if _, err := os.Stat(filepath.Join(cfg.DataDir, dbFile)); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "tether runs: no database at %s: is --data (TETHER_DATA) the daemon's?\n", filepath.Join(cfg.DataDir, dbFile))
		return 1
	}
	st, err := openDataDir(ctx, cfg.DataDir, store.Open)
	if err != nil {
		fmt.Fprintln(stderr, "tether runs:", err)
		return 1
	}
	defer closeStore(st, stderr)
	if n == 1 {
		if _, _, err := st.Run(ctx, id); errors.Is(err, store.ErrNotFound) {
			fmt.Fprintf(stderr, "tether runs %s: no run %d\n", sub, id)
			return 1
		}
	}
	switch sub {
	case "list":
		err = listRuns(ctx, st, stdout)
	case "status":
		var s runs.Status
		if s, err = runs.StatusOf(ctx, st, id); err == nil {
			fmt.Fprint(stdout, s.Text())
		}
	case "export":
		w := stdout
		if *out != "" {
			f, ferr := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if ferr != nil {
				fmt.Fprintln(stderr, "tether runs export:", ferr)
				return 1
			}
			defer f.Close()
			w = f
		}
		err = runs.Export(ctx, st, id, w)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tether runs %s: %v\n", sub, err)
		return 1
	}
	return 0
}

func listRuns(ctx context.Context, st *store.Store, w io.Writer) error {
	list, err := st.Runs(ctx, false, 1000)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tSTARTED\tDIRECTORY\tREASON")
	for _, r := range list {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.CreatedAt.Local().Format("2006-01-02 15:04"), r.WorkDir, r.Reason)
	}
	return tw.Flush()
}
