package batch_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/batchtest"
)

// The condor driver meets fakes of the condor_* commands here
// (fakecondor_test.go): HTCondor is not packaged for Debian bookworm.

func newTestCondor(t *testing.T, bin string, extra ...string) batch.Driver {
	return newTestDriver(t, "condor", batch.Options{Bin: bin, PollInterval: 200 * time.Millisecond,
		ExitGrace: 500 * time.Millisecond, SubmitArgs: extra})
}

func TestCondorContract(t *testing.T) {
	bin := installFakeCondor(t)
	batchtest.Contract(t, func(t *testing.T) batch.Driver { return newTestCondor(t, bin) })
}

func TestCondorClose(t *testing.T) {
	batchtest.CloseRunning(t, newTestCondor(t, installFakeCondor(t)))
}

func TestCondorResources(t *testing.T) {
	bin := installFakeCondor(t)
	d := newTestCondor(t, bin)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	id := batchtest.Submit(t, d, &batch.Job{
		Name:      "resources check",
		Command:   "sleep 300",
		Dir:       t.TempDir(),
		Resources: batch.Resources{Cores: 2, MemoryMB: 100, DiskMB: 10, WallTime: 90 * time.Second},
	})
	rec.Wait(t, id, batch.Running)
	out, err := exec.Command(filepath.Join(bin, "condor_q"), "-af:j", "RequestCpus", "RequestMemory", "RequestDisk", "JobBatchName", "PeriodicRemove", id).CombinedOutput()
	if err != nil {
		t.Fatalf("condor_q: %v %s", err, out)
	}
	want := id + " 2 100 10240 resources_check (JobStatus == 2) && ((time() - EnteredCurrentStatus) > 90)\n"
	if string(out) != want {
		t.Errorf("condor_q says\n%s want\n%s", out, want)
	}
}

func TestCondorFailures(t *testing.T) {
	bin := installFakeCondor(t)
	d := newTestCondor(t, bin)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	dir := t.TempDir()
	condor := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(filepath.Join(bin, name), args...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", name, err, out)
		}
	}
	tests := []struct {
		name    string
		job     batch.Job
		outside func(id string) // what happens to the running job
		is      error
		want    string
	}{
		{"held", batch.Job{Command: "sleep 300"}, func(id string) { condor("condor_hold", id) }, batch.ErrRejected, "via condor_hold"},
		{"removed outside", batch.Job{Command: "sleep 300"}, func(id string) { condor("condor_rm", id) }, batch.ErrVanished, "Removed (via condor_rm"},
		{"wall time", batch.Job{Command: "sleep 300", Resources: batch.Resources{WallTime: time.Second}}, nil, batch.ErrTimeLimit, "PeriodicRemove"},
	}
	ids := make([]string, len(tests))
	for i, tt := range tests {
		tt.job.Dir = dir
		ids[i] = batchtest.Submit(t, d, &tt.job)
		rec.Wait(t, ids[i], batch.Running)
		if tt.outside != nil {
			tt.outside(ids[i])
		}
	}
	for i, tt := range tests {
		ev := rec.Final(t, ids[i])
		if ev.State != batch.Failed || !errors.Is(ev.Err, tt.is) || !strings.Contains(ev.Err.Error(), tt.want) {
			t.Errorf("%s: %v %v, want %v containing %q", tt.name, ev.State, ev.Err, tt.is, tt.want)
		}
	}
}

func TestCondorRejected(t *testing.T) {
	bin := installFakeCondor(t)

	// HTCondor cannot open the job's error file: it holds the job, and the
	// driver removes it and reports the hold reason.
	d := newTestCondor(t, bin, "error = "+filepath.Join(t.TempDir(), "no", "such", "dir", "err"))
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	id := batchtest.Submit(t, d, &batch.Job{Command: "true", Dir: t.TempDir()})
	ev := rec.Final(t, id)
	if ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRejected) || !strings.Contains(ev.Err.Error(), "Failed to open") {
		t.Errorf("held job: %v %v, want ErrRejected with the hold reason", ev.State, ev.Err)
	}
	if out, _ := exec.Command(filepath.Join(bin, "condor_q"), "-af:j", "JobStatus", id).Output(); len(out) > 0 {
		t.Errorf("the held job is still in the queue: %s", out)
	}

	// The schedd cannot be reached: Submit fails with condor_submit's message.
	if err := os.WriteFile(filepath.Join(bin, "state", "down"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := d.Submit(context.Background(), &batch.Job{Command: "true", Dir: t.TempDir()})
	var cerr *batch.CommandError
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "Can't find address of local schedd") {
		t.Errorf("Submit with the schedd down = %v, want condor_submit's error", err)
	}
}

// A schedd that stops answering for a while loses no job: the driver keeps
// asking, and reports the job's end once it answers again.
func TestCondorQueryOutage(t *testing.T) {
	bin := installFakeCondor(t)
	d := newTestCondor(t, bin)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	dir := t.TempDir()
	down := filepath.Join(bin, "state", "down")
	// The job waits for the outage to be over, so that it cannot end
	// (and be seen through its exit-status file) before the queries fail.
	id := batchtest.Submit(t, d, &batch.Job{Command: "while [ ! -e over ]; do sleep 0.05; done", Dir: dir})
	rec.Wait(t, id, batch.Running)
	if err := os.WriteFile(down, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // several polls, all failing; longer than ExitGrace
	if st, _ := d.Status(id); st.State != batch.Running {
		t.Fatalf("during the outage the job became %+v", st)
	}
	os.Remove(down)
	if err := os.WriteFile(filepath.Join(dir, "over"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Final(t, id); ev.State != batch.Done || ev.ExitCode != 0 {
		t.Errorf("after the outage: %+v", ev.Status)
	}
}
