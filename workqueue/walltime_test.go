package workqueue

import (
	"testing"
	"time"

	"github.com/rightsize/rightsize/workqueue/worker"
)

// TestWallTime runs the same two tasks on our worker and on CCTools': one
// that ends within its wall time, one that does not.
func TestWallTime(t *testing.T) {
	for _, which := range []string{"rightsize", "cctools"} {
		t.Run(which, func(t *testing.T) {
			m := startMaster(t, Config{})
			if which == "cctools" {
				startCCToolsWorker(t, m)
			} else {
				startWorker(t, m, worker.Config{})
			}
			m.Submit(&Task{Command: "sleep 0.2; echo in time", WallTime: 5 * time.Second, Tag: "ok"})
			m.Submit(&Task{Command: "sleep 20", WallTime: time.Second, Tag: "late"})
			got := waitAll(t, m, 2)
			if r := got["ok"]; !r.OK() {
				t.Errorf("task within its wall time: %v %d %q", r.Status, r.ExitCode, r.Output)
			}
			if r := got["late"]; r.OK() || r.Finished.Sub(r.Submitted) > 15*time.Second {
				t.Errorf("task past its wall time: %v %d after %v", r.Status, r.ExitCode, r.Finished.Sub(r.Submitted))
			} else {
				t.Logf("%s: task past its wall time ended with %v, exit %d", which, r.Status, r.ExitCode)
			}
		})
	}
}
