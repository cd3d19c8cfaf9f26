package workqueue

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/worker"
)

func TestStatsCapacityTasks(t *testing.T) {
	for _, c := range []struct {
		name              string
		workers, weighted float64
		want              int
	}{
		{"nothing measured", 0, 0, 0},
		{"workers rounded down", 6.9, 3, 6},
		{"weighted before the window", 0, 4.2, 4},
		{"below one worker", 0.3, 1, 1},
		{"weighted below one worker", 0, 0.2, 1},
		{"no cost per task", math.Inf(1), 1, 1e9},
		{"nonsense", math.NaN(), 0, 0},
	} {
		st := Stats{Capacity: c.workers - 1, CapacityWorkers: c.workers, CapacityWeighted: c.weighted}
		if got := st.CapacityTasks(); got != c.want {
			t.Errorf("%s: CapacityTasks(%v, %v) = %d, want %d", c.name, c.workers, c.weighted, got, c.want)
		}
	}
}

// TestBandwidthLimitedMasterAdvertisesCapacityOne: a master whose link
// (Config.Bandwidth) takes far longer to move a task's input than the task
// runs measures Eq. 4.5 below one and keeps one worker busy; it advertises
// capacity_tasks 1, which pools read as a capacity, not the 0 that means
// "not reported". Were the input's time on the link not counted, the
// capacity would be in the hundreds.
func TestBandwidthLimitedMasterAdvertisesCapacityOne(t *testing.T) {
	cat := testutil.StartCatalog(t)
	project := projectName(t)
	const size, bandwidth = 48 << 10, 32 << 10 // 1.5 s of transfer a task
	m := startMaster(t, Config{Project: project, Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond,
		Bandwidth: bandwidth})
	startWorker(t, m, worker.Config{Cores: 1}) // one task at a time: each task's own transfer
	for range 2 {
		task := &Task{Command: "sleep 0.1"} // ten times shorter than its input on the link
		task.AddInputBuffer(make([]byte, size), "in", false)
		if _, err := m.Submit(task); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 {
		r, err := m.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Fatalf("task: %v %v", r.Status, r.Err)
		}
	}
	st := m.Stats()
	if st.BytesSent < 2*size || !(st.Capacity < 1) || st.CapacityTasks() != 1 {
		t.Fatalf("sent %d bytes, Eq. 4.5 %v, workers %v (advertised %d); want ≥ %d, below 1, advertised 1",
			st.BytesSent, st.Capacity, st.CapacityWorkers, st.CapacityTasks(), 2*size)
	}
	testutil.WaitFor(t, "capacity_tasks 1 in the catalog", 10*time.Second, func() bool {
		recs, _ := catalog.Query(context.Background(), cat, `type=="wq_master"`)
		for _, mm := range catalog.Masters(recs) {
			if mm.Project == project && mm.Record.Int("tasks_complete") == 2 {
				return mm.Record.Int("capacity_tasks") == 1
			}
		}
		return false
	})
}
