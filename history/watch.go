package history

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long a file's notifications are gathered before it is read:
// an agent appends many lines to it in a burst.
const settle = 50 * time.Millisecond

// Run builds the index and keeps it current until ctx ends: it watches the
// roots and every directory under them (and, for a root that does not
// exist yet, the directory that will hold it), reading each file that
// changed on from where its last read stopped. Without file notifications
// (the watch limit reached, say) the index is as of its first scan, with a
// warning in the log.
func (x *Index) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		x.cfg.Logger.Warn("history: no file notifications: the history is as of the daemon's start", "err", err)
		return x.Scan(ctx)
	}
	defer func() { _ = w.Close() }() // the watch is over either way
	for _, r := range x.roots() {
		x.watchTree(w, r, r.dir, 0)
	}
	// Watches first, then the scan: what changes in between is read again.
	if err := x.Scan(ctx); err != nil {
		return err
	}
	dirty := map[string]bool{}
	timer := time.NewTimer(settle)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-w.Errors:
			x.cfg.Logger.Warn("history: file notifications", "err", err)
		case ev := <-w.Events:
			if x.notified(w, ev) {
				if len(dirty) == 0 {
					timer.Reset(settle)
				}
				dirty[filepath.Clean(ev.Name)] = true
			}
		case <-timer.C:
			for path := range dirty {
				x.refresh(path)
			}
			clear(dirty)
		}
	}
}

// watchTree watches dir, depth levels below its root, and the directories
// under it that may hold the root's files. A root that does not exist yet
// is watched for through its nearest ancestor that exists.
func (x *Index) watchTree(w *fsnotify.Watcher, r root, dir string, depth int) {
	if err := w.Add(dir); err != nil {
		// A root that is not there yet: its nearest ancestor that is.
		for d := filepath.Dir(dir); depth == 0 && d != filepath.Dir(d); d = filepath.Dir(d) {
			if w.Add(d) == nil {
				return
			}
		}
		x.cfg.Logger.Debug("history: not watching a directory", "dir", dir, "err", err)
		return
	}
	if depth+1 >= r.depth() {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type().IsDir() {
			x.watchTree(w, r, filepath.Join(dir, e.Name()), depth+1)
		}
	}
}

// notified handles one notification: a new directory is watched (and what
// it already holds is read), a root that appeared (or a directory on the
// way to it) is watched and scanned; it reports
// whether a file must be read again.
func (x *Index) notified(w *fsnotify.Watcher, ev fsnotify.Event) bool {
	path := filepath.Clean(ev.Name)
	for _, r := range x.roots() {
		if path == r.dir || strings.HasPrefix(r.dir, path+string(filepath.Separator)) {
			if ev.Has(fsnotify.Create) {
				x.watchTree(w, r, r.dir, 0)
				for _, rel := range x.listFiles(r, ".") {
					x.update(r, rel)
				}
			}
			return false
		}
		rel, err := filepath.Rel(r.dir, path)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		depth := len(strings.Split(rel, string(filepath.Separator)))
		if depth < r.depth() {
			if ev.Has(fsnotify.Create) {
				x.watchTree(w, r, path, depth)
				for _, sub := range x.listFiles(r, rel) {
					x.update(r, sub)
				}
			}
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				x.forgetUnder(path)
			}
			return false
		}
		return r.wanted(rel)
	}
	return false
}

// refresh reads a file that changed again (or forgets it).
func (x *Index) refresh(path string) {
	for _, r := range x.roots() {
		if rel, err := filepath.Rel(r.dir, path); err == nil && filepath.IsLocal(rel) && r.wanted(rel) {
			x.update(r, rel)
			return
		}
	}
}

// forgetUnder forgets the files under a directory that is gone.
func (x *Index) forgetUnder(dir string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for path := range x.files {
		if strings.HasPrefix(path, dir+string(filepath.Separator)) {
			x.drop(path)
		}
	}
}
