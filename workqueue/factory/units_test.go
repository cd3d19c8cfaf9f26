package factory

import (
	"testing"
	"time"

	"github.com/rightsize/rightsize/workqueue/catalog"
)

// TestPlanCountsWorkersByCores: a master with 8 tasks has a worker of 4
// cores that is not the factory's (started with --cores 4). It serves 4
// of the tasks, as its cores say (cores_total), and counts as 4 workers of
// one task each, not 1: the factory submits the 4 workers missing, not 7.
// A master that does not say its workers' cores has them counted one a
// connection.
func TestPlanCountsWorkersByCores(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name   string
		record catalog.Record
		submit int
	}{
		{"a worker of 4 cores", catalog.Record{"tasks_waiting": 8.0, "workers": 1.0, "cores_total": 4.0}, 4},
		{"cores not said", catalog.Record{"tasks_waiting": 8.0, "workers": 1.0}, 7},
		{"nonsense cores", catalog.Record{"tasks_waiting": 8.0, "workers": 1.0, "cores_total": -3.0}, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(Limits{Max: 20, Policy: D1}, t0)
			if err != nil {
				t.Fatal(err)
			}
			p.Observe(demandOf([]catalog.Record{tt.record}), t0)
			if d := p.Next(t0); d.Submit != tt.submit {
				t.Errorf("submitted %d, want %d", d.Submit, tt.submit)
			}
		})
	}
}
