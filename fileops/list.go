package fileops

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Entry types. The protocol knows only these two.
const (
	// TypeFile is a regular file, a FIFO, socket or device, or a link
	// without a target inside the root.
	TypeFile = "file"
	// TypeDirectory is a directory or a link to one inside the root.
	TypeDirectory = "directory"
)

// Listing page sizes.
const (
	// DefaultListLimit is the page size when ListOptions.Limit is 0.
	DefaultListLimit = 1000
	// MaxListLimit is the largest page size; larger limits are lowered to it.
	MaxListLimit = 5000
)

// ListOptions select a page of a listing and which names it shows.
type ListOptions struct {
	// Offset is the index of the first entry returned, in listing order.
	Offset int
	// Limit is the most entries returned: 0 means DefaultListLimit, and
	// more than MaxListLimit means MaxListLimit.
	Limit int
	// ShowHidden includes names starting with "." (default: left out).
	ShowHidden bool
	// ShowGit includes ".git" (default: left out, even with ShowHidden).
	ShowGit bool
}

// Listing is one page of a directory listing; the bridge sends it as
// wire.FileListing.
type Listing struct {
	// Path is the directory's root-relative path, "." for the root.
	Path string
	// Parent is the root-relative path of the directory's parent, "" at the root.
	Parent string
	// Entries is the page, directories first, then by name; never nil.
	Entries []Entry
	// Total is the number of entries in the whole listing.
	Total int
	// Offset is the index of the page's first entry.
	Offset int
	// Limit is the page size used.
	Limit int
	// HasMore is true when entries follow this page.
	HasMore bool
}

// Entry is one name in a Listing.
type Entry struct {
	// Name is the entry's name in its directory.
	Name string
	// Path is the entry's root-relative path, accepted back by List and Read.
	Path string
	// Type is TypeFile or TypeDirectory (a symbolic link's target's type).
	Type string
	// Size is the size in bytes of a file; 0 for a directory and for a
	// link without a target inside the root.
	Size int64
	// Modified is the modification time, in whole seconds, UTC; absent for
	// a link without a target inside the root.
	Modified time.Time
	// Symlink is true when the entry is a symbolic link.
	Symlink bool
}

// List returns a page of the directory at clientPath.
func (r *Root) List(clientPath string, opts ListOptions) (*Listing, error) {
	l, err := r.list(clientPath, opts)
	if err != nil {
		return nil, fmt.Errorf("fileops: list %q: %w", clientPath, err)
	}
	return l, nil
}

func (r *Root) list(clientPath string, opts ListOptions) (*Listing, error) {
	if opts.Offset < 0 || opts.Limit < 0 {
		return nil, ErrInvalidRange
	}
	limit := opts.Limit
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit > MaxListLimit:
		limit = MaxListLimit
	}
	rel, err := r.rel(clientPath)
	if err != nil {
		return nil, err
	}
	real, fi, err := r.stat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, ErrNotDirectory
	}
	d, err := r.root.OpenFile(real, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, classify(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, classify(err)
	}
	names = slices.DeleteFunc(names, func(name string) bool { return !shown(name, opts) })
	slices.Sort(names)
	infos := make([]info, len(names))
	if err := r.statAll(int(d.Fd()), real, names, infos); err != nil {
		return nil, err
	}
	total := 0
	for _, in := range infos {
		if in.kind != kindGone {
			total++
		}
	}
	l := &Listing{Path: rel, Total: total, Offset: opts.Offset, Limit: limit}
	if rel != "." {
		l.Parent = path.Dir(rel)
	}
	// The page is cut from the listing in its order: directories by name,
	// then files by name.
	l.Entries = make([]Entry, 0, max(0, min(limit, total-opts.Offset)))
	skip := opts.Offset
	for _, kind := range []uint8{kindDir, kindFile} {
		for i, in := range infos {
			if in.kind != kind {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			if len(l.Entries) == limit {
				break
			}
			l.Entries = append(l.Entries, in.entry(names[i]))
		}
	}
	if rel != "." {
		setPaths(rel, l.Entries)
	}
	l.HasMore = opts.Offset+len(l.Entries) < total
	return l, nil
}

// setPaths sets the entries' paths to rel/name. The paths share one
// string: one allocation, not one an entry.
func setPaths(rel string, entries []Entry) {
	n := 0
	for _, e := range entries {
		n += len(rel) + 1 + len(e.Name)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, e := range entries {
		sb.WriteString(rel)
		sb.WriteByte('/')
		sb.WriteString(e.Name)
	}
	all, at := sb.String(), 0
	for i := range entries {
		end := at + len(rel) + 1 + len(entries[i].Name)
		entries[i].Path = all[at:end]
		at = end
	}
}

// shown reports whether a directory entry called name belongs in a listing.
func shown(name string, opts ListOptions) bool {
	if name == ".git" {
		return opts.ShowGit
	}
	if strings.HasPrefix(name, ".") && !opts.ShowHidden {
		return false
	}
	return utf8.ValidString(name)
}

// Kinds of directory entries.
const (
	kindGone uint8 = iota // vanished between readdir and stat
	kindFile
	kindDir
)

// info is what a listing needs of one directory entry.
type info struct {
	kind     uint8
	symlink  bool
	hasTime  bool
	size     int64
	modified int64 // Unix seconds
}

// entry returns the listing entry for in, called name in the root
// (List sets the path of an entry further down).
func (in info) entry(name string) Entry {
	e := Entry{Name: name, Path: name, Type: TypeFile, Size: in.size, Symlink: in.symlink}
	if in.kind == kindDir {
		e.Type = TypeDirectory
	}
	if in.hasTime {
		e.Modified = time.Unix(in.modified, 0).UTC()
	}
	return e
}

// statAll fills infos[i] for names[i] in the directory open as fd, whose
// link-free root-relative path is real. The names come from the directory
// itself, so they hold no "/" and fstatat with AT_SYMLINK_NOFOLLOW cannot
// leave the directory; links are followed through the os.Root.
func (r *Root) statAll(fd int, real string, names []string, infos []info) error {
	var st unix.Stat_t
	for i, name := range names {
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return classify(&fs.PathError{Op: "fstatat", Path: path.Join(real, name), Err: err})
		}
		in := &infos[i]
		in.kind = kindFile
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			in.kind = kindDir
			in.hasTime, in.modified = true, st.Mtim.Sec
		case unix.S_IFLNK:
			in.symlink = true
			if _, fi, err := r.stat(path.Join(real, name)); err == nil {
				in.hasTime, in.modified = true, fi.ModTime().Unix()
				if fi.IsDir() {
					in.kind = kindDir
				} else {
					in.size = fi.Size()
				}
			}
		default:
			in.size = st.Size
			in.hasTime, in.modified = true, st.Mtim.Sec
		}
	}
	return nil
}
