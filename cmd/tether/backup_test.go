package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// TestBackupWhileTheDaemonWrites runs `tether backup` while a live daemon
// logs a session's turns: each copy is whole (quick_check), holds every
// event the phone had seen before it began, and has no gap.
func TestBackupWhileTheDaemonWrites(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "backup-while-writing"
	d.readySession(c, id, "auto_approve")
	dir := t.TempDir()
	turn := 0
	for i := range 3 {
		var seen int64
		for _, e := range c.Seen {
			seen = max(seen, e.Seq)
		}
		// Turns queued: the daemon writes their events while the copy is made.
		for range 3 {
			turn++
			c.Send(wire.TypeMessage, fmt.Sprintf("m%d", turn), map[string]any{"session_id": id, "content": strings.Repeat("words ", 200)})
		}
		file := filepath.Join(dir, fmt.Sprintf("backup%d.db", i))
		code, out, errb := runCmd(t, d.env, "backup", file)
		if code != 0 || !strings.Contains(out, "To restore it") {
			t.Fatalf("backup: exit %d: %s%s", code, out, errb)
		}
		for done := 0; done < 3; done++ {
			c.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
		}
		st, err := store.Open(context.Background(), file)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.QuickCheck(context.Background()); err != nil {
			t.Errorf("backup %d: %v", i, err)
		}
		evs, err := st.EventsAfter(context.Background(), 0, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		if len(evs) == 0 || int64(len(evs)) != evs[len(evs)-1].Seq || evs[len(evs)-1].Seq < seen {
			t.Fatalf("backup %d holds %d events; the phone had seen up to seq %d", i, len(evs), seen)
		}
	}
	if code, _, errb := runCmd(t, d.env, "backup", filepath.Join(dir, "backup0.db")); code != 1 || !strings.Contains(errb, "exists") {
		t.Errorf("a backup over an existing file: exit %d: %s", code, errb)
	}
	if code, _, errb := runCmd(t, []string{"TETHER_DATA=" + t.TempDir()}, "backup", filepath.Join(dir, "none.db")); code != 1 || !strings.Contains(errb, "no database") {
		t.Errorf("a backup without a database: exit %d: %s", code, errb)
	}
	if code, _, _ := runCmd(t, d.env, "backup"); code != 2 {
		t.Errorf("backup without a file: exit %d", code)
	}
}

// TestServeRefusesADamagedDatabase damages a page of the event log: serve
// refuses to start and says what to do.
func TestServeRefusesADamagedDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	st, err := openDataDir(ctx, data, store.Open)
	if err != nil {
		t.Fatal(err)
	}
	var evs []store.Event
	for i := int64(1); i <= 2000; i++ {
		evs = append(evs, store.Event{Seq: i, SessionID: "s", Type: "stream_chunk", Frame: []byte(strings.Repeat("y", 300)), CreatedAt: time.Now()})
	}
	if err := st.AppendEvents(ctx, evs, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(data, dbFile)
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if _, err := f.WriteAt([]byte(strings.Repeat("\xa5", 2048)), fi.Size()/4096/2*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, _, errb := runCmd(t, []string{"TETHER_DATA=" + data, "HOME=" + t.TempDir()}, "serve", "--listen", "127.0.0.1:0", "--tls", "off")
	if code != 1 || !strings.Contains(errb, "integrity check") || !strings.Contains(errb, "tether backup FILE") || !strings.Contains(errb, "Do not delete it") {
		t.Fatalf("serve on a damaged database: exit %d:\n%s", code, errb)
	}
}

// TestFullDiskRefusesEventsAndCorruptsNothing fills the file system of the
// data directory (a small tmpfs) while a session runs: the phone is told
// STORAGE_FULL, and after the daemon stops and space is freed, the
// database is whole, holds every event the phone saw, and serves again.
func TestFullDiskRefusesEventsAndCorruptsNothing(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=8m,mode=0700"); err != nil {
		t.Skipf("skipped: mounting a small tmpfs needs root: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Error(err)
		}
	})
	data := filepath.Join(mnt, "data")
	d := newDaemonEnv(t, []string{"TETHER_DATA=" + data})
	c, _ := d.phone(nil)
	const id = "full-disk"
	d.readySession(c, id, "auto_approve")

	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for range 200 { // 8 MiB at most
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()

	// A turn's writes fail: the request is answered with an error that
	// says why, or, where only the event log's write failed, health_check
	// warns STORAGE_FULL.
	told := ""
	for i := 0; i < 200 && told == ""; i++ {
		c.Send(wire.TypeMessage, fmt.Sprintf("m%d", i), map[string]any{"session_id": id, "content": strings.Repeat("fill ", 400)})
		hc := fmt.Sprintf("hc%d", i)
		c.Send(wire.TypeHealthCheck, hc, map[string]any{"timestamp": time.Now().UTC().Format(time.RFC3339)})
		var st wire.HealthStatus
		c.WaitFor(wire.TypeHealthStatus, &st, func(e wire.Envelope) bool { return e.ID == hc })
		if slices.Contains(st.Warnings, "STORAGE_FULL") {
			told = st.WarningDetails["STORAGE_FULL"]
		}
		for _, e := range c.Seen {
			var p wire.ErrorPayload
			if e.Type == wire.TypeError && json.Unmarshal(e.Payload, &p) == nil && e.ID == fmt.Sprintf("m%d", i) {
				told = p.Message
			}
		}
	}
	if !strings.Contains(told, "disk holding the daemon's data directory is full") {
		types := map[string]int{}
		for _, e := range c.Seen {
			types[e.Type]++
		}
		t.Fatalf("200 turns on a full disk and the phone was told %q: %v", told, types)
	}
	var seen []int64
	for _, e := range c.Seen {
		if e.Seq != 0 {
			seen = append(seen, e.Seq)
		}
	}
	d.stop()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(data, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.QuickCheck(context.Background()); err != nil {
		t.Fatalf("after the disk filled: %v", err)
	}
	evs, err := st.EventsAfter(context.Background(), 0, 1_000_000)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int64]bool{}
	for _, e := range evs {
		stored[e.Seq] = true
	}
	for _, seq := range seen {
		if !stored[seq] {
			t.Fatalf("the phone saw seq %d, which the database lost", seq)
		}
	}
	d.start()
	c, _ = d.phone(map[string]any{"last_seq": 0})
	c.Send(wire.TypeMessage, "after", map[string]any{"session_id": id, "content": "space again"})
	c.WaitFor(wire.TypeTurnComplete, nil, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), "space again") })
}
