package pool

import (
	"fmt"
	"testing"
	"time"

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
		{"below one worker", workqueue.Stats{Capacity: 0.3, CapacityWeighted: 1}, "alpha:1, beta:1", map[string]int{"A": 1, "B": 1}},
		{"one and a half workers", workqueue.Stats{Capacity: 1.5, CapacityWeighted: 2.4}, "alpha:1, beta:1", map[string]int{"A": 1, "B": 1}},
		{"its share", workqueue.Stats{Capacity: 2.2, CapacityWeighted: 3}, "alpha:2, beta:0", map[string]int{"A": 2}},
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
