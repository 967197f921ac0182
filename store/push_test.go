package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestPushSubscriptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	for _, id := range []string{"phone", "tablet"} {
		code := []byte(fmt.Sprintf("%-32s", id))
		if err := s.CreatePairingCode(ctx, PairingCode{Hash: code, Kind: CodeOnce, CreatedAt: now, ExpiresAt: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClaimPairingCode(ctx, code, now, Device{ID: id, Name: id, TokenHash: []byte("tok-" + id)}); err != nil {
			t.Fatal(err)
		}
	}
	sub := func(dev string, i int) PushSubscription {
		return PushSubscription{DeviceID: dev, Endpoint: fmt.Sprintf("https://push.example/%s/%d", dev, i), P256dh: "k", Auth: "a", CreatedAt: now.Add(time.Duration(i) * time.Second)}
	}
	endpoints := func() map[string]bool {
		subs, err := s.PushSubscriptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, p := range subs {
			out[p.Endpoint] = true
		}
		return out
	}
	// A device keeps its newest MaxPushSubscriptions.
	for i := range MaxPushSubscriptions + 2 {
		if err := s.SavePushSubscription(ctx, sub("phone", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.SavePushSubscription(ctx, sub("tablet", 0))
	got := endpoints()
	if len(got) != MaxPushSubscriptions+1 || got[sub("phone", 0).Endpoint] || got[sub("phone", 1).Endpoint] || !got[sub("phone", MaxPushSubscriptions+1).Endpoint] {
		t.Fatalf("subscriptions = %v", got)
	}
	// Saved again: updated, not doubled.
	again := sub("phone", 5)
	again.P256dh = "k2"
	if err := s.SavePushSubscription(ctx, again); err != nil || len(endpoints()) != MaxPushSubscriptions+1 {
		t.Fatalf("resave: %v, %d", err, len(endpoints()))
	}
	// The push service said gone; another device's endpoint stays.
	if err := s.DeletePushSubscription(ctx, sub("tablet", 0).Endpoint, "phone"); err != nil || !endpoints()[sub("tablet", 0).Endpoint] {
		t.Fatalf("another device's unsubscribe removed it: %v", err)
	}
	if err := s.DeletePushSubscription(ctx, sub("tablet", 0).Endpoint, ""); err != nil || endpoints()[sub("tablet", 0).Endpoint] {
		t.Fatalf("delete: %v", err)
	}
	// Revoking (as `tether devices revoke` does, straight in the database)
	// takes the device's subscriptions with it, and it cannot subscribe.
	if err := s.RevokeDevice(ctx, "phone", now); err != nil {
		t.Fatal(err)
	}
	if got := endpoints(); len(got) != 0 {
		t.Fatalf("after revoking: %v", got)
	}
	var n int
	s.db.QueryRowContext(ctx, `SELECT count(*) FROM push_subscriptions`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d rows left of the revoked device", n)
	}
	if err := s.SavePushSubscription(ctx, sub("phone", 9)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a revoked device subscribed: %v", err)
	}
}
