package wq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/batchtest"
	"github.com/rightsize/rightsize/batch/wq"
	"github.com/rightsize/rightsize/internal/testutil"

	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// newWorkQueue starts a driver with its own master on a free port and one
// real worker connected to it.
func newWorkQueue(t *testing.T) *wq.Driver {
	t.Helper()
	return newWorkQueueWith(t, false)
}

// newWorkQueueWith is newWorkQueue, the worker doing jobs that carry their
// work (batch.Job.Do) in this process if inProcess, as a master's own
// worker does.
func newWorkQueueWith(t *testing.T, inProcess bool) *wq.Driver {
	t.Helper()
	d, err := wq.Open(workqueue.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	workdir := t.TempDir() // removed after the worker stops
	go func() {
		defer close(done)
		cfg := worker.Config{
			Masters: []string{fmt.Sprintf("127.0.0.1:%d", d.Port())},
			Cores:   4, MemoryMB: 1000, DiskMB: 1000,
			Workdir: workdir, MinBackoff: 50 * time.Millisecond,
		}
		if inProcess {
			cfg.InProcess = d.InProcess
		}
		worker.Run(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return d
}

func TestWorkQueueDriver(t *testing.T) {
	d := newWorkQueue(t)
	t.Cleanup(func() { batchtest.Close(t, d) })
	rec := batchtest.Record(t, d)
	dir := t.TempDir()

	t.Run("ExitStatus", func(t *testing.T) {
		tests := []struct {
			command string
			code    int
			output  string
		}{
			{"true", 0, ""},
			{"exit 3", 3, ""},
			{"echo out; exit 7", 7, "out\n"},
			{"kill -9 $$", 137, ""},
			{`printf '%s' "$GREETING"`, 0, "it's \"quoted\""},
		}
		ids := make([]string, len(tests))
		for i, tt := range tests {
			ids[i] = batchtest.Submit(t, d, &batch.Job{Command: tt.command, Dir: dir, Env: []string{`GREETING=it's "quoted"`}})
		}
		for i, tt := range tests {
			ev := rec.Final(t, ids[i])
			if ev.State != batch.Done || ev.ExitCode != tt.code || string(ev.Stdout) != tt.output {
				t.Errorf("%q: %v exit %d output %q (%v), want done exit %d output %q", tt.command, ev.State, ev.ExitCode, ev.Stdout, ev.Err, tt.code, tt.output)
			}
			if ev.Submitted.IsZero() || ev.Ended.IsZero() {
				t.Errorf("%q: times not set: %+v", tt.command, ev.Status)
			}
		}
	})

	t.Run("FilesShippedAndRenamed", func(t *testing.T) {
		shared := filepath.Join(dir, "db.txt")
		os.WriteFile(shared, []byte("database\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "query.txt"), []byte("q\n"), 0o644)
		var ids []string
		for i := 0; i < 3; i++ {
			ids = append(ids, batchtest.Submit(t, d, &batch.Job{
				Command:  "cat reference query > result",
				Dir:      dir,
				Category: "search",
				Inputs:   []batch.File{{Path: shared, Remote: "reference", Cache: true}, {Path: "query.txt", Remote: "query"}},
				Outputs:  []batch.File{{Path: fmt.Sprintf("out/%d.txt", i), Remote: "result"}},
			}))
		}
		for i, id := range ids {
			if ev := rec.Final(t, id); ev.State != batch.Done || ev.ExitCode != 0 {
				t.Fatalf("job %d: %v %d %v %s", i, ev.State, ev.ExitCode, ev.Err, ev.Stderr)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out/%d.txt", i))); string(b) != "database\nq\n" {
				t.Errorf("output %d holds %q", i, b)
			}
		}
		missing := batchtest.Submit(t, d, &batch.Job{Command: "true", Dir: dir, Outputs: []batch.File{{Path: "never.txt"}}})
		if ev := rec.Final(t, missing); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrMissingOutput) {
			t.Errorf("job not making its output: %v %v, want ErrMissingOutput", ev.State, ev.Err)
		}
		// A command that fails without making its output reports its exit
		// status, as on a shared filesystem.
		failing := batchtest.Submit(t, d, &batch.Job{Command: "exit 3", Dir: dir, Outputs: []batch.File{{Path: "never.txt"}}})
		if ev := rec.Final(t, failing); ev.State != batch.Done || ev.ExitCode != 3 {
			t.Errorf("failing job not making its output: %v exit %d %v, want done exit 3", ev.State, ev.ExitCode, ev.Err)
		}
	})

	t.Run("BadJobs", func(t *testing.T) {
		tests := []struct {
			name string
			job  batch.Job
			want string
			is   error
		}{
			{"absolute name", batch.Job{Command: "true", Outputs: []batch.File{{Path: "/tmp/x"}}}, "relative remote name", errors.ErrUnsupported},
			{"escaping name", batch.Job{Command: "true", Inputs: []batch.File{{Path: "a", Remote: "../a"}}}, "inside its sandbox", errors.ErrUnsupported},
			{"missing input", batch.Job{Command: "true", Dir: dir, Inputs: []batch.File{{Path: "nope.txt"}}}, "nope.txt", os.ErrNotExist},
			{"bad environment", batch.Job{Command: "true", Env: []string{"1X=y"}}, "1X=y", nil},
			{"no command", batch.Job{Command: ""}, "no command", nil},
		}
		for _, tt := range tests {
			id, err := d.Submit(context.Background(), &tt.job)
			if err == nil || !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("%s: Submit = %q, %v; want an error containing %q", tt.name, id, err, tt.want)
			}
		}
	})

	t.Run("Remove", func(t *testing.T) {
		id := batchtest.Submit(t, d, &batch.Job{Command: "sleep 300", Dir: dir})
		time.Sleep(300 * time.Millisecond) // let it reach the worker
		if err := d.Remove(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if ev := rec.Final(t, id); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRemoved) {
			t.Errorf("removed job: %v %v", ev.State, ev.Err)
		}
		if err := d.Remove(context.Background(), id); err != nil {
			t.Errorf("second Remove = %v", err)
		}
		if err := d.Remove(context.Background(), "424242"); !errors.Is(err, batch.ErrUnknownJob) {
			t.Errorf("Remove of an unknown job = %v", err)
		}
		// The worker is free again: a new job runs.
		if ev := rec.Final(t, batchtest.Submit(t, d, &batch.Job{Command: "true", Dir: dir})); ev.State != batch.Done {
			t.Errorf("job after a removal: %v %v", ev.State, ev.Err)
		}
	})

	t.Run("RemoveQueued", func(t *testing.T) {
		// Each job takes the worker's 4 cores: one runs, one waits.
		whole := batch.Resources{Cores: 4}
		running := batchtest.Submit(t, d, &batch.Job{Command: "sleep 300", Dir: dir, Resources: whole})
		testutil.WaitFor(t, "the first job to reach the worker", 30*time.Second, func() bool { return d.Master().Stats().TasksRunning == 1 })
		waiting := batchtest.Submit(t, d, &batch.Job{Command: "sleep 300", Dir: dir, Resources: whole})
		for _, tt := range []struct {
			name string
			id   string
			want bool
		}{
			{"running", running, false},
			{"waiting", waiting, true},
			{"waiting, removed", waiting, false},
		} {
			if got, err := d.RemoveQueued(context.Background(), tt.id); got != tt.want || err != nil {
				t.Errorf("RemoveQueued of the %s job = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		}
		if ev := rec.Final(t, waiting); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRemoved) {
			t.Errorf("job removed from the queue: %v %v", ev.State, ev.Err)
		}
		if st, err := d.Status(running); err != nil || st.State.Final() {
			t.Errorf("the running job after RemoveQueued: %v %v", st.State, err)
		}
		if _, err := d.RemoveQueued(context.Background(), "424242"); !errors.Is(err, batch.ErrUnknownJob) {
			t.Errorf("RemoveQueued of an unknown job = %v", err)
		}
		if err := d.Remove(context.Background(), running); err != nil {
			t.Fatal(err)
		}
		rec.Final(t, running)
	})
}

func TestWorkQueueDriverClose(t *testing.T) {
	// Work Queue reports no start before a task ends: give it time to.
	batchtest.CloseStarted(t, newWorkQueue(t), func(*batchtest.Recorder, string) { time.Sleep(300 * time.Millisecond) })
}

// TestInProcess: a worker in this process does the work of a job that
// carries it (Do) instead of its command, its outputs shipped back as a
// command's would be; a failing Do fails the job with its error; a job
// without Do runs its command.
func TestInProcess(t *testing.T) {
	d := newWorkQueueWith(t, true)
	t.Cleanup(func() { batchtest.Close(t, d) })
	rec := batchtest.Record(t, d)
	dir := t.TempDir()
	var calls atomic.Int32
	do := func(content string, err error) func(context.Context) error {
		return func(context.Context) error {
			calls.Add(1)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "sub", "cells.matrix"), []byte(content), 0o644)
		}
	}
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	ok := batchtest.Submit(t, d, &batch.Job{Command: "exit 7", Dir: dir, Outputs: []batch.File{{Path: "sub/cells.matrix", Remote: "cells.matrix"}},
		Do: do("done here\n", nil)})
	if ev := rec.Final(t, ok); ev.State != batch.Done || ev.ExitCode != 0 {
		t.Errorf("job with Do: %v exit %d %v %s", ev.State, ev.ExitCode, ev.Err, ev.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "cells.matrix")); string(b) != "done here\n" {
		t.Errorf("its output: %q, %v", b, err)
	}
	failed := batchtest.Submit(t, d, &batch.Job{Command: "true", Dir: dir, Do: do("", errors.New("no such item"))})
	if ev := rec.Final(t, failed); ev.State != batch.Done || ev.ExitCode != 1 || !strings.Contains(string(ev.Stderr), "no such item") {
		t.Errorf("job whose Do fails: %v exit %d %v %q", ev.State, ev.ExitCode, ev.Err, ev.Stderr)
	}
	plain := batchtest.Submit(t, d, &batch.Job{Command: "echo ran", Dir: dir})
	if ev := rec.Final(t, plain); ev.ExitCode != 0 || string(ev.Stdout) != "ran\n" {
		t.Errorf("job without Do: exit %d %q", ev.ExitCode, ev.Stdout)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("Do called %d times, want 2", n)
	}
}
