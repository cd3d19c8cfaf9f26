package pool

import (
	"testing"
	"time"

	"github.com/rightsize/rightsize/workqueue/catalog"
)

// TestPlanCountsWideWorkersByCores: a pool of 1-core workers
// (Limits.WorkerCores) serves a master with 8 tasks. A worker of 4 cores
// at the master — one of the pool's requests of 4 workers, or one started
// by hand with --cores 4 — serves 4 of them and counts as 4 workers, as
// its record's cores say, not 1; a request of 4 workers submitted and not
// started counts as 4. The pool submits the 4 workers missing, not 7.
func TestPlanCountsWideWorkersByCores(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name    string
		record  catalog.Record
		pending int // workers of a request submitted for the master and not started
		want    string
		submit  int
	}{
		{"the pool's worker of 4 cores",
			catalog.Record{"tasks_waiting": 8.0, "workers": 1.0, "workers_by_pool": "tp:1", "cores_by_pool": "tp:4", "cores_total": 4.0},
			0, "a:8", 4},
		{"a worker of 4 cores started by hand",
			catalog.Record{"tasks_waiting": 8.0, "workers": 1.0, "workers_by_pool": "unmanaged:1", "cores_by_pool": "unmanaged:4", "cores_total": 4.0},
			0, "a:4", 4},
		{"a request of 4 workers not started",
			catalog.Record{"tasks_waiting": 8.0, "workers": 0.0, "workers_by_pool": "", "cores_by_pool": "", "cores_total": 0.0},
			4, "a:8", 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(policy(t, "max_workers: 20\ndistribution: a=1\ndecision: D1\n"), Limits{WorkerCores: 1}, t0)
			if err != nil {
				t.Fatal(err)
			}
			const addr = "10.0.0.1:9123"
			if tt.pending > 0 {
				p.Submitted("old", addr, tt.pending)
			}
			m := masterOf(catalog.Master{Project: "a", Name: "h1", Port: 9123, Record: tt.record}, "tp")
			m.Addr = addr
			p.Observe([]Master{m}, t0)
			jobs := 0
			got := submitAll(p, p.Next(t0), &jobs)
			if d := FormatDecision(p.Decision()); d != tt.want || got[addr] != tt.submit {
				t.Errorf("decision %s, submitted %v; want %s, %d", d, got, tt.want, tt.submit)
			}
		})
	}
}
