package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/foreman"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// startForeman runs a foreman (a worker whose tasks run on the workers of
// its own master) for m until the test ends, and returns its master.
func startForeman(t *testing.T, m *workqueue.Master) *workqueue.Master {
	t.Helper()
	fm, err := foreman.New(workqueue.Config{Addr: "127.0.0.1:0", Logger: testutil.Logger(t).With("side", "foreman master")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Close() }) // after the worker has stopped
	workqueue.StartWorker(t, m, worker.Config{Foreman: fm, Logger: testutil.Logger(t).With("side", "foreman")})
	return fm.Master()
}

// waitForWorker returns m's one worker once it offers cores cores.
func waitForWorker(t *testing.T, m *workqueue.Master, cores float64) workqueue.WorkerStats {
	t.Helper()
	var ws []workqueue.WorkerStats
	testutil.WaitFor(t, fmt.Sprintf("one worker of %v cores", cores), 30*time.Second, func() bool {
		ws = m.Workers()
		return len(ws) == 1 && ws[0].Cores == cores
	})
	return ws[0]
}

// TestForeman: a master's tasks, with every kind of file, run on the two
// workers behind a foreman, which offers the master their cores together.
func TestForeman(t *testing.T) {
	m := workqueue.StartMaster(t, workqueue.Config{})
	fm := startForeman(t, m)
	workqueue.StartWorker(t, fm, worker.Config{Cores: 1})
	workqueue.StartWorker(t, fm, worker.Config{Cores: 2})
	waitForWorker(t, m, 3)
	workqueue.Exercise(t, m, t.TempDir())
	if st := fm.Stats(); st.TasksComplete != 9 {
		t.Errorf("the foreman's master completed %d tasks, want all 9", st.TasksComplete)
	}
}

// TestForemanWithCCToolsWorker: CCTools' worker serves behind our foreman.
func TestForemanWithCCToolsWorker(t *testing.T) {
	m := workqueue.StartMaster(t, workqueue.Config{})
	fm := startForeman(t, m)
	workqueue.StartCCToolsWorker(t, fm)
	waitForWorker(t, m, 2)
	workqueue.Exercise(t, m, t.TempDir())
}

// TestForemanCancel: a task the master cancels stops on the foreman's
// worker too, and the foreman takes the next one.
func TestForemanCancel(t *testing.T) {
	m := workqueue.StartMaster(t, workqueue.Config{})
	fm := startForeman(t, m)
	workqueue.StartWorker(t, fm, worker.Config{Cores: 1})
	waitForWorker(t, m, 1)
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	id, err := m.Submit(&workqueue.Task{Command: fmt.Sprintf("touch %s; exec sleep 60", started), Tag: "long"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the task to start behind the foreman", 30*time.Second, func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	if !m.Cancel(id) {
		t.Fatal("Cancel found no task")
	}
	m.Submit(&workqueue.Task{Command: "echo next", Tag: "next"})
	got := workqueue.WaitAll(t, m, 1)
	if r := got["next"]; r == nil || !r.OK() || strings.TrimSpace(string(r.Output)) != "next" {
		t.Fatalf("next task: %+v", r)
	}
	testutil.WaitFor(t, "the cancelled task to stop behind the foreman", 30*time.Second, func() bool { return fm.Stats().TasksRunning == 0 })
	if r, err := m.Wait(context.Background()); !errors.Is(err, workqueue.ErrEmpty) {
		t.Errorf("Wait after the cancelled task: %+v, %v; want nothing outstanding", r, err)
	}
}
