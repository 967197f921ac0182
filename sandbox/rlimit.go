package sandbox

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrRlimit is a malformed or unknown rlimit.
var ErrRlimit = errors.New("sandbox: bad rlimit")

// Rlimit is one resource limit, set as both soft and hard limit.
type Rlimit struct {
	// Name is one of "nofile", "fsize", "core", "nproc", "as".
	Name string
	// Value is the limit (bytes for fsize and as, a count otherwise).
	Value uint64
}

var rlimitResources = map[string]int{
	"nofile": unix.RLIMIT_NOFILE,
	"fsize":  unix.RLIMIT_FSIZE,
	"core":   unix.RLIMIT_CORE,
	"nproc":  unix.RLIMIT_NPROC,
	"as":     unix.RLIMIT_AS,
}

// FormatRlimits writes limits as "name=value,…", the form of EnvRlimits.
func FormatRlimits(limits []Rlimit) string {
	parts := make([]string, len(limits))
	for i, l := range limits {
		parts[i] = l.Name + "=" + strconv.FormatUint(l.Value, 10)
	}
	return strings.Join(parts, ",")
}

// ParseRlimits reads what FormatRlimits writes; "" is no limits.
func ParseRlimits(s string) ([]Rlimit, error) {
	if s == "" {
		return nil, nil
	}
	var out []Rlimit
	for part := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(part, "=")
		if _, known := rlimitResources[name]; !ok || !known {
			return nil, fmt.Errorf("%w: %q", ErrRlimit, part)
		}
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrRlimit, part, err)
		}
		out = append(out, Rlimit{Name: name, Value: v})
	}
	return out, nil
}

// applyRlimits sets limits on the calling process.
func applyRlimits(limits []Rlimit) error {
	for _, l := range limits {
		res, ok := rlimitResources[l.Name]
		if !ok {
			return fmt.Errorf("%w: %q", ErrRlimit, l.Name)
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: l.Value, Max: l.Value}); err != nil {
			return fmt.Errorf("sandbox: setrlimit %s=%d: %w", l.Name, l.Value, err)
		}
	}
	return nil
}
