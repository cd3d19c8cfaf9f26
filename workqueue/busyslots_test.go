package workqueue

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rightsize/rightsize/workqueue/worker"
)

// TestCapacityWindowCountsTasksNotWorkers: the capacity estimate is
// taken over the most recent max(10, busy) tasks, busy counting what runs
// at once in tasks, its unit: one worker of 12 cores running 12 tasks is
// 12 busy, not 1. Two long tasks then ten short ones finish; with 12
// tasks running, the window reaches back to the two long ones, and the
// estimate (the execution time per unit of the master's time) rises far
// above the ten short ones'.
func TestCapacityWindowCountsTasksNotWorkers(t *testing.T) {
	m := startMaster(t, Config{})
	startWorker(t, m, worker.Config{Cores: 12, MemoryMB: 1200, DiskMB: 1200})
	run := func(n int, tag, cmd string) {
		t.Helper()
		for i := range n {
			if _, err := m.Submit(&Task{Command: cmd, Tag: tag + strconv.Itoa(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(2, "long", "sleep 1")
	waitAll(t, m, 2)
	run(10, "short", "true")
	waitAll(t, m, 10)
	short := m.Stats().Capacity
	gate := filepath.Join(t.TempDir(), "gate")
	run(12, "held", "while [ ! -e "+gate+" ]; do sleep 0.05; done")
	waitMinute(t, "12 tasks running on the worker", func() bool {
		ws := m.Workers()
		return len(ws) == 1 && ws[0].Running == 12
	})
	held := m.Stats().Capacity
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitAll(t, m, 12)
	if !(held > 3*short) {
		t.Errorf("capacity %.3g with 12 tasks running, %.3g over the 10 short tasks; want the window of 12 to take in the long ones (more than 3×)", held, short)
	}
}
