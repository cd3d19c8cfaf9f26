package factory

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
)

// The real batch systems the tests run workers on: SLURM and Grid Engine,
// single-node, started by scripts/slurm.sh and scripts/sge.sh.
var batchSystems = []batchSystem{
	{"slurm", func(t *testing.T, name string) bool {
		out, err := exec.Command("squeue", "--noheader", "--name="+name, "--format=%i",
			"--states=PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED").CombinedOutput()
		if err != nil {
			t.Fatalf("squeue: %v: %s", err, out)
		}
		return len(strings.TrimSpace(string(out))) > 0
	}},
	{"sge", func(t *testing.T, name string) bool {
		// qstat -j takes a job name and says when there is none.
		out, _ := exec.Command("qstat", "-j", name).CombinedOutput()
		return !strings.Contains(string(out), "do not exist")
	}},
}

type batchSystem struct {
	kind string
	// queued reports whether a job named name is pending or running.
	queued func(t *testing.T, name string) bool
}

func batchDriver(t testing.TB, kind string, submitArgs ...string) batch.Driver {
	t.Helper()
	d, err := batch.New(kind, batch.Options{Spool: t.TempDir(), PollInterval: 300 * time.Millisecond, ExitGrace: time.Second, SubmitArgs: submitArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Close(ctx)
	})
	return d
}

func uniqueName(prefix string) string {
	return prefix + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// TestBatchWorkers: workers submitted to a real batch system connect to a
// master on 127.0.0.1 (the batch system runs them on this machine) and run
// its tasks; stopping the factory removes their jobs.
func TestBatchWorkers(t *testing.T) {
	for _, sys := range batchSystems {
		t.Run(sys.kind, func(t *testing.T) {
			testutil.NeedBatchSystem(t, sys.kind)
			m := startMaster(t, workqueue.Config{})
			name := uniqueName("wqf-")
			r := startFactory(t, Config{
				Driver: batchDriver(t, sys.kind),
				Master: masterAddr(m),
				// Grid Engine enforces memory as h_vmem, a limit on address
				// space, and the Go worker reserves about 800 MB of that at
				// start: with less it dies at once ("fatal error: failed to
				// reserve page summary memory").
				Worker: Worker{Cores: 1, MemoryMB: 1000, IdleTimeout: time.Minute, Name: name},
				Limits: Limits{Min: 1, Max: 2},
			}, t.TempDir())

			// Each task says which batch job its worker runs in.
			const n = 6
			submitTasks(t, m, n, `sleep 0.2; echo "${SLURM_JOB_ID:-$JOB_ID}"`)
			jobs := map[string]bool{}
			for _, res := range waitResultsWithin(t, m, n, queueTimeout) {
				id := strings.TrimSpace(string(res.Output))
				if _, err := strconv.Atoi(id); err != nil {
					t.Errorf("task %s ran outside a %s job: output %q", res.Tag, sys.kind, res.Output)
				}
				jobs[id] = true
			}
			if len(jobs) == 0 || len(jobs) > 2 || !sys.queued(t, name) {
				t.Errorf("tasks ran in %s jobs %v; want 1 or 2, still queued", sys.kind, jobs)
			}
			if _, most := r.snapshot(); most > 2 {
				t.Errorf("%d workers submitted at once, more than the maximum 2", most)
			}

			if err := r.stop(); !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
			if sys.queued(t, name) {
				t.Errorf("jobs named %s left in the queue after the factory stopped", name)
			}
			if c, _ := r.snapshot(); c.Queued+c.Running != 0 {
				t.Errorf("after stopping: %+v", c)
			}
		})
	}
}

// TestBatchRejected: a worker job the batch system will not run is reported
// in the system's own words, and the factory gives up instead of
// resubmitting it for ever.
func TestBatchRejected(t *testing.T) {
	tests := []struct {
		kind       string
		name       string
		worker     Worker
		submitArgs func(t *testing.T) []string
		want       string
	}{
		// sbatch refuses it outright.
		{kind: "slurm", name: "memory", worker: Worker{MemoryMB: 1 << 30}, want: "Memory specification can not be satisfied"},
		// SLURM takes it and keeps it pending for ever; the driver removes it.
		{kind: "slurm", name: "cores", worker: Worker{Cores: 1000}, want: "PartitionConfig"},
		// qsub -w e refuses it outright.
		{kind: "sge", name: "cores", worker: Worker{Cores: 1000}, want: "no suitable queues"},
		// Grid Engine takes it and cannot start it (Eqw): its error file
		// cannot be opened.
		{kind: "sge", name: "error state", submitArgs: func(t *testing.T) []string {
			return []string{"-e", filepath.Join(t.TempDir(), "no", "such", "dir", "err")}
		}, want: "can't open"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.name, func(t *testing.T) {
			sys := batchSystems[slices.IndexFunc(batchSystems, func(s batchSystem) bool { return s.kind == tt.kind })]
			testutil.NeedBatchSystem(t, sys.kind)
			var args []string
			if tt.submitArgs != nil {
				args = tt.submitArgs(t)
			}
			m := startMaster(t, workqueue.Config{})
			tt.worker.Name = uniqueName("wqf-rejected-")
			r := startFactory(t, Config{
				Driver: batchDriver(t, tt.kind, args...),
				Master: masterAddr(m),
				Worker: tt.worker,
				Limits: Limits{Min: 1, Max: 1, Retries: 1, Backoff: 10 * time.Millisecond},
			}, t.TempDir())
			err := r.wait()
			if err == nil || !strings.Contains(err.Error(), "2 failures in a row") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want giving up with %q", err, tt.want)
			}
			if sys.queued(t, tt.worker.Name) {
				t.Errorf("rejected jobs named %s left in the queue", tt.worker.Name)
			}
		})
	}
}

// TestCondorWorkers runs the factory's workers on the fake HTCondor of
// testutil.FakeCondor (HTCondor is not packaged for Debian; the fake
// honours the real command lines and output): they connect and run the
// master's tasks, and stopping the factory removes their jobs, which leave
// the fake's queue for its history.
func TestCondorWorkers(t *testing.T) {
	bin := testutil.FakeCondor(t)
	d, err := batch.New("condor", batch.Options{Bin: bin, Spool: t.TempDir(), PollInterval: 200 * time.Millisecond, ExitGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Close(ctx)
	})
	m := startMaster(t, workqueue.Config{})
	r := startFactory(t, Config{
		Driver: d,
		Master: masterAddr(m),
		Worker: Worker{Cores: 1, MemoryMB: 100, IdleTimeout: time.Minute},
		Limits: Limits{Min: 1, Max: 2},
	}, t.TempDir())

	const n = 4
	submitTasks(t, m, n, "sleep 0.1; echo ok")
	for _, res := range waitResults(t, m, n) {
		if string(res.Output) != "ok\n" {
			t.Errorf("task %s: output %q", res.Tag, res.Output)
		}
	}
	if _, most := r.snapshot(); most < 1 || most > 2 {
		t.Errorf("%d workers submitted at most, want 1 or 2", most)
	}
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	queue, _ := os.ReadDir(filepath.Join(bin, "state", "queue"))
	history, _ := os.ReadDir(filepath.Join(bin, "state", "history"))
	if len(queue) != 0 || len(history) == 0 {
		t.Errorf("after stopping: %d jobs in the fake HTCondor's queue, %d in its history; want none and some", len(queue), len(history))
	}
}
