// Package batchtest checks batch drivers against the batch.Driver contract
// with real jobs, for the tests of package batch and of drivers elsewhere
// (batch/wq). It is for tests only.
package batchtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
)

// EventTimeout bounds every wait for an event; batch systems here start a
// job within a second or two, so this is only hit when something is broken.
const EventTimeout = 90 * time.Second

// Recorder reads a driver's events for a test and lets it wait for a job's
// state.
type Recorder struct {
	mu     sync.Mutex
	cond   *sync.Cond
	events map[string][]batch.Event
	closed bool
}

// Record starts reading d's events; the Recorder keeps them all.
func Record(t *testing.T, d batch.Driver) *Recorder {
	r := &Recorder{events: make(map[string][]batch.Event)}
	r.cond = sync.NewCond(&r.mu)
	go func() {
		for ev := range d.Events() {
			r.mu.Lock()
			r.events[ev.ID] = append(r.events[ev.ID], ev)
			r.cond.Broadcast()
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.closed = true
		r.cond.Broadcast()
		r.mu.Unlock()
	}()
	return r
}

// Wait returns job id's first event in state s or later, failing the test
// if none comes in time.
func (r *Recorder) Wait(t *testing.T, id string, s batch.State) batch.Event {
	t.Helper()
	timer := time.AfterFunc(EventTimeout, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(EventTimeout)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for _, ev := range r.events[id] {
			if ev.State >= s {
				return ev
			}
		}
		if r.closed || time.Now().After(deadline) {
			t.Fatalf("job %s: no %v event (closed=%v); events: %+v", id, s, r.closed, r.events[id])
		}
		r.cond.Wait()
	}
}

// Final waits for job id's final event and checks that the events before
// it kept the contract: in order, at most one Running, exactly one final.
func (r *Recorder) Final(t *testing.T, id string) batch.Event {
	t.Helper()
	ev := r.Wait(t, id, batch.Done)
	r.mu.Lock()
	evs := r.events[id]
	r.mu.Unlock()
	for i := 1; i < len(evs); i++ {
		if evs[i].State <= evs[i-1].State {
			t.Errorf("job %s: events out of order: %+v", id, evs)
		}
	}
	if n := len(evs); !evs[n-1].State.Final() || n > 2 || n == 2 && evs[0].State != batch.Running {
		t.Errorf("job %s: events %+v, want [Running] then one final event", id, evs)
	}
	return ev
}

// Submit submits job to d, failing the test if d refuses it.
func Submit(t *testing.T, d batch.Driver, job *batch.Job) string {
	t.Helper()
	id, err := d.Submit(context.Background(), job)
	if err != nil {
		t.Fatalf("Submit(%q): %v", job.Command, err)
	}
	return id
}

// Local returns a local driver with slots and a 2 s kill delay, closed
// (its jobs killed) when the test ends, for tests of what drives a batch
// system.
func Local(t *testing.T, slots int) *batch.Local {
	d := batch.NewLocal(batch.Options{Slots: slots, KillDelay: 2 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Close(ctx)
	})
	return d
}

// Close closes d within a minute, failing the test on an error.
func Close(t *testing.T, d batch.Driver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// Contract runs the checks every driver must pass: the Driver
// contract, with real jobs. newDriver returns a fresh driver.
func Contract(t *testing.T, newDriver func(t *testing.T) batch.Driver) {
	d := newDriver(t)
	t.Cleanup(func() { Close(t, d) })
	rec := Record(t, d)
	dir := t.TempDir()

	t.Run("ExitStatus", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			command        string
			code           int
			stdout, stderr string
		}{
			{"true", 0, "", ""},
			{"exit 3", 3, "", ""},
			{"echo out; echo err >&2; exit 7", 7, "out\n", "err\n"},
			// exit in the command does not skip the wrapper's bookkeeping.
			{"exec sh -c 'exit 42'", 42, "", ""},
			// A command killed by a signal exits 128+n, as sh reports.
			{"kill -9 $$", 137, "", ""},
		}
		ids := make([]string, len(tests))
		for i, tt := range tests {
			ids[i] = Submit(t, d, &batch.Job{Name: "exit", Command: tt.command, Dir: dir})
		}
		for i, tt := range tests {
			ev := rec.Final(t, ids[i])
			if ev.State != batch.Done || ev.ExitCode != tt.code {
				t.Errorf("%q: %v exit %d (%v), want done exit %d", tt.command, ev.State, ev.ExitCode, ev.Err, tt.code)
			}
			if string(ev.Stdout) != tt.stdout || tt.stderr != "" && string(ev.Stderr) != tt.stderr {
				t.Errorf("%q: stdout %q stderr %q, want %q %q", tt.command, ev.Stdout, ev.Stderr, tt.stdout, tt.stderr)
			}
			if ev.Ended.IsZero() || ev.Submitted.IsZero() {
				t.Errorf("%q: times not set: %+v", tt.command, ev.Status)
			}
			st, err := d.Status(ids[i])
			if err != nil || st.State != ev.State || st.ExitCode != ev.ExitCode {
				t.Errorf("Status(%s) = %+v, %v; want the final event's %+v", ids[i], st, err, ev.Status)
			}
		}
	})

	t.Run("EnvironmentAndDirectory", func(t *testing.T) {
		t.Parallel()
		sub := filepath.Join(dir, "work dir")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		id := Submit(t, d, &batch.Job{
			Command: `printf '%s|%s|' "$GREETING" "$OTHER"; pwd`,
			Dir:     sub,
			Env:     []string{"GREETING=it's a $HOME \"quoted\"", "OTHER="},
		})
		ev := rec.Final(t, id)
		want := "it's a $HOME \"quoted\"||" + sub + "\n"
		if ev.State != batch.Done || string(ev.Stdout) != want {
			t.Errorf("got %v %q (%v), want %q", ev.State, ev.Stdout, ev.Err, want)
		}
	})

	t.Run("Files", func(t *testing.T) {
		t.Parallel()
		in := filepath.Join(dir, "in.txt")
		if err := os.WriteFile(in, []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		made := Submit(t, d, &batch.Job{
			Command: "tr a-z A-Z < in.txt > out/deep/up.txt",
			Dir:     dir,
			Inputs:  []batch.File{{Path: "in.txt"}},
			Outputs: []batch.File{{Path: "out/deep/up.txt"}},
		})
		missing := Submit(t, d, &batch.Job{Command: "true", Dir: dir, Outputs: []batch.File{{Path: "never.txt"}}})
		if ev := rec.Final(t, made); ev.State != batch.Done || ev.ExitCode != 0 {
			t.Errorf("job making its output: %v %d %v", ev.State, ev.ExitCode, ev.Err)
		} else if b, _ := os.ReadFile(filepath.Join(dir, "out/deep/up.txt")); string(b) != "HELLO\n" {
			t.Errorf("output holds %q", b)
		}
		if ev := rec.Final(t, missing); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrMissingOutput) ||
			!strings.Contains(ev.Err.Error(), "never.txt") {
			t.Errorf("job not making its output: %v %v, want ErrMissingOutput naming never.txt", ev.State, ev.Err)
		}
	})

	t.Run("BadJobs", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name string
			job  batch.Job
			want string
			is   error
		}{
			{"no command", batch.Job{Command: " "}, "no command", nil},
			{"missing input", batch.Job{Command: "true", Dir: dir, Inputs: []batch.File{{Path: "nope.txt"}}}, "nope.txt", os.ErrNotExist},
			{"missing directory", batch.Job{Command: "true", Dir: filepath.Join(dir, "nodir")}, "nodir", os.ErrNotExist},
			{"bad environment", batch.Job{Command: "true", Env: []string{"1X=y"}}, "1X=y", nil},
			{"renaming", batch.Job{Command: "true", Outputs: []batch.File{{Path: "a", Remote: "b"}}}, "renaming", errors.ErrUnsupported},
			{"negative resources", batch.Job{Command: "true", Resources: batch.Resources{Cores: -1}}, "negative", nil},
		}
		for _, tt := range tests {
			id, err := d.Submit(context.Background(), &tt.job)
			if err == nil || !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("%s: Submit = %q, %v; want an error containing %q (is %v)", tt.name, id, err, tt.want, tt.is)
			}
		}
	})

	t.Run("Remove", func(t *testing.T) {
		t.Parallel()
		id := Submit(t, d, &batch.Job{Name: "sleeper", Command: "sleep 300", Dir: dir})
		rec.Wait(t, id, batch.Running)
		if st, err := d.Status(id); err != nil || st.State != batch.Running || st.Started.IsZero() {
			t.Errorf("Status of a running job = %+v, %v", st, err)
		}
		if err := d.Remove(context.Background(), id); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		if ev := rec.Final(t, id); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRemoved) {
			t.Errorf("removed job: %v %v, want failed with ErrRemoved", ev.State, ev.Err)
		}
		if err := d.Remove(context.Background(), id); err != nil {
			t.Errorf("Remove of an ended job = %v, want nil", err)
		}
		if err := d.Remove(context.Background(), "no-such-job"); !errors.Is(err, batch.ErrUnknownJob) {
			t.Errorf("Remove of an unknown job = %v, want ErrUnknownJob", err)
		}
		if _, err := d.Status("no-such-job"); !errors.Is(err, batch.ErrUnknownJob) {
			t.Errorf("Status of an unknown job = %v, want ErrUnknownJob", err)
		}
	})
}

// CloseRunning checks that Close removes the jobs still running and closes the
// channel, and that Submit then fails.
func CloseRunning(t *testing.T, d batch.Driver) {
	CloseStarted(t, d, func(rec *Recorder, id string) { rec.Wait(t, id, batch.Running) })
}

// CloseStarted is CloseRunning for a driver that may not report a job
// running: started returns once job id has started.
func CloseStarted(t *testing.T, d batch.Driver, started func(rec *Recorder, id string)) {
	rec := Record(t, d)
	id := Submit(t, d, &batch.Job{Command: "sleep 300", Dir: t.TempDir()})
	started(rec, id)
	Close(t, d)
	rec.mu.Lock()
	for !rec.closed {
		rec.cond.Wait()
	}
	rec.mu.Unlock()
	if st, err := d.Status(id); err != nil || st.State != batch.Failed || !errors.Is(st.Err, batch.ErrRemoved) {
		t.Errorf("after Close, Status = %+v, %v; want failed with ErrRemoved", st, err)
	}
	if _, err := d.Submit(context.Background(), &batch.Job{Command: "true"}); !errors.Is(err, batch.ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// Submissions is a driver that keeps the resources of every job submitted
// to it, then submits the job to the driver it wraps.
type Submissions struct {
	batch.Driver
	mu   sync.Mutex
	jobs []batch.Resources
}

func (d *Submissions) Submit(ctx context.Context, j *batch.Job) (string, error) {
	d.mu.Lock()
	d.jobs = append(d.jobs, j.Resources)
	d.mu.Unlock()
	return d.Driver.Submit(ctx, j)
}

// Resources returns the resources of the jobs submitted so far, in order.
func (d *Submissions) Resources() []batch.Resources {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]batch.Resources(nil), d.jobs...)
}
