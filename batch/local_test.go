package batch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/batchtest"
)

func newTestLocal(t *testing.T, slots int) *batch.Local {
	return batch.NewLocal(batch.Options{Slots: slots, KillDelay: time.Second})
}

func TestLocalContract(t *testing.T) {
	batchtest.Contract(t, func(t *testing.T) batch.Driver { return newTestLocal(t, 8) })
}

func TestLocalClose(t *testing.T) {
	batchtest.CloseRunning(t, newTestLocal(t, 2))
}

func TestLocalManyConcurrentJobs(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 60
	}
	d := newTestLocal(t, 40)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	dir := t.TempDir()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = batchtest.Submit(t, d, &batch.Job{
			Command: fmt.Sprintf("echo %d > out/%d.txt; exit %d", i*i, i, i%7),
			Dir:     dir,
			Outputs: []batch.File{{Path: fmt.Sprintf("out/%d.txt", i)}},
		})
	}
	for i, id := range ids {
		ev := rec.Final(t, id)
		if want := i % 7; ev.State != batch.Done || ev.ExitCode != want {
			t.Fatalf("job %d: %v exit %d (%v), want done exit %d", i, ev.State, ev.ExitCode, ev.Err, want)
		}
		b, err := os.ReadFile(filepath.Join(dir, "out", strconv.Itoa(i)+".txt"))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(i*i) {
			t.Fatalf("job %d wrote %q, %v", i, b, err)
		}
	}
}

func TestLocalSlots(t *testing.T) {
	d := newTestLocal(t, 2)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	dir := t.TempDir()
	// The first job takes both slots; the second waits for it, and the
	// third, though it would fit beside nothing, waits its turn.
	big := batchtest.Submit(t, d, &batch.Job{Command: "sleep 300", Dir: dir, Resources: batch.Resources{Cores: 2}})
	second := batchtest.Submit(t, d, &batch.Job{Command: "true", Dir: dir})
	third := batchtest.Submit(t, d, &batch.Job{Command: "true", Dir: dir})
	rec.Wait(t, big, batch.Running)
	for _, id := range []string{second, third} {
		if st, _ := d.Status(id); st.State != batch.Queued {
			t.Errorf("job %s is %v while the big job holds every slot, want queued", id, st.State)
		}
	}
	// Removing a queued job drops it without running it.
	if err := d.Remove(context.Background(), third); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Final(t, third); !errors.Is(ev.Err, batch.ErrRemoved) || !ev.Started.IsZero() {
		t.Errorf("removed queued job: %+v, want ErrRemoved, never started", ev.Status)
	}
	if err := d.Remove(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Final(t, second); ev.State != batch.Done {
		t.Errorf("second job after the big one was removed: %+v", ev.Status)
	}
	// A job larger than the machine can never run.
	_, err := d.Submit(context.Background(), &batch.Job{Command: "true", Resources: batch.Resources{Cores: 3}})
	if !errors.Is(err, batch.ErrRejected) || !strings.Contains(err.Error(), "3 cores") {
		t.Errorf("Submit of a 3-core job on 2 slots = %v, want ErrRejected", err)
	}
}

func TestLocalWallTime(t *testing.T) {
	d := newTestLocal(t, 2)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	id := batchtest.Submit(t, d, &batch.Job{Command: "sleep 300", Dir: t.TempDir(), Resources: batch.Resources{WallTime: 300 * time.Millisecond}})
	if ev := rec.Final(t, id); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrTimeLimit) {
		t.Errorf("job past its wall time: %v %v, want ErrTimeLimit", ev.State, ev.Err)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func TestLocalKillsProcessGroup(t *testing.T) {
	d := newTestLocal(t, 4)
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	dir := t.TempDir()
	// One job is removed while its children run; the other exits leaving a
	// child behind. Neither child may outlive its job. (The pids are
	// written to files at once: a job's stdout arrives only at its end.)
	removed := batchtest.Submit(t, d, &batch.Job{Command: "trap '' TERM; sleep 300 & echo $! > removed.pid; wait", Dir: dir})
	leaver := batchtest.Submit(t, d, &batch.Job{Command: "sleep 300 & echo $!", Dir: dir})
	rec.Wait(t, removed, batch.Running)
	var pidFile []byte
	for deadline := time.Now().Add(batchtest.EventTimeout); len(pidFile) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		pidFile, _ = os.ReadFile(filepath.Join(dir, "removed.pid"))
	}
	if err := d.Remove(context.Background(), removed); err != nil {
		t.Fatal(err)
	}
	// The shell ignores SIGTERM, so this also checks the SIGKILL that
	// follows the kill delay.
	if ev := rec.Final(t, removed); !errors.Is(ev.Err, batch.ErrRemoved) {
		t.Errorf("removed job: %+v", ev.Status)
	}
	ev := rec.Final(t, leaver)
	for name, out := range map[string][]byte{"removed job": pidFile, "exited job": ev.Stdout} {
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("%s printed %q", name, out)
		}
		// Killed processes may take a moment to be reaped.
		for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the %s's child %d outlived it", name, pid)
		}
	}
}

func TestLocalDispatchDelay(t *testing.T) {
	// An hour's delay: the job stays queued, and can be removed there.
	held := batch.NewLocal(batch.Options{Slots: 1, DispatchDelay: time.Hour})
	defer batchtest.Close(t, held)
	rec := batchtest.Record(t, held)
	id := batchtest.Submit(t, held, &batch.Job{Command: "true", Dir: t.TempDir()})
	if st, _ := held.Status(id); st.State != batch.Queued {
		t.Errorf("job within its dispatch delay is %v, want queued", st.State)
	}
	if err := held.Remove(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Final(t, id); !errors.Is(ev.Err, batch.ErrRemoved) || !ev.Started.IsZero() {
		t.Errorf("removed held job: %+v, want ErrRemoved, never started", ev.Status)
	}

	// A short one: the job starts no sooner than the delay after it was
	// submitted.
	const delay = 50 * time.Millisecond
	d := batch.NewLocal(batch.Options{Slots: 1, DispatchDelay: delay})
	defer batchtest.Close(t, d)
	rec = batchtest.Record(t, d)
	id = batchtest.Submit(t, d, &batch.Job{Command: "true", Dir: t.TempDir()})
	ev := rec.Final(t, id)
	if ev.State != batch.Done || ev.Started.Sub(ev.Submitted) < delay {
		t.Errorf("job after a %v dispatch delay: %+v, want done, started at least that late", delay, ev.Status)
	}
}

func TestLocalInProcess(t *testing.T) {
	d := batch.NewLocal(batch.Options{Slots: 2, InProcess: true})
	defer batchtest.Close(t, d)
	rec := batchtest.Record(t, d)
	dir := t.TempDir()
	pid := strconv.Itoa(os.Getpid())
	write := func(name, text string) func(context.Context) error {
		return func(context.Context) error { return os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644) }
	}
	// untilDone blocks until its context ends, which only removal or the
	// wall time does.
	untilDone := func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	tests := []struct {
		name     string
		job      batch.Job
		state    batch.State
		exit     int
		err      error
		stderr   string
		file     string // the file the job leaves
		contents string
	}{
		{name: "done here", job: batch.Job{Command: "echo $$ > out", Do: write("out", pid), Outputs: []batch.File{{Path: "out"}}},
			state: batch.Done, file: "out", contents: pid},
		{name: "missing output", job: batch.Job{Command: "true", Do: func(context.Context) error { return nil }, Outputs: []batch.File{{Path: "never"}}},
			state: batch.Failed, err: batch.ErrMissingOutput},
		{name: "error is exit 1", job: batch.Job{Command: "exit 1", Do: func(context.Context) error { return errors.New("cell (3,4): bad input") }},
			state: batch.Done, exit: 1, stderr: "cell (3,4): bad input\n"},
		{name: "panic is exit 1", job: batch.Job{Command: "exit 1", Do: func(context.Context) error { panic("boom") }},
			state: batch.Done, exit: 1, stderr: "panic: boom"},
		{name: "wall time", job: batch.Job{Command: "sleep 300", Do: untilDone, Resources: batch.Resources{WallTime: 50 * time.Millisecond}},
			state: batch.Failed, err: batch.ErrTimeLimit},
		{name: "no Do: a process", job: batch.Job{Command: "echo $$ > shell", Outputs: []batch.File{{Path: "shell"}}},
			state: batch.Done, file: "shell"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.job.Dir = dir
			ev := rec.Final(t, batchtest.Submit(t, d, &tt.job))
			if ev.State != tt.state || ev.ExitCode != tt.exit || (tt.err != nil) != (ev.Err != nil) || !errors.Is(ev.Err, tt.err) {
				t.Fatalf("%v exit %d err %v, want %v exit %d err %v", ev.State, ev.ExitCode, ev.Err, tt.state, tt.exit, tt.err)
			}
			if !strings.HasPrefix(string(ev.Stderr), tt.stderr) {
				t.Errorf("stderr %q, want it to start with %q", ev.Stderr, tt.stderr)
			}
			if ev.Started.IsZero() || ev.Ended.Before(ev.Started) {
				t.Errorf("started %v, ended %v", ev.Started, ev.Ended)
			}
			if tt.file == "" {
				return
			}
			b, err := os.ReadFile(filepath.Join(dir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.TrimSpace(string(b))
			switch {
			case tt.contents != "" && got != tt.contents:
				t.Errorf("%s holds %q, want %q", tt.file, got, tt.contents)
			case tt.contents == "" && got == pid:
				t.Errorf("a job without Do ran in this process")
			}
		})
	}

	// Removing a job in process ends its context; it holds its slot until
	// Do returns.
	id := batchtest.Submit(t, d, &batch.Job{Command: "sleep 300", Dir: dir, Do: untilDone})
	rec.Wait(t, id, batch.Running)
	if err := d.Remove(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Final(t, id); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRemoved) {
		t.Errorf("removed: %v %v, want failed, ErrRemoved", ev.State, ev.Err)
	}
}
