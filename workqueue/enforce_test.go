package workqueue

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// poolMasters starts a catalog and two masters that advertise to it every
// 100 ms, with password (none if nil), for the tests of a pool's decisions.
func poolMasters(t *testing.T, password []byte) (cat string, a, b *Master) {
	cat = testutil.StartCatalog(t)
	cfg := func() Config {
		return Config{Project: projectName(t), Catalogs: []string{cat}, Password: password, AdvertiseInterval: 100 * time.Millisecond}
	}
	return cat, startMaster(t, cfg()), startMaster(t, cfg())
}

// TestPoolDecisionEnforced: two workers of pool "tp" serve master A. When
// the pool's record gives A one and B one, A gives one of them no new
// task; that worker finishes the task it runs (no kill), is released, and
// chooses B by the decision (it follows the pool). Every task completes,
// each started once.
func TestPoolDecisionEnforced(t *testing.T) {
	cat, a, b := poolMasters(t, nil)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	publish := func(forA, forB int) {
		t.Helper()
		publishPool(t, cat, poolShare{a, forA}, poolShare{b, forB})
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

// TestReleasedWorkerBackKeptDrained: a worker of pool "tp" that does not
// follow the pool (as CCTools' or --stay) comes straight back to the
// master that released it. The master keeps it drained, not releasing it
// again each time, while the other worker runs every task; when the pool
// gives the master room, it takes tasks again.
func TestReleasedWorkerBackKeptDrained(t *testing.T) {
	cat := testutil.StartCatalog(t)
	// The advertising interval is also how long a released worker is
	// remembered: long enough for a reconnection on a loaded machine.
	a := startMaster(t, Config{Project: projectName(t), Catalogs: []string{cat}, AdvertiseInterval: time.Second})
	publish := func(workers int) {
		t.Helper()
		publishPool(t, cat, poolShare{a, workers})
	}
	publish(1)
	for range 2 {
		startWorker(t, a, worker.Config{Cores: 1, Pool: "tp"})
	}
	kept := func() (WorkerStats, bool) {
		ws := a.Workers()
		if len(ws) != 2 || ws[0].Draining == ws[1].Draining {
			return WorkerStats{}, false
		}
		if ws[0].Draining {
			return ws[0], true
		}
		return ws[1], true
	}
	waitMinute(t, "one worker released, back and kept drained", func() bool {
		_, ok := kept()
		return ok && a.Stats().WorkersReleased == 1
	})
	back, _ := kept()
	for i := range 4 {
		if _, err := a.Submit(&Task{Command: "true", Tag: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for tag, r := range waitAll(t, a, 4) {
		if !r.OK() || r.Worker == back.Addr {
			t.Errorf("task %s: %v on %s; want done, not on the drained worker %s", tag, r.Status, r.Worker, back.Addr)
		}
	}
	if now, ok := kept(); !ok || now.Addr != back.Addr || a.Stats().WorkersReleased != 1 {
		t.Errorf("after the tasks: drained worker %+v (was %s), %d released; want it kept, 1 released",
			now, back.Addr, a.Stats().WorkersReleased)
	}
	publish(2)
	waitMinute(t, "the kept worker given room", func() bool {
		ws := a.Workers()
		return len(ws) == 2 && !ws[0].Draining && !ws[1].Draining
	})
}

// TestWorkerBeyondDecisionReleasedAtJoin: a worker of pool "tp" that joins
// a master already holding the workers the pool gives it is released
// before it is given any of the tasks waiting there, and moves to the
// master with room.
func TestWorkerBeyondDecisionReleasedAtJoin(t *testing.T) {
	cat, a, b := poolMasters(t, nil)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	publish := func(forA int) {
		t.Helper()
		publishPool(t, cat, poolShare{a, forA}, poolShare{b, 1})
	}
	// A's one worker runs a task until the gate opens.
	publish(0)
	startWorker(t, a, worker.Config{Cores: 1, Pool: "tp", FollowPool: true, Catalogs: []string{cat}})
	if _, err := a.Submit(&Task{Command: "while [ ! -e " + gate + " ]; do sleep 0.02; done", Tag: "gated"}); err != nil {
		t.Fatal(err)
	}
	// The decisions seen to reach A: 0 drains its worker, 1 gives it back.
	waitMinute(t, "A's worker drained by a decision of 0", func() bool {
		ws := a.Workers()
		return len(ws) == 1 && ws[0].Draining && ws[0].Running == 1
	})
	publish(1)
	waitMinute(t, "A's worker given room by a decision of 1", func() bool {
		ws := a.Workers()
		return len(ws) == 1 && !ws[0].Draining
	})
	first := a.Workers()[0].Addr
	for i := range 3 {
		if _, err := a.Submit(&Task{Command: "true", Tag: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A second worker joins A, which has tasks waiting but no room in
	// the decision: released at once, it serves B.
	startWorker(t, a, worker.Config{Cores: 1, Pool: "tp", FollowPool: true, Catalogs: []string{cat}})
	waitMinute(t, "the second worker released by A and serving B", func() bool {
		return len(b.Workers()) == 1 && a.Stats().WorkersReleased == 1
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for tag, r := range waitAll(t, a, 4) {
		if !r.OK() || r.Worker != first {
			t.Errorf("task %s: %v on %s; want done on A's own worker %s", tag, r.Status, r.Worker, first)
		}
	}
}

// TestBackWorkerTakesNoWaitingTask: a worker of pool "tp" that does not
// follow the pool, released while tasks wait, comes straight back and is
// kept drained without taking any of them; the worker within the decision
// runs them all.
func TestBackWorkerTakesNoWaitingTask(t *testing.T) {
	cat := testutil.StartCatalog(t)
	dir := t.TempDir()
	gate1, gate2 := filepath.Join(dir, "gate1"), filepath.Join(dir, "gate2")
	a := startMaster(t, Config{Project: projectName(t), Catalogs: []string{cat}, AdvertiseInterval: time.Second})
	publish := func(workers int) {
		t.Helper()
		publishPool(t, cat, poolShare{a, workers})
	}
	wait := func(gate string) string { return "while [ ! -e " + gate + " ]; do sleep 0.02; done" }
	publish(2)
	for range 2 {
		startWorker(t, a, worker.Config{Cores: 1, Pool: "tp"})
	}
	for i := range 2 {
		if _, err := a.Submit(&Task{Command: wait(gate1), Tag: "first" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitMinute(t, "both workers running a task", func() bool {
		ws := a.Workers()
		return len(ws) == 2 && ws[0].Running == 1 && ws[1].Running == 1
	})
	for i := range 3 {
		if _, err := a.Submit(&Task{Command: wait(gate2), Tag: "second" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	publish(1)
	var stays string
	waitMinute(t, "one worker drained", func() bool {
		ws := a.Workers()
		if len(ws) != 2 || ws[0].Draining == ws[1].Draining {
			return false
		}
		stays = ws[0].Addr
		if ws[0].Draining {
			stays = ws[1].Addr
		}
		return true
	})
	if err := os.WriteFile(gate1, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitMinute(t, "the drained worker released, back and kept drained, with tasks waiting", func() bool {
		ws := a.Workers()
		return len(ws) == 2 && a.Stats().WorkersReleased == 1 && a.Stats().TasksWaiting == 2 &&
			(ws[0].Draining && ws[0].Addr != stays || ws[1].Draining && ws[1].Addr != stays)
	})
	for _, w := range a.Workers() {
		if w.Draining && w.Running != 0 {
			t.Errorf("the worker back after its release runs %d tasks, want none", w.Running)
		}
	}
	if err := os.WriteFile(gate2, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for tag, r := range waitAll(t, a, 5) {
		if !r.OK() || strings.HasPrefix(tag, "second") && r.Worker != stays {
			t.Errorf("task %s: %v on %s; want done, on %s", tag, r.Status, r.Worker, stays)
		}
	}
}

// poolShare is the workers a pool's decision gives a master.
type poolShare struct {
	m       *Master
	workers int
}

// publishPool sends the catalog pool "tp"'s decision for masters on this
// host, as a pool publishes it.
func publishPool(t *testing.T, cat string, shares ...poolShare) {
	t.Helper()
	host, _ := os.Hostname()
	var as []enforce.Assignment
	for _, s := range shares {
		as = append(as, enforce.Assignment{Project: s.m.cfg.Project, Name: host, Port: s.m.Port(), Address: "127.0.0.1", Workers: s.workers})
	}
	rec := catalog.Record{"type": enforce.PoolType, "name": "tp", "port": 0, "assignments": as}
	if err := catalog.Send(context.Background(), cat, "tcp", rec); err != nil {
		t.Fatal(err)
	}
}
