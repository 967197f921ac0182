package sandbox

// Limits are a sandbox's resource limits. Zero fields take the defaults of
// [DefaultLimits].
type Limits struct {
	// MemoryBytes caps memory (cgroup); default 2 GiB.
	MemoryBytes int64
	// Pids caps processes and threads (cgroup pids, else RLIMIT_NPROC);
	// default 512.
	Pids int64
	// CPUs caps CPU time in cores (cgroup cpu quota); default 1.
	CPUs float64
	// OpenFiles is RLIMIT_NOFILE; default 4096.
	OpenFiles uint64
	// FileSize is RLIMIT_FSIZE in bytes; default 4 GiB.
	FileSize uint64
	// AddressSpace is RLIMIT_AS in bytes; default 0, no limit (Go and Node
	// reserve large address ranges).
	AddressSpace uint64
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{MemoryBytes: 2 << 30, Pids: 512, CPUs: 1, OpenFiles: 4096, FileSize: 4 << 30}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Pids <= 0 {
		l.Pids = d.Pids
	}
	if l.CPUs <= 0 {
		l.CPUs = d.CPUs
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.FileSize == 0 {
		l.FileSize = d.FileSize
	}
	return l
}

// rlimits returns the rlimits for l; nproc only when no cgroup limits pids.
func (l Limits) rlimits(withCgroup bool) []Rlimit {
	r := []Rlimit{{"nofile", l.OpenFiles}, {"fsize", l.FileSize}, {"core", 0}}
	if !withCgroup {
		r = append(r, Rlimit{"nproc", uint64(l.Pids)})
	}
	if l.AddressSpace > 0 {
		r = append(r, Rlimit{"as", l.AddressSpace})
	}
	return r
}
