package fileops

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Limits on client paths and link chains.
const (
	// MaxPathBytes is the longest client path accepted, in bytes.
	MaxPathBytes = 4096
	// MaxNameBytes is the longest path component accepted, in bytes.
	MaxNameBytes = 255
	// MaxSymlinks is the most symbolic links followed while resolving one path.
	MaxSymlinks = 40
)

// Root is a directory that clients may list and read inside. It is safe for
// concurrent use; Close it when the session ends.
type Root struct {
	root *os.Root
	// names are the absolute, clean paths of the directory: the one given
	// to Open and, when different, the same with symbolic links resolved.
	names []string
}

// Open opens dir (made absolute against the working directory) as a Root.
func Open(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fileops: open root %q: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("fileops: open root %q: %w", dir, err)
	}
	captureEscapeError(root)
	names := []string{abs}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("fileops: open root %q: %w", dir, err)
	}
	if real != abs {
		names = append(names, real)
	}
	return &Root{root: root, names: names}, nil
}

// Dir returns the absolute path the Root was opened on.
func (r *Root) Dir() string { return r.names[0] }

// Close releases the Root's directory descriptor.
func (r *Root) Close() error {
	if err := r.root.Close(); err != nil {
		return fmt.Errorf("fileops: close root: %w", err)
	}
	return nil
}

// Rel turns a client path into a clean path relative to the root ("." for
// the root itself), following the package's path rules. It is purely
// lexical: it does not look at the filesystem, so symbolic links are judged
// later, when the path is used.
func (r *Root) Rel(clientPath string) (string, error) {
	rel, err := r.rel(clientPath)
	if err != nil {
		return "", fmt.Errorf("fileops: path %q: %w", clientPath, err)
	}
	return rel, nil
}

func (r *Root) rel(p string) (string, error) {
	if len(p) > MaxPathBytes {
		return "", ErrNameTooLong
	}
	if strings.IndexByte(p, 0) >= 0 || !utf8.ValidString(p) {
		return "", ErrInvalidPath
	}
	if strings.Trim(p, "/") == "" || p == "." {
		return ".", nil
	}
	var rel string
	if p[0] == '/' {
		var ok bool
		if rel, ok = r.within(path.Clean(p)); !ok {
			return "", ErrOutsideRoot
		}
	} else {
		rel = path.Clean(p)
		if escapes(rel) {
			return "", ErrOutsideRoot
		}
	}
	for c := range strings.SplitSeq(rel, "/") {
		if len(c) > MaxNameBytes {
			return "", ErrNameTooLong
		}
	}
	return rel, nil
}

// within returns the root-relative form of the clean absolute path abs, and
// whether abs is the root or under it.
func (r *Root) within(abs string) (string, bool) {
	for _, name := range r.names {
		if abs == name {
			return ".", true
		}
		prefix := name
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if rest, ok := strings.CutPrefix(abs, prefix); ok {
			return rest, true
		}
	}
	return "", false
}

// escapes reports whether the clean relative path rel climbs above its base.
func escapes(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, "../")
}

// stat resolves the clean root-relative path rel and stats what it names,
// following links inside the root. It returns the path to use for opening
// it: rel itself, or its resolved form when rel goes through an absolute
// link into the root (which os.Root refuses to follow).
func (r *Root) stat(rel string) (string, fs.FileInfo, error) {
	fi, err := r.root.Stat(rel)
	if err == nil {
		return rel, fi, nil
	}
	resolved, ferr := r.resolve(rel)
	if ferr != nil {
		return "", nil, ferr
	}
	if resolved != rel {
		fi, err = r.root.Stat(resolved)
	}
	if err != nil {
		return "", nil, classify(err)
	}
	return resolved, fi, nil
}

// resolve walks rel one component at a time with Lstat and Readlink inside
// the root, replacing each symbolic link by its target, and returns the
// path without links. It judges every target lexically before touching it,
// so it reports ErrOutsideRoot without any access outside the root.
func (r *Root) resolve(rel string) (string, error) {
	hops := 0
	cur := rel
walk:
	for cur != "." {
		parts := strings.Split(cur, "/")
		dir := ""
		for i, name := range parts {
			p := path.Join(dir, name)
			fi, err := r.root.Lstat(p)
			if err != nil {
				return "", classify(err)
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				hops++
				if hops > MaxSymlinks {
					return "", ErrSymlinkLoop
				}
				target, err := r.root.Readlink(p)
				if err != nil {
					return "", classify(err)
				}
				t, err := r.linkTarget(dir, target)
				if err != nil {
					return "", err
				}
				cur = path.Join(append([]string{t}, parts[i+1:]...)...)
				continue walk
			}
			if i < len(parts)-1 && !fi.IsDir() {
				return "", ErrNotDirectory
			}
			dir = p
		}
		break
	}
	return cur, nil
}

// linkTarget returns the root-relative form of a link's target, the link
// being in the root-relative directory dir ("" for the root).
func (r *Root) linkTarget(dir, target string) (string, error) {
	if target == "" {
		return "", ErrNotFound
	}
	if target[0] == '/' {
		rel, ok := r.within(path.Clean(target))
		if !ok {
			return "", ErrOutsideRoot
		}
		return rel, nil
	}
	rel := path.Join(dir, target)
	if escapes(rel) {
		return "", ErrOutsideRoot
	}
	return rel, nil
}
