package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ), 100 on
// every Linux architecture Go supports.
const userHZ = 100

// Errors for /proc files that do not read as expected.
var (
	errNoField    = errors.New("field not found")
	errOutOfRange = errors.New("value out of range")
)

// rssBytes returns the resident set size of process pid, from VmRSS in
// /proc/PID/status.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("server memory: %w", err)
	}
	return parseVmRSS(b)
}

// parseVmRSS finds "VmRSS: N kB" in the text of /proc/PID/status.
func parseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS %q: %w", v, errNoField)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS %q: %w", v, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("VmRSS: %w", errNoField)
}

// procCPU returns the user plus system CPU time that process pid has used,
// over all its threads, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server CPU: %w", err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime, fields 14 and 15 of /proc/PID/stat.
// The command name, field 2, is parenthesised and may hold spaces and
// parentheses itself, so fields are counted after its last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: %w", errNoField)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state), so field k is f[k-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat utime/stime: %w", errNoField)
	}
	const maxTicks = math.MaxInt64 / int64(time.Second/userHZ) / 2
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat utime/stime %q: %w", s, err)
		}
		if n < 0 || n > maxTicks {
			return 0, fmt.Errorf("stat utime/stime %q: %w", s, errOutOfRange)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// machineCPU returns the CPU time that all the machine's processors have
// spent busy (user, nice, system, irq, softirq, steal), from /proc/stat.
func machineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("machine CPU: %w", err)
	}
	return parseProcStat(b)
}

// parseProcStat sums the busy columns of the "cpu" line of /proc/stat:
// user, nice, system, (not idle, iowait) irq, softirq, steal. Guest time
// is already part of user.
func parseProcStat(stat []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat cpu line: %w", errNoField)
	}
	const maxTicks = math.MaxInt64 / int64(time.Second/userHZ) / 8
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat cpu line %q: %w", f[i], err)
		}
		if n < 0 || n > maxTicks {
			return 0, fmt.Errorf("/proc/stat cpu line %q: %w", f[i], errOutOfRange)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// selfCPU returns the user plus system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// openFileLimit returns the soft limit on open files of process pid, from
// /proc/PID/limits; "unlimited" is math.MaxInt64.
func openFileLimit(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, fmt.Errorf("server limits: %w", err)
	}
	return parseOpenFileLimit(b)
}

// parseOpenFileLimit finds the soft limit in the "Max open files" line of
// the text of /proc/PID/limits.
func parseOpenFileLimit(limits []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(limits))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			break
		}
		if f[0] == "unlimited" {
			return math.MaxInt64, nil
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("max open files %q: %w", f[0], err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("max open files: %w", errNoField)
}

// raiseOpenFileLimit makes sure this process may hold at least need open
// files, raising the soft limit and, if allowed (root), the hard limit.
func raiseOpenFileLimit(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("open-file limit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	lim.Cur = need
	lim.Max = max(lim.Max, need)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raising the open-file limit to %d (raise ulimit -Hn): %w", need, err)
	}
	return nil
}

// threadStats returns the CPU time (from schedstat, in nanoseconds
// rather than /proc/PID/stat's 10 ms ticks) and the context switches,
// voluntary and not, of every thread of process pid. Threads that ended
// before the call are not counted: compare two calls only over a time in
// which the server keeps its threads, as an idle Go server does.
func threadStats(pid int) (cpu time.Duration, switches int64, err error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("server threads: %w", err)
	}
	for _, t := range tasks {
		status, err := os.ReadFile(dir + "/" + t.Name() + "/status")
		var sched []byte
		if err == nil {
			sched, err = os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		}
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("server threads: %w", err)
		}
		n, err := parseCtxSwitches(status)
		if err != nil {
			return 0, 0, err
		}
		ns, err := parseSchedstat(sched)
		if err != nil {
			return 0, 0, err
		}
		switches += n
		cpu += ns
	}
	return cpu, switches, nil
}

// parseSchedstat reads the first field of /proc/PID/task/TID/schedstat,
// the thread's time on a CPU in nanoseconds.
func parseSchedstat(b []byte) (time.Duration, error) {
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, fmt.Errorf("schedstat: %w", errNoField)
	}
	n, err := strconv.ParseUint(string(f[0]), 10, 62)
	if err != nil {
		return 0, fmt.Errorf("schedstat %q: %w", f[0], err)
	}
	return time.Duration(n), nil
}

// parseCtxSwitches adds voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches of a /proc status file.
func parseCtxSwitches(status []byte) (int64, error) {
	var total int64
	found := map[string]bool{}
	for line := range bytes.Lines(status) {
		name, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(name) != "voluntary_ctxt_switches" && string(name) != "nonvoluntary_ctxt_switches") {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 62)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", name, bytes.TrimSpace(v), err)
		}
		total += int64(n)
		found[string(name)] = true
	}
	if len(found) != 2 {
		return 0, fmt.Errorf("context switches: %w", errNoField)
	}
	return total, nil
}
