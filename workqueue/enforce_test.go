package workqueue

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// TestPoolDecisionEnforced: two workers of pool "tp" serve master A. When
// the pool's record gives A one and B one, A gives one of them no new
// task; that worker finishes the task it runs (no kill), is released, and
// chooses B by the decision (it follows the pool). Every task completes,
// each started once.
func TestPoolDecisionEnforced(t *testing.T) {
	cat := testutil.StartCatalog(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	cfg := func() Config {
		return Config{Project: projectName(t), Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond}
	}
	a, b := startMaster(t, cfg()), startMaster(t, cfg())
	host, _ := os.Hostname()
	publish := func(forA, forB int) {
		t.Helper()
		rec := catalog.Record{"type": enforce.PoolType, "name": "tp", "port": 0, "assignments": []enforce.Assignment{
			{Project: a.cfg.Project, Name: host, Port: a.Port(), Address: "127.0.0.1", Workers: forA},
			{Project: b.cfg.Project, Name: host, Port: b.Port(), Address: "127.0.0.1", Workers: forB},
		}}
		if err := catalog.Send(context.Background(), cat, "tcp", rec); err != nil {
			t.Fatal(err)
		}
	}
	publish(2, 0)
	for range 2 {
		startWorker(t, a, worker.Config{Cores: 1, Pool: "tp", FollowPool: true, Catalogs: []string{cat}})
	}
	submit := func(m *Master, n int, cmd string) {
		t.Helper()
		for i := range n {
			mark := filepath.Join(dir, strconv.Itoa(m.Port())+"-"+strconv.Itoa(i))
			if _, err := m.Submit(&Task{Command: "echo start >> " + mark + "; " + cmd, Tag: mark}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Two tasks that run until the gate opens, one on each worker.
	submit(a, 2, "while [ ! -e "+gate+" ]; do sleep 0.02; done")
	waitMinute(t, "both of A's workers running a task", func() bool {
		ws := a.Workers()
		return len(ws) == 2 && ws[0].Running == 1 && ws[1].Running == 1
	})

	publish(1, 1)
	waitMinute(t, "one of A's workers draining, its task still running", func() bool {
		ws := a.Workers()
		return len(ws) == 2 && (ws[0].Draining && ws[0].Running == 1) != (ws[1].Draining && ws[1].Running == 1)
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitMinute(t, "the drained worker released and serving B", func() bool {
		return len(a.Workers()) == 1 && len(b.Workers()) == 1
	})
	if n := a.Stats().WorkersReleased; n != 1 {
		t.Errorf("A released %d workers, want 1", n)
	}
	submit(b, 3, "true")
	for _, m := range []*Master{a, b} {
		for tag, r := range waitAll(t, m, map[*Master]int{a: 2, b: 3}[m]) {
			if !r.OK() {
				t.Errorf("task %s: %v %v", tag, r.Status, r.Err)
			}
			if out, _ := os.ReadFile(tag); bytes.Count(out, []byte("start")) != 1 {
				t.Errorf("task %s started %d times", tag, bytes.Count(out, []byte("start")))
			}
		}
	}
}

// waitMinute waits for cond, failing the test after a minute.
func waitMinute(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, time.Minute, cond)
}
