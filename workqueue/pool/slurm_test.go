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
)

// TestPoolOnSLURMKeepsMastersRightSized: a pool driving workers through the
// local SLURM (two cores: two workers at once) keeps two real masters
// right-sized as its policy's shares change under it. With alpha=1,
// beta=1 each master has one worker; edited to alpha=1, beta=9 the
// decision is alpha:0, beta:2 and alpha's worker, once its task is done,
// is released and moves to beta; edited to alpha=9, beta=1 both of beta's
// move to alpha. No worker is submitted for a move, none is killed mid-task
// (every task starts once), and every task of both completes.
func TestPoolOnSLURMKeepsMastersRightSized(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	cat := testutil.StartCatalog(t)
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(dir, "pool.conf")
	writePolicy := func(shares string) {
		t.Helper()
		// Replaced whole, as editors do, so that the pool never reads
		// it half written.
		text := "max_workers: 2\ndistribution: " + shares + "\ndecision: D3\n"
		if err := os.WriteFile(policyFile+".new", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(policyFile+".new", policyFile); err != nil {
			t.Fatal(err)
		}
	}
	writePolicy("alpha=1, beta=1")

	// Half-second tasks, inFlight of them on each master until the moves
	// are seen, a result bringing another, so that both masters want more
	// than the two workers throughout however long the workers queue and
	// the moves take (a fixed 50 each lasted 25 s; one run took 90), and
	// few are left to run after. Each task notes its start, so that a
	// task run twice (its worker killed under it) shows.
	const inFlight = 6
	masters := map[string]*workqueue.Master{}
	stopRefill := make(chan struct{})
	feeds := make(chan feed, 2)
	for _, proj := range []string{"alpha", "beta"} {
		m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0", Project: proj, Catalogs: []string{cat},
			AdvertiseInterval: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		masters[proj] = m
		task := func(i int) *workqueue.Task {
			mark := filepath.Join(marks, proj+"-"+strconv.Itoa(i))
			return &workqueue.Task{Command: "echo start >> " + mark + "; sleep 0.5; echo " + proj, Tag: strconv.Itoa(i)}
		}
		go func() { feeds <- feedMaster(m, proj, inFlight, task, stopRefill) }()
	}
	waitMasters(t, cat, 2)

	d, err := batch.New("slurm", batch.Options{Spool: t.TempDir(), PollInterval: 300 * time.Millisecond, ExitGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Close(ctx)
	})
	var mu sync.Mutex
	most, submitted := 0, 0
	reports := make(chan Report, 1000)
	reloads := make(chan error, 10)
	w := testWorker(dir)
	w.Cores, w.MemoryMB, w.IdleTimeout = 1, 1000, time.Minute
	w.Name = "wqpool-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	w.Args = append(w.Args, "-b", "1")
	cfg := Config{
		Driver: d, PolicyFile: policyFile, Catalogs: []string{cat}, CatalogNetwork: "tcp", Name: "slurmpool",
		Worker: w, Interval: 200 * time.Millisecond,
		Report: func(r Report) {
			mu.Lock()
			most = max(most, r.Counts.Queued+r.Counts.Running)
			submitted = max(submitted, r.Counts.Submitted)
			mu.Unlock()
			select {
			case reports <- r:
			default:
			}
		},
		Reloaded: func(err error) { reloads <- err },
	}
	startPool(t, cfg)

	// follow waits until the decision is want and each master has the
	// workers it gives it, connected, failing the test after within.
	follow := func(want string, alpha, beta int, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			var r Report
			select {
			case r = <-reports:
			case <-deadline:
				t.Fatalf("the masters never had alpha %d, beta %d workers under decision %s: they have %d and %d",
					alpha, beta, want, masters["alpha"].Stats().WorkersConnected, masters["beta"].Stats().WorkersConnected)
			}
			if FormatDecision(r.Decision) == want &&
				masters["alpha"].Stats().WorkersConnected == alpha && masters["beta"].Stats().WorkersConnected == beta {
				return
			}
		}
	}
	follow("alpha:1, beta:1", 1, 1, queueTimeout) // the workers submitted
	mu.Lock()
	before := submitted
	mu.Unlock()

	edit := func(shares string) {
		t.Helper()
		writePolicy(shares)
		select {
		case err := <-reloads:
			if err != nil {
				t.Fatalf("policy %q not reloaded: %v", shares, err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("policy %q never reloaded", shares)
		}
	}
	edit("alpha=1, beta=9")
	follow("alpha:0, beta:2", 0, 2, waitTimeout)
	edit("alpha=9, beta=1")
	follow("alpha:2, beta:0", 2, 0, waitTimeout)

	for proj, m := range masters {
		if n := m.Stats().WorkersReleased; n == 0 {
			t.Errorf("%s released no worker", proj)
		}
	}
	mu.Lock()
	if submitted != before {
		t.Errorf("%d workers submitted for the moves; want none, the released workers moving", submitted-before)
	}
	mu.Unlock()

	// The policy back to even, so that beta's remaining tasks get a
	// worker; every task completes, having started once.
	edit("alpha=1, beta=1")
	close(stopRefill)
	checkFeeds(t, feeds, len(masters), marks)
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Errorf("the pool kept %d workers at once, more than max_workers 2", most)
	}
}
