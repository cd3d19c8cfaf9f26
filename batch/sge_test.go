package batch_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/batchtest"

	"github.com/rightsize/rightsize/internal/testutil"
)

func newTestSGE(t *testing.T) batch.Driver { return newTestDriver(t, "sge", batch.Options{}) }

func TestSGEContract(t *testing.T) {
	testutil.NeedBatchSystem(t, "sge")
	batchtest.Contract(t, newTestSGE)
}

func TestSGEClose(t *testing.T) {
	testutil.NeedBatchSystem(t, "sge")
	batchtest.CloseRunning(t, newTestSGE(t))
}

func TestSGEResources(t *testing.T) {
	testutil.NeedBatchSystem(t, "sge")
	d := newTestSGE(t)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	id := batchtest.Submit(t, d, &batch.Job{
		Name:      "resources check",
		Command:   `echo "slots=$NSLOTS"; qstat -j "$JOB_ID"`,
		Dir:       t.TempDir(),
		Resources: batch.Resources{Cores: 2, MemoryMB: 100, WallTime: 90 * time.Second},
	})
	ev := rec.Final(t, id)
	if ev.State != batch.Done || ev.ExitCode != 0 {
		t.Fatalf("%+v\n%s", ev.Status, ev.Stderr)
	}
	out := string(ev.Stdout)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^slots=2$`),
		regexp.MustCompile(`(?m)^job_name:\s+resources_check$`),
		regexp.MustCompile(`(?m)^parallel environment:\s+smp range: 2$`),
		regexp.MustCompile(`(?m)^hard resource_list:.*h_vmem=50M`), // per slot
		regexp.MustCompile(`(?m)^hard resource_list:.*h_rt=90`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the job's own view lacks %s:\n%s", want, out)
		}
	}
}

func TestSGERejected(t *testing.T) {
	testutil.NeedBatchSystem(t, "sge")
	d := newTestSGE(t)
	defer batchtest.Close(t, d)
	dir := t.TempDir()

	// qsub -w e refuses a job no queue can run, with qsub's message.
	_, err := d.Submit(context.Background(), &batch.Job{Command: "true", Dir: dir, Resources: batch.Resources{Cores: 1000}})
	var cerr *batch.CommandError
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "no suitable queues") {
		t.Errorf("Submit of a 1000-core job = %v, want qsub's error", err)
	}

	// A job Grid Engine accepts but cannot start (its error file cannot be
	// opened) goes into the Eqw state; the driver removes it and reports
	// Grid Engine's reason.
	spool := filepath.Join(t.TempDir(), "spool")
	bad := newTestDriver(t, "sge", batch.Options{SubmitArgs: []string{"-e", filepath.Join(spool, "no", "such", "dir", "err")}})
	defer batchtest.Close(t, bad)
	badRec := batchtest.Record(t, bad)
	id := batchtest.Submit(t, bad, &batch.Job{Command: "true", Dir: dir})
	ev := badRec.Final(t, id)
	if ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRejected) || !strings.Contains(ev.Err.Error(), "can't open") {
		t.Errorf("job in error state: %v %v, want ErrRejected with Grid Engine's reason", ev.State, ev.Err)
	}
	if out, _ := exec.Command("qstat", "-j", id).CombinedOutput(); !strings.Contains(string(out), "do not exist") {
		t.Errorf("the rejected job is still in the queue: %s", out)
	}
}

func TestSGEDeletedOutside(t *testing.T) {
	testutil.NeedBatchSystem(t, "sge")
	d := newTestSGE(t)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	id := batchtest.Submit(t, d, &batch.Job{Command: "sleep 300", Dir: t.TempDir()})
	rec.Wait(t, id, batch.Running)
	if out, err := exec.Command("qdel", id).CombinedOutput(); err != nil {
		t.Fatalf("qdel: %v %s", err, out)
	}
	ev := rec.Final(t, id)
	if ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrVanished) {
		t.Errorf("job deleted with qdel: %v %v, want ErrVanished", ev.State, ev.Err)
	}
}
