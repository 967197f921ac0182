package store

import (
	"context"
	"slices"
	"sync"
)

// listCache keeps the answer of one listing query between the writes that
// can change it, for the listings every connection_ack reads (the live
// sessions and the pending questions): on a reconnect storm, or a phone
// that reconnects on each wake, the ack then reads no row.
//
// It holds only what a query read, so only committed rows: a question is
// listed once the transaction that asked it has committed, as when the
// query ran each time. It is coherent because the methods of this Store
// are the only writers of those tables (the CLI's own Store writes
// devices, codes and nothing else): each of them calls invalidate once its
// write is done, whether it succeeded or not. A load that overlapped a
// write is returned but not kept (the generation moved on).
type listCache[T any] struct {
	mu   sync.Mutex
	gen  uint64
	ok   bool
	rows []T
}

// get returns the cached rows, or load's, which it keeps if no write came
// in between. The caller may modify the slice but not what its elements
// point to.
func (c *listCache[T]) get(ctx context.Context, load func(context.Context) ([]T, error)) ([]T, error) {
	c.mu.Lock()
	if c.ok {
		rows := slices.Clone(c.rows)
		c.mu.Unlock()
		return rows, nil
	}
	gen := c.gen
	c.mu.Unlock()
	rows, err := load(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.gen == gen {
		c.rows, c.ok = slices.Clone(rows), true
	}
	c.mu.Unlock()
	return rows, nil
}

// invalidate drops the cached rows; a load running now is not kept.
func (c *listCache[T]) invalidate() {
	c.mu.Lock()
	c.gen++
	c.rows, c.ok = nil, false
	c.mu.Unlock()
}
