package workqueue

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// TestPoolForgedDecisionNotEnforced: a hostile peer on another host
// (127.0.0.2) publishes records of pool "tp" that give master A no
// workers: one unsigned and decided later than the pool's, and, with a
// password, a replay of the pool's own signed decision of before. The
// pool's latest decision gives A one of its two workers. A releases one
// worker, not both, and the other runs every task.
func TestPoolForgedDecisionNotEnforced(t *testing.T) {
	for _, tc := range []struct {
		name     string
		password string
	}{
		{"no password", ""},
		{"password", "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pw []byte
			if tc.password != "" {
				pw = []byte(tc.password)
			}
			cat := testutil.StartCatalog(t)
			a := startMaster(t, Config{Project: projectName(t), Catalogs: []string{cat}, Password: pw,
				AdvertiseInterval: 200 * time.Millisecond})
			t0 := time.Now()
			decision := func(workers int, password []byte, at time.Time) catalog.Record {
				host, _ := os.Hostname()
				rec := catalog.Record{"type": enforce.PoolType, "name": "tp", "port": 0}
				enforce.Sign(rec, []enforce.Assignment{{Project: a.cfg.Project, Name: host, Port: a.Port(),
					Address: "127.0.0.1", Workers: workers}}, password, at)
				return rec
			}
			old := decision(0, pw, t0.Add(-time.Minute)) // the pool's, seen in the catalog before
			testutil.SendUDPFrom(t, cat, "127.0.0.1", decision(2, pw, t0))
			for range 2 {
				startWorker(t, a, worker.Config{Cores: 1, Pool: "tp", Password: pw})
			}
			waitMinute(t, "both workers connected", func() bool { return len(a.Workers()) == 2 })

			testutil.SendUDPFrom(t, cat, "127.0.0.2", decision(0, nil, t0.Add(time.Hour)))
			if pw != nil {
				old["uuid"] = "replay" // another record than the forgery's
				testutil.SendUDPFrom(t, cat, "127.0.0.2", old)
			}
			testutil.SendUDPFrom(t, cat, "127.0.0.1", decision(1, pw, t0.Add(time.Second)))
			var kept string
			waitMinute(t, "one worker released, back and kept drained, the other not drained", func() bool {
				ws := a.Workers()
				if len(ws) != 2 || ws[0].Draining == ws[1].Draining || a.Stats().WorkersReleased != 1 {
					return false
				}
				kept = ws[0].Addr
				if ws[0].Draining {
					kept = ws[1].Addr
				}
				return true
			})
			for i := range 3 {
				if _, err := a.Submit(&Task{Command: "true", Tag: strconv.Itoa(i)}); err != nil {
					t.Fatal(err)
				}
			}
			for tag, r := range waitAll(t, a, 3) {
				if !r.OK() || r.Worker != kept {
					t.Errorf("task %s: %v on %s; want done on %s", tag, r.Status, r.Worker, kept)
				}
			}
			if n := a.Stats().WorkersReleased; n != 1 {
				t.Errorf("A released %d workers, want 1", n)
			}
		})
	}
}

// TestPoolWorkerNotSentToForgedMaster: a worker of pool "tp" that follows
// the pool, with the masters' password, released by master A, goes to
// master B, which the pool's signed decision gives room; not to the
// attacker, who listens on another address of 127/8 at B's port,
// publishes a record of B from there and a record of the pool that gives
// that B 100 workers.
func TestPoolWorkerNotSentToForgedMaster(t *testing.T) {
	pw := []byte("s3cret")
	cat, a, b := poolMasters(t, pw)
	host, _ := os.Hostname()
	t0 := time.Now()
	decision := func(forA, forB int, at time.Time) catalog.Record {
		rec := catalog.Record{"type": enforce.PoolType, "name": "tp", "port": 0}
		enforce.Sign(rec, []enforce.Assignment{
			{Project: a.cfg.Project, Name: host, Port: a.Port(), Address: "127.0.0.1", Workers: forA},
			{Project: b.cfg.Project, Name: host, Port: b.Port(), Address: "127.0.0.1", Workers: forB},
		}, pw, at)
		return rec
	}
	testutil.SendUDPFrom(t, cat, "127.0.0.1", decision(2, 0, t0))
	for range 2 {
		startWorker(t, a, worker.Config{Cores: 1, Pool: "tp", FollowPool: true, Catalogs: []string{cat}, Password: pw})
	}
	waitMinute(t, "both workers with A", func() bool { return len(a.Workers()) == 2 })

	// The attacker's master, on another address at B's port: it counts
	// who comes. Another test's connection may hold that port on one
	// address of 127/8, so the first free one of a few is the attacker's.
	var ln net.Listener
	var attacker string
	for i := 2; ln == nil; i++ {
		attacker = fmt.Sprintf("127.0.0.%d", i)
		var err error
		if ln, err = net.Listen("tcp", net.JoinHostPort(attacker, strconv.Itoa(b.Port()))); err != nil && i == 20 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { ln.Close() })
	lured := make(chan struct{}, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			lured <- struct{}{}
			c.Close()
		}
	}()
	testutil.SendUDPFrom(t, cat, attacker, catalog.Record{"type": "wq_master", "project": b.cfg.Project, "name": host,
		"port": b.Port(), "workers_by_pool": "tp:0"})
	forged := catalog.Record{"type": enforce.PoolType, "name": "tp", "port": 0}
	enforce.Sign(forged, []enforce.Assignment{{Project: b.cfg.Project, Name: host, Port: b.Port(), Address: attacker, Workers: 100}},
		nil, t0.Add(time.Hour))
	testutil.SendUDPFrom(t, cat, attacker, forged)

	testutil.SendUDPFrom(t, cat, "127.0.0.1", decision(1, 1, t0.Add(time.Second)))
	waitMinute(t, "one worker released by A and serving B", func() bool {
		if len(lured) > 0 {
			t.Fatalf("a worker connected to the attacker's master")
		}
		return len(a.Workers()) == 1 && len(b.Workers()) == 1
	})
	if n := len(lured); n != 0 {
		t.Errorf("%d connections to the attacker's master", n)
	}
}
