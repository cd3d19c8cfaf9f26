package pool

import (
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch/batchtest"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/catalog"
)

// TestPoolLeavesOutForgedMasters: a peer on 127.0.0.2 publishes a record
// of a master of project alpha, which the policy serves, with 100 tasks
// waiting, and of one of gamma, which it does not; it listens at both.
// The pool, with the masters' password, gives the real master beta (which
// holds the password) the workers and the forged alpha none: alpha never
// proves it holds the password. It does not probe gamma at all.
func TestPoolLeavesOutForgedMasters(t *testing.T) {
	cat := testutil.StartCatalog(t)
	dir := t.TempDir()
	policyFile, pwFile := writeGuarded(t, dir, "max_workers: 2\ndistribution: alpha=1, beta=1\ndecision: D1\n")
	beta, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0", Project: "beta", Catalogs: []string{cat},
		Password: []byte("s3cret\n"), AdvertiseInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { beta.Close() })
	for i := range 4 {
		if _, err := beta.Submit(&workqueue.Task{Command: "sleep 0.2", Tag: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}

	// The attacker's masters: listeners that count who comes and hang up.
	var toAlpha, toGamma atomic.Int64
	fake := func(project string, count *atomic.Int64) {
		ln, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				count.Add(1)
				c.Close()
			}
		}()
		rec := catalog.Record{"type": "wq_master", "project": project, "name": "fake", "port": ln.Addr().(*net.TCPAddr).Port,
			"tasks_waiting": 100, "workers": 0}
		testutil.SendUDPFrom(t, cat, "127.0.0.2", rec)
	}
	fake("alpha", &toAlpha)
	fake("gamma", &toGamma)
	waitMasters(t, cat, 3)

	d := batchtest.Local(t, 4)
	var mu sync.Mutex
	var decisions []string
	startPool(t, Config{Driver: d, PolicyFile: policyFile, PasswordFile: pwFile, Catalogs: []string{cat},
		CatalogNetwork: "tcp", Name: "guarded", Worker: testWorker(dir), Interval: 100 * time.Millisecond,
		Report: func(r Report) {
			mu.Lock()
			decisions = append(decisions, FormatDecision(r.Decision))
			mu.Unlock()
		}})

	waitFor(t, "beta's tasks done by the pool's workers", func() bool {
		st := beta.Stats()
		return st.TasksComplete+st.TasksFailed == 4
	})
	mu.Lock()
	defer mu.Unlock()
	for _, s := range decisions {
		if s != "beta:2" && s != "beta:1" && s != "beta:0" && s != "" {
			t.Errorf("decision %q: want beta alone", s)
		}
	}
	if toAlpha.Load() == 0 {
		t.Errorf("the forged alpha was never probed")
	}
	if n := toGamma.Load(); n != 0 {
		t.Errorf("gamma, which the policy does not serve, was probed %d times", n)
	}
}
