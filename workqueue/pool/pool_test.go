package pool

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/factory"
)

var workqueueBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.RunWithCommands(m, func(dir string) {
		workqueueBin = filepath.Join(dir, "workqueue")
	}, "workqueue"))
}

const waitTimeout = 90 * time.Second

// TestPoolTwoMasters: a pool with max_workers 4 and shares alpha=1,
// beta=3 serves two real masters through the local batch system with real
// workers: they get 1 and 3 workers while both need more, never more than
// 4 in all; the masters count the workers under the pool's name; the
// decision is in the catalog; every task of both completes.
func TestPoolTwoMasters(t *testing.T) {
	cat := testutil.StartCatalog(t)
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "pool.conf")
	if err := os.WriteFile(policyFile, []byte("max_workers: 4\ndistribution: alpha=1, beta=3\ndecision: D1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	masters := map[string]*workqueue.Master{}
	addrs := map[string]string{}
	const tasks = 12
	for _, proj := range []string{"alpha", "beta"} {
		m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0", Project: proj, Catalogs: []string{cat},
			AdvertiseInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		masters[proj] = m
		addrs[proj] = "127.0.0.1:" + strconv.Itoa(m.Port())
		for i := range tasks {
			if _, err := m.Submit(&workqueue.Task{Command: "sleep 0.4; echo " + proj, Tag: strconv.Itoa(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Both masters listed before the pool looks, so that its first
	// decision sees both (one alone would get every worker, and keep them
	// while it has tasks).
	waitFor(t, "both masters in the catalog", func() bool {
		ms, err := catalog.FindMasters(context.Background(), []string{cat}, nil)
		return err == nil && len(ms) == 2
	})

	d := batch.NewLocal(batch.Options{Slots: 8, KillDelay: 2 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Close(ctx)
	})
	var mu sync.Mutex
	maxTotal := 0
	reports := make(chan Report, 1000)
	log := &testutil.SyncBuffer{}
	cfg := Config{
		Driver: d, PolicyFile: policyFile, Catalogs: []string{cat}, CatalogNetwork: "tcp", Name: "testpool",
		Worker: testWorker(dir), Interval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Report: func(r Report) {
			mu.Lock()
			total := 0
			for _, n := range r.Workers {
				total += n
			}
			maxTotal = max(maxTotal, total)
			mu.Unlock()
			select {
			case reports <- r:
			default:
			}
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("pool log:\n%s", log)
		}
	})

	// The decision and the workers follow the shares.
	deadline := time.After(waitTimeout)
	for {
		var r Report
		select {
		case r = <-reports:
		case <-deadline:
			t.Fatalf("the pool never kept alpha:1, beta:3")
		}
		if FormatDecision(r.Decision) == "alpha:1, beta:3" && r.Workers[addrs["alpha"]] == 1 && r.Workers[addrs["beta"]] == 3 {
			break
		}
	}

	// The masters count the pool's workers; the catalog has the decision.
	found := false
	for !found {
		recs, err := catalog.Query(context.Background(), cat, "")
		if err != nil {
			t.Fatal(err)
		}
		var pool, beta bool
		for _, r := range recs {
			pool = pool || r.String("type") == "wq_pool" && r.String("name") == "testpool" && r.String("decision") == "alpha:1, beta:3"
			beta = beta || r.String("project") == "beta" && r.String("workers_by_pool") == "testpool:3"
		}
		found = pool && beta
		select {
		case <-reports: // the next decision, published
		case <-deadline:
			t.Fatalf("the catalog never listed the decision and beta's workers_by_pool: %v", recs)
		}
	}

	// Every task completes.
	for proj, m := range masters {
		wctx, wcancel := context.WithTimeout(context.Background(), waitTimeout)
		for i := range tasks {
			r, err := m.Wait(wctx)
			if err != nil {
				t.Fatalf("%s: after %d of %d tasks: %v", proj, i, tasks, err)
			}
			if !r.OK() || string(r.Output) != proj+"\n" {
				t.Errorf("%s: task %s: %v exit %d: %q", proj, r.Tag, r.Status, r.ExitCode, r.Output)
			}
		}
		wcancel()
	}
	mu.Lock()
	defer mu.Unlock()
	if maxTotal > 4 {
		t.Errorf("the pool kept %d workers at once, more than max_workers 4", maxTotal)
	}
}

// testWorker is the real worker, with a workspace in dir and a short idle
// timeout.
func testWorker(dir string) factory.Worker {
	return factory.Worker{Command: []string{workqueueBin, "worker"}, Args: []string{"-i", "0.05", "-s", dir},
		IdleTimeout: 2 * time.Second, Dir: dir}
}

// waitFor waits for cond, failing the test after waitTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, waitTimeout, cond)
}
