package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// systemDirs are bound read-only into every sandbox when they exist; a
// symbolic link among them (merged /usr: /bin -> usr/bin) is recreated as
// the same link.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix"}

// maskedDirs are covered by an empty tmpfs: scratch space and where host
// services keep their sockets.
var maskedDirs = []string{"/tmp", "/var/tmp", "/run", "/mnt", "/media"}

// Bind is one path bound into a sandbox.
type Bind struct {
	// Src is the host path; Dst where the sandbox sees it (empty: Src).
	Src, Dst string
	// Writable binds it read-write; otherwise read-only.
	Writable bool
}

// resolve returns the bind's source with its links resolved, and where the
// sandbox sees it (that same path unless Dst says); ok is false when the
// source does not exist.
func (b Bind) resolve() (src, dst string, ok bool) {
	src = realPath(b.Src)
	dst = b.Dst
	if dst == "" {
		dst = src
	}
	return src, dst, src != ""
}

// view is what a sandbox sees of the file system.
type view struct {
	// home is the user's home directory: it exists, empty, unless binds
	// put something in it.
	home string
	// path is the sandbox's PATH: its directories outside the system
	// directories are bound read-only.
	path string
	// masks are further directories covered by an empty tmpfs (socket
	// directories).
	masks []string
	// binds are bound in order, after the masks and the toolchains.
	binds []Bind
	// hide are covered by an empty tmpfs after every bind that could
	// contain them; binds below them are bound again after.
	hide []string
}

// args returns bwrap's arguments that build the view.
func (v view) args() []string {
	var a []string
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	a = append(a, resolvConf()...)
	a = append(a, "--dev", "/dev", "--proc", "/proc")
	masks := slices.Clone(maskedDirs)
	if fi, err := os.Lstat("/var/run"); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink("/var/run")
		a = append(a, "--symlink", target, "/var/run")
	} else {
		masks = append(masks, "/var/run")
	}
	if v.home != "" && v.home != "/" {
		masks = append(masks, v.home)
	}
	for _, m := range append(masks, v.masks...) {
		if m = realPath(m); m != "" && !underAny(m, systemDirs) {
			a = append(a, "--tmpfs", m)
		}
	}
	binds := append(v.toolchains(), v.binds...)
	hide := make([]string, 0, len(v.hide))
	for _, h := range v.hide {
		if h = realPath(h); h != "" {
			hide = append(hide, h)
		}
	}
	var after []Bind
	for _, b := range binds {
		if _, dst, ok := b.resolve(); ok && underAny(dst, hide) {
			after = append(after, b)
			continue
		}
		a = b.append(a)
	}
	for _, h := range hide {
		a = append(a, "--tmpfs", h)
	}
	for _, b := range after {
		a = b.append(a)
	}
	return a
}

func (b Bind) append(a []string) []string {
	src, dst, ok := b.resolve()
	if !ok {
		return a
	}
	op := "--ro-bind"
	if b.Writable {
		op = "--bind"
	}
	return append(a, op, src, dst)
}

// toolchains are the directories of PATH the system directories lack,
// read-only. Below the home directory, a tool's own hidden tree holding one
// is bound whole (~/.pyenv, ~/.nvm, ~/.cargo, ~/.bun: shims and launchers
// load their code from beside their bin). Elsewhere (~/go/bin, ~/bin, a
// project's node_modules/.bin, and under ~/.local, ~/.config and ~/.cache,
// which hold other programs' data) only the directory is, with the lib
// beside a bin (pip --user's and npm's code).
func (v view) toolchains() []Bind {
	var out []Bind
	add := func(d string) {
		if !slices.ContainsFunc(out, func(b Bind) bool { return b.Src == d }) {
			out = append(out, Bind{Src: d})
		}
	}
	for _, named := range filepath.SplitList(v.path) {
		if !filepath.IsAbs(named) {
			continue
		}
		d := realPath(named)
		if d == "" || d == "/" || underAny(d, systemDirs) || (v.home != "" && under(v.home, d)) {
			continue
		}
		if named = filepath.Clean(named); named != d && !underAny(named, systemDirs) {
			// Reached through a link: the sandbox finds it by PATH's name.
			out = append(out, Bind{Src: d, Dst: named})
		}
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		if rel, ok := strings.CutPrefix(d, v.home+"/"); ok && v.home != "" {
			top, _, _ := strings.Cut(rel, "/")
			if strings.HasPrefix(top, ".") && !slices.Contains(sharedDotDirs, top) {
				add(filepath.Join(v.home, top))
				continue
			}
		}
		add(d)
		if prefix := filepath.Dir(d); filepath.Base(d) == "bin" && prefix != v.home {
			if fi, err := os.Stat(filepath.Join(prefix, "lib")); err == nil && fi.IsDir() {
				add(filepath.Join(prefix, "lib"))
			}
		}
	}
	for _, secret := range toolchainSecrets {
		p := filepath.Join(v.home, secret)
		if v.home != "" && slices.ContainsFunc(out, func(b Bind) bool { return under(p, b.Src) }) {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				out = append(out, Bind{Src: os.DevNull, Dst: p})
			}
		}
	}
	return out
}

// sharedDotDirs are hidden directories of the home that many programs
// share: a PATH directory below one does not expose the rest.
var sharedDotDirs = []string{".local", ".config", ".cache"}

// toolchainSecrets are credentials kept inside tool trees that toolchains
// bind: each is replaced by an empty file.
var toolchainSecrets = []string{".cargo/credentials.toml", ".cargo/credentials"}

// resolvConf binds /etc/resolv.conf's target when it is a link into a
// masked directory (systemd-resolved's /run/systemd/resolve/…).
func resolvConf() []string {
	const p = "/etc/resolv.conf"
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	real := realPath(p)
	if real == "" || underAny(real, systemDirs) {
		return nil
	}
	return []string{"--ro-bind", real, real}
}

// realPath returns p with its symbolic links resolved, or "" when it does
// not exist.
func realPath(p string) string {
	if p == "" {
		return ""
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

// under reports whether p is dir or lies below it.
func under(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if under(p, d) {
			return true
		}
	}
	return false
}
