package pool

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch/batchtest"
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

// queueTimeout bounds the wait for the first workers submitted to the
// local SLURM to start and connect: its two CPUs are shared with every
// other test that submits there (go test runs packages in parallel),
// whose jobs may hold them for minutes. A pool test's worker once stayed
// queued past waitTimeout.
const queueTimeout = 5 * time.Minute

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
	// Each master has inFlight tasks of 0.4 s until the workers and the
	// catalog are checked, a result bringing another, so that both need
	// more workers however slowly theirs start (with a fixed 12, every
	// worker but the first started 3 s late, as on a loaded machine, left
	// the masters without tasks and the test failed at its timeout). Each
	// task notes its start, so that one run twice shows.
	const inFlight = 12
	marks := t.TempDir()
	masters := map[string]*workqueue.Master{}
	addrs := map[string]string{}
	stopRefill := make(chan struct{})
	feeds := make(chan feed, 2)
	for _, proj := range []string{"alpha", "beta"} {
		m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0", Project: proj, Catalogs: []string{cat},
			AdvertiseInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		masters[proj] = m
		addrs[proj] = "127.0.0.1:" + strconv.Itoa(m.Port())
		task := func(i int) *workqueue.Task {
			mark := filepath.Join(marks, proj+"-"+strconv.Itoa(i))
			return &workqueue.Task{Command: "echo start >> " + mark + "; sleep 0.4; echo " + proj, Tag: strconv.Itoa(i)}
		}
		go func() { feeds <- feedMaster(m, proj, inFlight, task, stopRefill) }()
	}

	// Both masters listed with their tasks before the pool looks, so
	// that its first decision sees both (one alone would get every
	// worker, and keep them while it has tasks).
	waitMasters(t, cat, 2)

	d := batchtest.Local(t, 8)
	var mu sync.Mutex
	maxTotal := 0
	reports := make(chan Report, 1000)
	cfg := Config{
		Driver: d, PolicyFile: policyFile, Catalogs: []string{cat}, CatalogNetwork: "tcp", Name: "testpool",
		Worker: testWorker(dir), Interval: 100 * time.Millisecond,
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
	startPool(t, cfg)

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
	close(stopRefill)
	checkFeeds(t, feeds, len(masters), marks)
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

// startPool runs the pool of cfg until the test ends, failing the test if
// it ends before; its log, at debug level, is shown if the test fails.
func startPool(t *testing.T, cfg Config) {
	t.Helper()
	log := &testutil.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := Run(ctx, cfg); ctx.Err() == nil {
			t.Errorf("the pool ended before the test: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("pool log:\n%s", log)
		}
	})
}

// waitMasters waits until the catalog at cat lists n masters, each with
// tasks waiting, so that the pool's first decision sees them all needing
// workers. A master's first record, from its start, shows no task; the
// tasks submitted after it reach the catalog a second later: a pool that
// looked in between gave every worker to the other master, which kept
// them while it had tasks (TestPoolTwoMasters failed so once in 28).
func waitMasters(t *testing.T, cat string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d masters with tasks waiting in the catalog", n), func() bool {
		ms, err := catalog.FindMasters(context.Background(), []string{cat}, nil)
		if err != nil || len(ms) != n {
			return false
		}
		for _, m := range ms {
			if m.Record.Int("tasks_waiting") == 0 {
				return false
			}
		}
		return true
	})
}

// writeGuarded writes the policy text and the masters' password "s3cret"
// in dir, and returns their paths.
func writeGuarded(t *testing.T, dir, policy string) (policyFile, passwordFile string) {
	t.Helper()
	policyFile = filepath.Join(dir, "pool.conf")
	passwordFile = filepath.Join(dir, "password")
	if err := os.WriteFile(policyFile, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(passwordFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return policyFile, passwordFile
}

// rename replaces path as editors do: make writes at a temporary name
// beside it, renamed over it.
func rename(t *testing.T, path string, make func(tmp string) error) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := make(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// renameText replaces path by a file of text, as editors do.
func renameText(t *testing.T, path, text string) {
	t.Helper()
	rename(t, path, func(tmp string) error { return os.WriteFile(tmp, []byte(text), 0o644) })
}

// A reading is what a PolicyWatcher gives its callback.
type reading struct {
	p   *Policy
	err error
}

// watchReadings watches the policy at path until the test ends, and
// returns a function waiting for the first reading that satisfies ok, what
// it is said to be in the failure.
func watchReadings(t *testing.T, path string) (next func(what string, ok func(reading) bool) reading) {
	t.Helper()
	readings := make(chan reading, 64)
	watcher, err := WatchPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- watcher.Run(ctx, func(p *Policy, err error) { readings <- reading{p, err} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func(what string, ok func(reading) bool) reading {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case r := <-readings:
				if ok(r) {
					return r
				}
			case <-timeout:
				t.Fatalf("no reading with %s", what)
			}
		}
	}
}

// A feed is what feedMaster did: the tasks it submitted and the results
// it read, or why it stopped.
type feed struct {
	proj      string
	submitted int
	results   []*workqueue.Result
	err       error
}

// feedMaster keeps n tasks, task(0), task(1)..., outstanding on m, each
// result read bringing the next, until stop is closed; then it reads the
// results of those left. queueTimeout bounds each wait, which may be for
// a worker still queued.
func feedMaster(m *workqueue.Master, proj string, n int, task func(i int) *workqueue.Task, stop <-chan struct{}) feed {
	f := feed{proj: proj}
	submit := func() bool {
		if _, err := m.Submit(task(f.submitted)); err != nil {
			f.err = err
			return false
		}
		f.submitted++
		return true
	}
	for range n {
		if !submit() {
			return f
		}
	}
	refill := true
	for len(f.results) < f.submitted {
		ctx, cancel := context.WithTimeout(context.Background(), queueTimeout)
		r, err := m.Wait(ctx)
		cancel()
		if err != nil {
			f.err = err
			return f
		}
		f.results = append(f.results, r)
		select {
		case <-stop:
			refill = false
		default:
		}
		if refill && !submit() {
			return f
		}
	}
	return f
}

// checkFeeds reads n feeds and checks that every task they submitted
// completed, printing its project, and started once: each notes its start
// in marks/PROJECT-I.
func checkFeeds(t *testing.T, feeds <-chan feed, n int, marks string) {
	t.Helper()
	for range n {
		f := <-feeds
		if f.err != nil {
			t.Fatalf("%s: after %d of %d tasks: %v", f.proj, len(f.results), f.submitted, f.err)
		}
		for _, r := range f.results {
			if !r.OK() || string(r.Output) != f.proj+"\n" {
				t.Errorf("%s: task %s: %v exit %d: %q", f.proj, r.Tag, r.Status, r.ExitCode, r.Output)
			}
		}
		for i := range f.submitted {
			b, err := os.ReadFile(filepath.Join(marks, f.proj+"-"+strconv.Itoa(i)))
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(b, []byte("start")); n != 1 {
				t.Errorf("%s task %d started %d times: a worker was killed under it", f.proj, i, n)
			}
		}
	}
}
