package bridge

import (
	"context"
	"sync"
	"time"

	"github.com/tetherdev/tether/store"
)

// seenEvery is how long a device's last-seen record may wait before it is
// written. Handshakes and disconnects do not wait for a commit (and its
// fsync) of their own: the sightings of that time go in one.
const seenEvery = time.Second

// sightings batches the devices' last-seen records. Its timer runs only
// while a sighting waits: an idle daemon does not wake for it.
type sightings struct {
	mu      sync.Mutex
	pending map[string]store.Sighting // device id → its latest sighting
	timer   *time.Timer
	writing sync.WaitGroup
	closed  bool // after Shutdown: the store may be closed
}

// seen records a sighting, written within seenEvery (or at Shutdown).
func (s *Server) seen(d store.Sighting) {
	b := &s.sightings
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if prev, ok := b.pending[d.Device]; ok {
		// One record a device: the latest, keeping what the earlier
		// one said that this one does not.
		if prev.At.After(d.At) {
			d, prev = prev, d
		}
		d.ClientVersion = orElse(d.ClientVersion, prev.ClientVersion)
		d.Platform = orElse(d.Platform, prev.Platform)
	}
	if b.pending == nil {
		b.pending = map[string]store.Sighting{}
	}
	b.pending[d.Device] = d
	if b.timer == nil {
		b.writing.Add(1)
		b.timer = time.AfterFunc(seenEvery, func() {
			defer b.writing.Done()
			s.writeSightings()
		})
	}
}

// orElse returns a unless it is empty, else b.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// writeSightings writes the sightings waiting now.
func (s *Server) writeSightings() {
	b := &s.sightings
	b.mu.Lock()
	batch := make([]store.Sighting, 0, len(b.pending))
	for _, d := range b.pending {
		batch = append(batch, d)
	}
	b.pending, b.timer = nil, nil
	b.mu.Unlock()
	if err := s.Store.TouchDevices(context.Background(), batch); err != nil {
		s.Logger.Warn("recording last seen", "devices", len(batch), "err", err)
	}
}

// flushSightings writes what waits at once and waits for a write in
// progress: the store must have it before the daemon closes it. Later
// sightings (of connections that outlived Shutdown) are dropped.
func (s *Server) flushSightings() {
	b := &s.sightings
	b.mu.Lock()
	t := b.timer
	b.closed = true
	b.mu.Unlock()
	if t != nil && t.Stop() {
		b.writing.Done()
		s.writeSightings()
	}
	b.writing.Wait()
}
