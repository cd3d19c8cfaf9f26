package workqueue

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// TestWideWorkerCountsByCores: a worker of pool "tp" with 4 cores (a
// request of 4 of the pool's 1-core workers in one job) is advertised as
// 4 cores of the pool (cores_by_pool), beside 1 worker (workers_by_pool,
// as CCTools counts); when the pool, counting in 1-core workers, gives
// the master 2, the master holds 4 of them and releases it.
func TestWideWorkerCountsByCores(t *testing.T) {
	cat := testutil.StartCatalog(t)
	a := startMaster(t, Config{Project: projectName(t), Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond})
	publish := func(workers int) {
		t.Helper()
		host, _ := os.Hostname()
		as := []enforce.Assignment{{Project: a.cfg.Project, Name: host, Port: a.Port(), Address: "127.0.0.1",
			Workers: workers, WorkerCores: 1}}
		rec := catalog.Record{"type": enforce.PoolType, "name": "tp", "port": 0, "assignments": as}
		if err := catalog.Send(context.Background(), cat, "tcp", rec); err != nil {
			t.Fatal(err)
		}
	}
	publish(4)
	startWorker(t, a, worker.Config{Cores: 4, Pool: "tp"})
	var rec catalog.Record
	waitMinute(t, "the 4-core worker in the master's record", func() bool {
		rec = catalogRecord(t, a)
		return rec.String("workers_by_pool") == "tp:1"
	})
	if got := rec.String("cores_by_pool"); got != "tp:4" {
		t.Errorf("cores_by_pool %q, want tp:4", got)
	}
	if n := a.Stats().WorkersReleased; n != 0 {
		t.Fatalf("released %d workers while the pool gives 4", n)
	}
	publish(2)
	waitMinute(t, "the worker of 4 cores released", func() bool { return a.Stats().WorkersReleased >= 1 })
}

// catalogRecord is the record master m sends its catalogs now.
func catalogRecord(t *testing.T, m *Master) catalog.Record {
	t.Helper()
	reply := make(chan []byte, 1)
	if !m.send(evStatus{kind: "catalog", reply: reply}) {
		t.Fatal("master closed")
	}
	var rec catalog.Record
	if err := json.Unmarshal(<-reply, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}
