package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Source issues the certificate for a name; *tailnet.Client is one (the
// tailnet's certificate for this machine's MagicDNS name).
type Source interface {
	Certificate(ctx context.Context, name string) (*tls.Certificate, error)
}

// retryAfter is how long a failed renewal waits before the next try.
const retryAfter = time.Minute

// fetchTimeout bounds one fetch from the Source.
const fetchTimeout = 30 * time.Second

// Renewing serves a certificate from a Source and fetches it again in the
// background once two thirds of its lifetime have passed; until a renewal
// succeeds, the certificate in hand is served.
type Renewing struct {
	src    Source
	name   string
	logger *slog.Logger
	now    func() time.Time

	mu         sync.Mutex
	cur        *tls.Certificate
	retryAt    time.Time
	refreshing bool
	wg         sync.WaitGroup
}

// NewRenewing fetches name's certificate from src. Failed renewals are
// logged to logger (discarded when nil); now is the clock (time.Now when
// nil).
func NewRenewing(ctx context.Context, src Source, name string, logger *slog.Logger, now func() time.Time) (*Renewing, error) {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Renewing{src: src, name: name, logger: logger, now: now}
	c, err := r.fetch(ctx)
	if err != nil {
		return nil, err
	}
	r.cur = c
	return r, nil
}

func (r *Renewing) fetch(ctx context.Context) (*tls.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	c, err := r.src.Certificate(ctx, r.name)
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", r.name, err)
	}
	if c.Leaf == nil {
		if len(c.Certificate) == 0 {
			return nil, errors.New("certs: " + r.name + ": empty certificate")
		}
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certs: %s: %w", r.name, err)
		}
	}
	return c, nil
}

// Name is the name the certificate is for.
func (r *Renewing) Name() string { return r.name }

// Leaf is the certificate being served.
func (r *Renewing) Leaf() *x509.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.Leaf
}

// GetCertificate serves the current certificate, starting a renewal in
// the background when it is due; it fits tls.Config.GetCertificate.
func (r *Renewing) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	leaf := r.cur.Leaf
	due := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3)
	if now.After(due) && now.After(r.retryAt) && !r.refreshing {
		r.refreshing = true
		r.wg.Add(1)
		go r.renew()
	}
	return r.cur, nil
}

func (r *Renewing) renew() {
	defer r.wg.Done()
	c, err := r.fetch(context.Background())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshing = false
	switch {
	case err != nil:
		r.logger.Warn("renewing the TLS certificate failed; serving the current one", "name", r.name, "expires", r.cur.Leaf.NotAfter, "err", err)
	case !c.Leaf.NotAfter.After(r.cur.Leaf.NotAfter):
		r.logger.Debug("the TLS certificate source has no newer certificate yet", "name", r.name)
	default:
		r.cur = c
		r.logger.Info("TLS certificate renewed", "name", r.name, "expires", c.Leaf.NotAfter)
		return
	}
	r.retryAt = r.now().Add(retryAfter)
}

// Wait waits for a renewal in progress to finish.
func (r *Renewing) Wait() { r.wg.Wait() }
