package factory

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/distmaster/batch"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
)

// slurmUp asks sinfo, once per test binary, whether SLURM's node takes
// jobs.
var slurmUp = sync.OnceValue(func() error {
	out, err := exec.Command("sinfo", "--noheader", "--Node", "--format=%T").CombinedOutput()
	state := strings.TrimSpace(string(out))
	if err != nil {
		return errors.New("sinfo: " + err.Error() + ": " + state)
	}
	switch state {
	case "idle", "mixed", "allocated", "completing":
		return nil
	}
	return errors.New("node state " + strconv.Quote(state))
})

// needSlurm skips the test when SLURM is not up here, and fails it under
// CI=true, where .ci/run starts it.
func needSlurm(t *testing.T) {
	t.Helper()
	if err := slurmUp(); err != nil {
		if testutil.InCI() {
			t.Fatalf("SLURM is not running under CI=true (.ci/run starts it with scripts/slurm.sh start): %v", err)
		}
		t.Skipf("skipping: SLURM is not running here (start it with scripts/slurm.sh start): %v", err)
	}
}

func slurmDriver(t *testing.T) batch.Driver {
	t.Helper()
	d, err := batch.New("slurm", batch.Options{Spool: t.TempDir(), PollInterval: 300 * time.Millisecond, ExitGrace: time.Second})
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

// squeueNamed returns the IDs of the pending and running jobs named name.
func squeueNamed(t *testing.T, name string) []string {
	t.Helper()
	out, err := exec.Command("squeue", "--noheader", "--name="+name, "--states=PENDING,RUNNING,CONFIGURING,COMPLETING", "--format=%i").CombinedOutput()
	if err != nil {
		t.Fatalf("squeue: %v: %s", err, out)
	}
	return strings.Fields(string(out))
}

// TestSlurmWorkers: workers submitted with sbatch connect to a master on
// 127.0.0.1 (SLURM runs them on this machine) and run its tasks; stopping
// the factory cancels their jobs.
func TestSlurmWorkers(t *testing.T) {
	needSlurm(t)
	m := startMaster(t, workqueue.Config{})
	name := "wqf-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	r := startFactory(t, Config{
		Driver: slurmDriver(t),
		Master: masterAddr(m),
		Worker: Worker{Cores: 1, MemoryMB: 100, IdleTimeout: time.Minute, Name: name},
		Limits: Limits{Min: 1, Max: 2},
	}, t.TempDir())

	// Each task says which SLURM job its worker runs in.
	const n = 6
	submitTasks(t, m, n, `sleep 0.2; echo "$SLURM_JOB_ID"`)
	jobs := map[string]bool{}
	for _, res := range waitResults(t, m, n) {
		id := strings.TrimSpace(string(res.Output))
		if _, err := strconv.Atoi(id); err != nil {
			t.Errorf("task %s ran outside SLURM: output %q", res.Tag, res.Output)
		}
		jobs[id] = true
	}
	queued := squeueNamed(t, name)
	if len(jobs) == 0 || len(jobs) > 2 || len(queued) == 0 || len(queued) > 2 {
		t.Errorf("tasks ran in SLURM jobs %v; squeue lists %v; want 1 or 2", jobs, queued)
	}
	if _, most := r.snapshot(); most > 2 {
		t.Errorf("%d workers submitted at once, more than the maximum 2", most)
	}

	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if left := squeueNamed(t, name); len(left) != 0 {
		t.Errorf("jobs left in SLURM's queue after the factory stopped: %v", left)
	}
	if c, _ := r.snapshot(); c.Queued+c.Running != 0 {
		t.Errorf("after stopping: %+v", c)
	}
}

// TestSlurmRejected: a worker job SLURM will not run is reported in SLURM's
// words, and the factory gives up instead of resubmitting it for ever.
func TestSlurmRejected(t *testing.T) {
	needSlurm(t)
	tests := []struct {
		name   string
		worker Worker
		want   string
	}{
		// sbatch refuses it outright.
		{"memory", Worker{MemoryMB: 1 << 30}, "Memory specification can not be satisfied"},
		// SLURM takes it and keeps it pending for ever; the driver removes it.
		{"cores", Worker{Cores: 1000}, "PartitionConfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := startMaster(t, workqueue.Config{})
			tt.worker.Name = "wqf-rejected-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			r := startFactory(t, Config{
				Driver: slurmDriver(t),
				Master: masterAddr(m),
				Worker: tt.worker,
				Limits: Limits{Min: 1, Max: 1, MaxFailures: 2, Backoff: 10 * time.Millisecond},
			}, t.TempDir())
			err := r.wait()
			if err == nil || !strings.Contains(err.Error(), "2 failures in a row") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want giving up with %q", err, tt.want)
			}
			if left := squeueNamed(t, tt.worker.Name); len(left) != 0 {
				t.Errorf("rejected jobs left in the queue: %v", left)
			}
		})
	}
}
