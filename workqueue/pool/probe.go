package pool

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// How the pool checks, when it has the masters' password, that a master
// the catalog lists is one: any peer can publish a master's record, with
// as many tasks waiting as it likes, to draw the pool's workers (and its
// share of them) to itself.
const (
	// probeTimeout bounds one probe.
	probeTimeout = 3 * time.Second
	// maxProbes bounds the masters probed at once, at each look at the
	// catalog: a flood of forged records costs the pool no more.
	maxProbes = 8
	// provenFor is how long a master that proved it holds the password
	// is believed; refusedFor how long one that did not is left out
	// before it is probed again.
	provenFor  = 10 * time.Minute
	refusedFor = time.Minute
)

// A prober keeps the masters that have proved they hold the masters'
// password, by the CCTools password exchange a worker runs: a master that
// cannot answer it would refuse the pool's workers anyway. It is used by
// one goroutine at a time.
type prober struct {
	password []byte
	log      *slog.Logger
	known    map[string]verdict // master's address → what its probe said
}

type verdict struct {
	proven bool
	until  time.Time
}

// genuine returns the masters of ms that the policy pol does not serve,
// which the pool leaves alone, and those it serves that have proved they
// hold the password, probing (at most maxProbes, at once) those it knows
// nothing of or no longer believes; the others wait for a later look.
func (pr *prober) genuine(ctx context.Context, ms []catalog.Master, pol *Policy, now time.Time) []catalog.Master {
	for addr, v := range pr.known {
		if !now.Before(v.until) {
			delete(pr.known, addr)
		}
	}
	var probe []catalog.Master
	queued := map[string]bool{}
	for _, m := range ms {
		if pol.shareOf(m.Project) < 0 {
			continue
		}
		if _, ok := pr.known[m.Addr()]; !ok && !queued[m.Addr()] && len(probe) < maxProbes {
			queued[m.Addr()] = true
			probe = append(probe, m)
		}
	}
	errs := make([]error, len(probe))
	var wg sync.WaitGroup
	for i, m := range probe {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ssl, _ := m.Record["ssl"].(bool)
			errs[i] = probeMaster(ctx, m.Addr(), ssl, pr.password)
		}()
	}
	wg.Wait()
	for i, m := range probe {
		if errs[i] != nil {
			pr.known[m.Addr()] = verdict{until: now.Add(refusedFor)}
			pr.log.Warn("master left out: it did not prove it holds the masters' password",
				"master", m.Addr(), "project", m.Project, "err", errs[i])
			continue
		}
		pr.known[m.Addr()] = verdict{proven: true, until: now.Add(provenFor)}
	}
	var out []catalog.Master
	for _, m := range ms {
		if pol.shareOf(m.Project) < 0 || pr.known[m.Addr()].proven {
			out = append(out, m)
		}
	}
	return out
}

// probeMaster runs the password exchange with the master at addr, over
// TLS if ssl (unverified, as the workers connect), and hangs up.
func probeMaster(ctx context.Context, addr string, ssl bool, password []byte) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if ssl {
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		conn = tc
	}
	return wire.NewConn(conn, wire.Limits{}).AuthenticateClient(password, nil)
}
