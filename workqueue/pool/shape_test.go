package pool

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch/batchtest"
	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/factory"
)

func TestPolicyShapes(t *testing.T) {
	p := policy(t, "max_workers: 5\ndistribution: a=1\nshapes: 4x2h, 16x30m\n")
	want := []shape.Shape{{Cores: 4, Wall: 2 * time.Hour}, {Cores: 16, Wall: 30 * time.Minute}}
	if !slices.Equal(p.Shapes, want) {
		t.Errorf("shapes %v, want %v", p.Shapes, want)
	}
	if _, err := ParsePolicy(strings.NewReader("shapes: 4xsoon\n"), "pool.conf"); err == nil ||
		!strings.HasPrefix(err.Error(), "pool.conf:1: shapes: ") {
		t.Errorf("bad shapes: error %v, want pool.conf:1: shapes: …", err)
	}
}

// TestShapedRequests: with candidate shapes, the policy's before the
// pool's, a request of k workers is submitted as the candidate, scaled by
// k, predicted to finish first, counted as its cores over a worker's, and
// cut to the room max_workers leaves: a pool never holds more.
func TestShapedRequests(t *testing.T) {
	// 4 cores free for the first 3 hours, 16 after.
	prof := shape.Profile{{Start: 0, End: 3 * time.Hour, Free: 4}, {Start: 3 * time.Hour, End: shape.Forever, Free: 16}}
	for _, tc := range []struct {
		name                 string
		policy               string
		cfgShapes            string
		k, cores, workers    int
		wall                 time.Duration
		submittedBefore      int // workers the pool already has
		wantRoomAfterRequest int
	}{
		{"pool's shapes", "max_workers: 10\ndistribution: a=1\n", "1x2h,4x20m", 1, 4, 4, 20 * time.Minute, 0, 6},
		{"policy's shapes win", "max_workers: 10\ndistribution: a=1\nshapes: 1x2h\n", "1x2h,4x20m", 1, 1, 1, 2 * time.Hour, 0, 9},
		{"cut to max_workers", "max_workers: 10\ndistribution: a=1\n", "1x2h,4x20m", 1, 2, 2, 20 * time.Minute, 8, 0},
		{"no shapes", "max_workers: 10\ndistribution: a=1\n", "", 3, 3, 3, 0, 0, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := NewPlan(policy(t, tc.policy), Limits{}, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Name: "ws", Stay: true, Worker: factory.Worker{Command: []string{"worker"}, Cores: 1}, Chooser: prof.Chooser()}
			if tc.cfgShapes != "" {
				if cfg.Shapes, err = shape.Parse(tc.cfgShapes); err != nil {
					t.Fatal(err)
				}
			}
			p := &pool{cfg: cfg, log: slog.New(slog.DiscardHandler), plan: plan}
			for i := range tc.submittedBefore {
				plan.Submitted("old"+strconv.Itoa(i), "10.0.0.1:9123", 1)
			}
			job, n := p.shaped(context.Background(), Request{Addr: "10.0.0.1:9123", Workers: tc.k}, plan.Room())
			if job.Resources.Cores != tc.cores || job.Resources.WallTime != tc.wall || n != tc.workers ||
				!strings.Contains(job.Command, "'--cores' '"+strconv.Itoa(tc.cores)+"'") ||
				!strings.HasSuffix(job.Command, "'10.0.0.1' '9123'") {
				t.Errorf("request of %d: %d cores for %v counted as %d (%s); want %d cores for %v as %d",
					tc.k, job.Resources.Cores, job.Resources.WallTime, n, job.Command, tc.cores, tc.wall, tc.workers)
			}
			plan.Submitted("new", "10.0.0.1:9123", n)
			if r := plan.Room(); r != tc.wantRoomAfterRequest {
				t.Errorf("room after the request %d, want %d", r, tc.wantRoomAfterRequest)
			}
		})
	}
}

// TestPoolShapedWorkers: a pool whose policy shapes each worker job as 2
// cores for an hour serves a master with real workers through the local
// batch system: its first job is a 2-core worker, counted as 2, and the
// next is cut to the 1 worker max_workers 3 leaves; it never holds more
// than 3, and every task completes.
func TestPoolShapedWorkers(t *testing.T) {
	cat := testutil.StartCatalog(t)
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "pool.conf")
	if err := os.WriteFile(policyFile, []byte("max_workers: 3\ndistribution: alpha=1\ndecision: D1\nshapes: 2x1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0", Project: "alpha", Catalogs: []string{cat},
		AdvertiseInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	const tasks = 9
	for i := range tasks {
		if _, err := m.Submit(&workqueue.Task{Command: "sleep 0.3", Tag: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitMasters(t, cat, 1)

	local := batchtest.Local(t, 8)
	d := &batchtest.Submissions{Driver: local}
	var mu sync.Mutex
	maxTotal := 0
	cfg := Config{
		Driver: d, PolicyFile: policyFile, Catalogs: []string{cat}, CatalogNetwork: "tcp", Name: "shapepool",
		Worker: testWorker(dir), Interval: 100 * time.Millisecond,
		Report: func(r Report) {
			mu.Lock()
			defer mu.Unlock()
			maxTotal = max(maxTotal, r.Counts.Queued+r.Counts.Running)
		},
	}
	startPool(t, cfg)

	wctx, wcancel := context.WithTimeout(context.Background(), waitTimeout)
	defer wcancel()
	for i := range tasks {
		r, err := m.Wait(wctx)
		if err != nil {
			t.Fatalf("after %d of %d tasks: %v", i, tasks, err)
		}
		if !r.OK() {
			t.Errorf("task %s: %v exit %d", r.Tag, r.Status, r.ExitCode)
		}
	}
	jobs := d.Resources()
	if len(jobs) < 2 || jobs[0].Cores != 2 || jobs[1].Cores != 1 {
		t.Errorf("jobs %+v; want first 2 cores, then 1 (the room max_workers 3 leaves)", jobs)
	}
	for _, j := range jobs {
		if j.WallTime != time.Hour {
			t.Errorf("job %+v: want the shape's wall time, 1h", j)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxTotal > 3 {
		t.Errorf("the pool kept %d workers at once, more than max_workers 3", maxTotal)
	}
}
