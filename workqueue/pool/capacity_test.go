package pool

import (
	"context"
	"fmt"
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
)

// TestPlanCapacityBelowShareDecides: on logical time, two masters with 50
// tasks each share max_workers 2 as alpha=9, beta=1 under D3. alpha's
// capacity, as its master advertises what it measured (Stats.CapacityTasks
// in its catalog record, read as the pool reads records), decides its
// workers when it is below its share: one worker, the other to beta. A
// master that measured less than one worker is capped at one; one that
// measured nothing, or as much as its share, gets its share.
func TestPlanCapacityBelowShareDecides(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		measured workqueue.Stats // alpha's estimates
		want     string
		submit   map[string]int
	}{
		{"not measured: shares alone", workqueue.Stats{}, "alpha:2, beta:0", map[string]int{"A": 2}},
		{"below one worker", workqueue.Stats{Capacity: 0.1, CapacityWorkers: 0.6, CapacityWeighted: 1}, "alpha:1, beta:1", map[string]int{"A": 1, "B": 1}},
		{"one and a half workers", workqueue.Stats{Capacity: 0.5, CapacityWorkers: 1.5, CapacityWeighted: 2.4}, "alpha:1, beta:1", map[string]int{"A": 1, "B": 1}},
		{"its share", workqueue.Stats{Capacity: 1.2, CapacityWorkers: 2.2, CapacityWeighted: 3}, "alpha:2, beta:0", map[string]int{"A": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(policy(t, "max_workers: 2\ndistribution: alpha=9, beta=1\ndecision: D3\n"), Limits{}, t0)
			if err != nil {
				t.Fatal(err)
			}
			record := func(addr string, capacity int) catalog.Master {
				return catalog.Master{Project: map[string]string{"A": "alpha", "B": "beta"}[addr], Name: addr, Port: 9123,
					Record: catalog.Record{"tasks_waiting": 50.0, "workers": 0.0, "capacity_tasks": float64(capacity)}}
			}
			alpha, beta := masterOf(record("A", tc.measured.CapacityTasks()), "pool"), masterOf(record("B", 0), "pool")
			alpha.Addr, beta.Addr = "A", "B"
			p.Observe([]Master{alpha, beta}, t0)
			jobs := 0
			got := submitAll(p, p.Next(t0), &jobs)
			if d := FormatDecision(p.Decision()); d != tc.want || fmt.Sprint(got) != fmt.Sprint(tc.submit) {
				t.Errorf("alpha advertising capacity_tasks %d: decision %s, submitted %v; want %s, %v",
					tc.measured.CapacityTasks(), d, got, tc.want, tc.submit)
			}
		})
	}
}

// TestPoolOnSLURMCapacityDecides: a pool driving workers through the local
// SLURM (two cores: max_workers 2) with shares alpha=1, beta=1 gives each
// real master one worker. alpha's link is slow (Config.Bandwidth): moving a
// task's input takes about fifteen times as long as the task runs, so it
// measures Eq. 4.5 below one and advertises capacity_tasks 1.
// Edited to alpha=9, beta=1 — shares alone would give alpha:2, beta:0 (as
// TestPoolOnSLURMKeepsMastersRightSized shows) — the decision stays
// alpha:1, beta:1: alpha's capacity decides its workers, and beta keeps
// its worker. Every task of both completes, each started once.
func TestPoolOnSLURMCapacityDecides(t *testing.T) {
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
		text := "max_workers: 2\ndistribution: " + shares + "\ndecision: D3\n"
		if err := os.WriteFile(policyFile+".new", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(policyFile+".new", policyFile); err != nil {
			t.Fatal(err)
		}
	}
	writePolicy("alpha=1, beta=1")

	// alpha: 20 KB in over a 16 KB/s link (over a second), 0.1 s of
	// work; beta: 0.5 s of work, no input. Each master has inFlight
	// tasks until the decisions after the edit are checked, a result
	// bringing another, so that both want more than the two workers
	// however long that takes, and few are left to run after it (a
	// fixed 25 for alpha lasted 34 s, most of them after the checks).
	const inFlight = 4
	masters := map[string]*workqueue.Master{}
	stopRefill := make(chan struct{})
	feeds := make(chan feed, 2)
	for _, proj := range []string{"alpha", "beta"} {
		cfg := workqueue.Config{Addr: "127.0.0.1:0", Project: proj, Catalogs: []string{cat},
			AdvertiseInterval: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
		work := "sleep 0.5"
		if proj == "alpha" {
			cfg.Bandwidth, work = 16<<10, "sleep 0.1"
		}
		m, err := workqueue.Listen(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		masters[proj] = m
		task := func(i int) *workqueue.Task {
			mark := filepath.Join(marks, proj+"-"+strconv.Itoa(i))
			task := &workqueue.Task{Command: "echo start >> " + mark + "; " + work + "; echo " + proj, Tag: strconv.Itoa(i)}
			if proj == "alpha" {
				task.AddInputBuffer(make([]byte, 20<<10), "in", false)
			}
			return task
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
	reports := make(chan Report, 1000)
	reloads := make(chan error, 10)
	w := testWorker(dir)
	w.Cores, w.MemoryMB, w.IdleTimeout = 1, 1000, time.Minute
	w.Name = "wqpool-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	w.Args = append(w.Args, "-b", "1")
	var mu sync.Mutex
	submitted := 0
	cfg := Config{
		Driver: d, PolicyFile: policyFile, Catalogs: []string{cat}, CatalogNetwork: "tcp", Name: "slurmpool",
		Worker: w, Interval: 200 * time.Millisecond,
		Report: func(r Report) {
			mu.Lock()
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

	connected := func() (int, int) {
		return masters["alpha"].Stats().WorkersConnected, masters["beta"].Stats().WorkersConnected
	}
	testutil.WaitFor(t, "one worker each, and alpha's capacity measured: one worker", queueTimeout, func() bool {
		a, b := connected()
		st := masters["alpha"].Stats()
		return a == 1 && b == 1 && st.TasksComplete >= 2 && st.Capacity < 1 && st.CapacityTasks() == 1
	})
	waitFor(t, "alpha's capacity_tasks 1 in the catalog", func() bool {
		ms, _ := catalog.FindMasters(context.Background(), []string{cat}, nil)
		for _, m := range ms {
			if m.Project == "alpha" && m.Record.Int("tasks_complete") >= 2 {
				return m.Record.Int("capacity_tasks") == 1
			}
		}
		return false
	})
	mu.Lock()
	before := submitted
	mu.Unlock()
	released := masters["beta"].Stats().WorkersReleased

	for len(reports) > 0 { // the decisions before the edit
		<-reports
	}
	writePolicy("alpha=9, beta=1")
	select {
	case err := <-reloads:
		if err != nil {
			t.Fatalf("policy not reloaded: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("policy never reloaded")
	}
	// Ten decisions after the reload (two seconds, several readings of
	// the catalog): alpha's capacity holds it to one worker.
	for range 10 {
		var r Report
		select {
		case r = <-reports:
		case <-time.After(waitTimeout):
			t.Fatal("no report from the pool")
		}
		if d := FormatDecision(r.Decision); d != "alpha:1, beta:1" {
			a, b := connected()
			t.Fatalf("decision %s under alpha=9, beta=1 with alpha's capacity 1 (alpha has %d workers, beta %d); want alpha:1, beta:1", d, a, b)
		}
	}
	if a, b := connected(); a != 1 || b != 1 {
		t.Errorf("alpha has %d workers, beta %d; want 1 and 1", a, b)
	}
	if n := masters["beta"].Stats().WorkersReleased - released; n != 0 {
		t.Errorf("beta released %d workers after the edit; want none, alpha's capacity being one", n)
	}

	close(stopRefill)
	checkFeeds(t, feeds, len(masters), marks)
	mu.Lock()
	defer mu.Unlock()
	if submitted != before {
		t.Errorf("%d workers submitted after the edit; want none", submitted-before)
	}
}
