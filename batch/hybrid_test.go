package batch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/batchtest"
)

func TestHybridContract(t *testing.T) {
	batchtest.Contract(t, func(t *testing.T) batch.Driver {
		return batch.NewHybrid(newTestLocal(t, 8), 2, newTestLocal(t, 8))
	})
}

func TestHybridClose(t *testing.T) {
	batchtest.CloseRunning(t, batch.NewHybrid(newTestLocal(t, 2), 1, newTestLocal(t, 2)))
}

// gate returns a job that waits until open is called, and open.
func gate(t *testing.T, dir, name string) (*batch.Job, func()) {
	t.Helper()
	fifo := filepath.Join(dir, name)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return &batch.Job{Command: "read x < " + name, Dir: dir}, func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("go\n")
		f.Close()
	}
}

func TestHybridMovesQueuedJobsHere(t *testing.T) {
	dir := t.TempDir()
	// The remote "cluster" holds every job in its queue for an hour:
	// only a move can run one.
	remote := batch.NewLocal(batch.Options{Slots: 4, DispatchDelay: time.Hour, KillDelay: time.Second})
	h := batch.NewHybrid(newTestLocal(t, 1), 1, remote)
	defer batchtest.Close(t, h)
	rec := batchtest.Record(t, h)

	first, release := gate(t, dir, "first")
	a := batchtest.Submit(t, h, first)
	rec.Wait(t, a, batch.Running)
	b := batchtest.Submit(t, h, &batch.Job{Command: "echo b > b.out", Dir: dir, Outputs: []batch.File{{Path: "b.out"}}})
	c := batchtest.Submit(t, h, &batch.Job{Command: "echo c > c.out", Dir: dir})
	for _, id := range []string{b, c} {
		if st, _ := h.Status(id); st.State != batch.Queued {
			t.Fatalf("job %s is %v with the local slot taken, want queued on the remote", id, st.State)
		}
	}
	release()
	for _, id := range []string{a, b, c} {
		if ev := rec.Final(t, id); ev.State != batch.Done || ev.ExitCode != 0 {
			t.Errorf("job %s: %+v, want done", id, ev.Status)
		}
	}
	if got, want := h.Counts(), (batch.HybridCounts{Local: 3, Moved: 2}); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "b.out")); err != nil || string(b) != "b\n" {
		t.Errorf("the moved job's output: %q, %v", b, err)
	}
}

func TestHybridLeavesStartedJobsThere(t *testing.T) {
	dir := t.TempDir()
	remote := newTestLocal(t, 1)
	h := batch.NewHybrid(newTestLocal(t, 1), 1, remote)
	defer batchtest.Close(t, h)
	rec := batchtest.Record(t, h)

	here, releaseHere := gate(t, dir, "here")
	there, releaseThere := gate(t, dir, "there")
	a := batchtest.Submit(t, h, here)
	rec.Wait(t, a, batch.Running)
	b := batchtest.Submit(t, h, there) // runs on the remote's one slot
	rec.Wait(t, b, batch.Running)
	c := batchtest.Submit(t, h, &batch.Job{Command: "true", Dir: dir}) // queued behind it
	releaseHere()
	if ev := rec.Final(t, c); ev.State != batch.Done {
		t.Errorf("queued job: %+v, want done here", ev.Status)
	}
	if st, _ := h.Status(b); st.State != batch.Running {
		t.Errorf("the job running on the remote is %v, want still running there", st.State)
	}
	releaseThere()
	rec.Final(t, b)
	if got, want := h.Counts(), (batch.HybridCounts{Local: 2, Remote: 1, Moved: 1}); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
}

func TestHybridRemoveAndBigJobs(t *testing.T) {
	dir := t.TempDir()
	remote := batch.NewLocal(batch.Options{Slots: 4, DispatchDelay: time.Hour})
	// A two-core job is not moved to one slot: it waits for the remote.
	h := batch.NewHybrid(newTestLocal(t, 1), 1, remote)
	defer batchtest.Close(t, h)
	rec := batchtest.Record(t, h)
	first, release := gate(t, dir, "first")
	a := batchtest.Submit(t, h, first)
	rec.Wait(t, a, batch.Running)
	big := batchtest.Submit(t, h, &batch.Job{Command: "true", Dir: dir, Resources: batch.Resources{Cores: 2}})
	gone := batchtest.Submit(t, h, &batch.Job{Command: "true", Dir: dir})
	if err := h.Remove(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Final(t, gone); !errors.Is(ev.Err, batch.ErrRemoved) {
		t.Errorf("removed job: %+v, want ErrRemoved", ev.Status)
	}
	release()
	rec.Final(t, a)
	if st, _ := h.Status(big); st.State != batch.Queued || h.Counts().Moved != 0 {
		t.Errorf("job too big for this machine: %v, %+v; want left queued on the remote", st.State, h.Counts())
	}
	if err := h.Remove(context.Background(), "h99"); !errors.Is(err, batch.ErrUnknownJob) {
		t.Errorf("Remove of an unknown job = %v, want ErrUnknownJob", err)
	}
}
