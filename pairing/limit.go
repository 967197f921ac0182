package pairing

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// AttemptLimiter limits failed authentication attempts per client address
// (an IPv4 address, or an IPv6 /64, which one client usually owns whole).
// Successful attempts cost nothing.
type AttemptLimiter struct {
	// Every is the steady rate at which failed attempts are allowed.
	Every time.Duration
	// Burst is how many failures in a row are allowed before the rate
	// applies.
	Burst int

	mu      sync.Mutex
	entries map[netip.Prefix]*attempts
	sweep   time.Time
}

type attempts struct {
	lim  *rate.Limiter
	last time.Time
}

// Default limits: 10 failures at once, then one every 6 seconds.
const (
	DefaultAttemptBurst = 10
	DefaultAttemptEvery = 6 * time.Second
)

func addrKey(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

func (l *AttemptLimiter) entry(a netip.Addr, now time.Time) *attempts {
	if l.entries == nil {
		l.entries = map[netip.Prefix]*attempts{}
	}
	every, burst := l.Every, l.Burst
	if every <= 0 {
		every = DefaultAttemptEvery
	}
	if burst <= 0 {
		burst = DefaultAttemptBurst
	}
	// Forget addresses whose bucket has been full for a while.
	if now.Sub(l.sweep) > time.Minute {
		full := every * time.Duration(burst)
		for k, e := range l.entries {
			if now.Sub(e.last) > full {
				delete(l.entries, k)
			}
		}
		l.sweep = now
	}
	k := addrKey(a)
	e := l.entries[k]
	if e == nil {
		e = &attempts{lim: rate.NewLimiter(rate.Every(every), burst)}
		l.entries[k] = e
	}
	return e
}

// Allowed reports whether addr may attempt to authenticate now.
func (l *AttemptLimiter) Allowed(addr netip.Addr, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entry(addr, now).lim.TokensAt(now) >= 1
}

// Failed records a failed attempt from addr.
func (l *AttemptLimiter) Failed(addr netip.Addr, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(addr, now)
	e.lim.AllowN(now, 1)
	e.last = now
}
