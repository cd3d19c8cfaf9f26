package batch_test

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/batchtest"

	"github.com/rightsize/rightsize/internal/testutil"
)

func newTestSlurm(t *testing.T) batch.Driver { return newTestDriver(t, "slurm", batch.Options{}) }

func TestSlurmContract(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	batchtest.Contract(t, newTestSlurm)
}

func TestSlurmClose(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	batchtest.CloseRunning(t, newTestSlurm(t))
}

func TestSlurmResources(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	d := newTestSlurm(t)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	// The job reports what SLURM granted it, from SLURM's own records.
	id := batchtest.Submit(t, d, &batch.Job{
		Name:      "resources check",
		Command:   `scontrol show job "$SLURM_JOB_ID"`,
		Dir:       t.TempDir(),
		Resources: batch.Resources{Cores: 2, MemoryMB: 100, DiskMB: 10, WallTime: 90 * time.Second},
	})
	ev := rec.Final(t, id)
	if ev.State != batch.Done || ev.ExitCode != 0 {
		t.Fatalf("%+v\n%s", ev.Status, ev.Stderr)
	}
	for _, want := range []string{"JobName=resources_check", "NumCPUs=2", "CPUs/Task=2", "MinMemoryNode=100M", "MinTmpDiskNode=10M", "TimeLimit=00:02:00"} {
		if !strings.Contains(string(ev.Stdout), want) {
			t.Errorf("scontrol show job lacks %s:\n%s", want, ev.Stdout)
		}
	}
}

func TestSlurmRejected(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	d := newTestSlurm(t)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	dir := t.TempDir()

	// sbatch refuses memory no node has, outright.
	_, err := d.Submit(context.Background(), &batch.Job{Command: "true", Dir: dir, Resources: batch.Resources{MemoryMB: 1 << 30}})
	var cerr *batch.CommandError
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "Memory specification can not be satisfied") {
		t.Errorf("Submit with 1 PB of memory = %v, want sbatch's error", err)
	}

	// More cores than any node: SLURM accepts the job and keeps it
	// pending (PartitionConfig) for ever; the driver removes it.
	id := batchtest.Submit(t, d, &batch.Job{Command: "true", Dir: dir, Resources: batch.Resources{Cores: 1000}})
	ev := rec.Final(t, id)
	if ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRejected) || !strings.Contains(ev.Err.Error(), "PartitionConfig") {
		t.Errorf("1000-core job: %v %v, want ErrRejected with SLURM's reason", ev.State, ev.Err)
	}
	if out, _ := exec.Command("squeue", "--noheader", "--jobs="+id, "--format=%T").CombinedOutput(); strings.Contains(string(out), "PENDING") {
		t.Errorf("the rejected job is still pending: %s", out)
	}
}

func TestSlurmCancelledOutside(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	d := newTestSlurm(t)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	id := batchtest.Submit(t, d, &batch.Job{Command: "sleep 300", Dir: t.TempDir()})
	rec.Wait(t, id, batch.Running)
	if out, err := exec.Command("scancel", id).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v %s", err, out)
	}
	ev := rec.Final(t, id)
	if ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrVanished) || !strings.Contains(ev.Err.Error(), "CANCELLED") {
		t.Errorf("job cancelled with scancel: %v %v, want ErrVanished naming CANCELLED", ev.State, ev.Err)
	}
	if !strings.Contains(string(ev.Stderr), "CANCELLED") {
		t.Errorf("stderr tail lacks slurmstepd's message: %q", ev.Stderr)
	}
}

// TestSlurmFreeCores: SLURM's driver says how many cores its node has
// idle, less those its own pending jobs will take.
func TestSlurmFreeCores(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	d := newTestSlurm(t)
	defer batchtest.Close(t, d)
	fr, ok := d.(batch.FreeReporter)
	if !ok {
		t.Fatal("the SLURM driver is not a FreeReporter")
	}
	out, err := exec.Command("sinfo", "--noheader", "--format=%c").Output()
	if err != nil {
		t.Fatal(err)
	}
	total, _ := strconv.Atoi(strings.Fields(string(out))[0])
	free, err := fr.FreeCores(context.Background())
	if err != nil || free < 0 || free > total {
		t.Fatalf("FreeCores = %d, %v; the node has %d", free, err, total)
	}
}
