package batch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// eventTimeout bounds every wait for an event; batch systems here start a
// job within a second or two, so this is only hit when something is broken.
const eventTimeout = 90 * time.Second

// recorder reads a driver's events for a test and lets it wait for a job's
// state.
type recorder struct {
	mu     sync.Mutex
	cond   *sync.Cond
	events map[string][]Event
	closed bool
}

func record(t *testing.T, d Driver) *recorder {
	r := &recorder{events: make(map[string][]Event)}
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

// wait returns job id's first event in state s or later, failing the test
// if none comes in time.
func (r *recorder) wait(t *testing.T, id string, s State) Event {
	t.Helper()
	timer := time.AfterFunc(eventTimeout, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(eventTimeout)
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

// final waits for job id's final event and checks that the events before
// it kept the contract: in order, at most one Running, exactly one final.
func (r *recorder) final(t *testing.T, id string) Event {
	t.Helper()
	ev := r.wait(t, id, Done)
	r.mu.Lock()
	evs := r.events[id]
	r.mu.Unlock()
	for i := 1; i < len(evs); i++ {
		if evs[i].State <= evs[i-1].State {
			t.Errorf("job %s: events out of order: %+v", id, evs)
		}
	}
	if n := len(evs); !evs[n-1].State.Final() || n > 2 || n == 2 && evs[0].State != Running {
		t.Errorf("job %s: events %+v, want [Running] then one final event", id, evs)
	}
	return ev
}

// newTestDriver returns a driver of the given kind for a test: a spool of
// its own, and quicker polling than the defaults unless opts says otherwise.
func newTestDriver(t *testing.T, kind string, opts Options) Driver {
	t.Helper()
	if opts.Spool == "" {
		opts.Spool = t.TempDir()
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	if opts.ExitGrace == 0 {
		opts.ExitGrace = time.Second
	}
	d, err := New(kind, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func submit(t *testing.T, d Driver, job *Job) string {
	t.Helper()
	id, err := d.Submit(context.Background(), job)
	if err != nil {
		t.Fatalf("Submit(%q): %v", job.Command, err)
	}
	return id
}

func closeDriver(t *testing.T, d Driver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// testContract runs the checks every driver must pass: the Driver
// contract, with real jobs. newDriver returns a fresh driver.
func testContract(t *testing.T, newDriver func(t *testing.T) Driver) {
	d := newDriver(t)
	t.Cleanup(func() { closeDriver(t, d) })
	rec := record(t, d)
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
			ids[i] = submit(t, d, &Job{Name: "exit", Command: tt.command, Dir: dir})
		}
		for i, tt := range tests {
			ev := rec.final(t, ids[i])
			if ev.State != Done || ev.ExitCode != tt.code {
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
		id := submit(t, d, &Job{
			Command: `printf '%s|%s|' "$GREETING" "$OTHER"; pwd`,
			Dir:     sub,
			Env:     []string{"GREETING=it's a $HOME \"quoted\"", "OTHER="},
		})
		ev := rec.final(t, id)
		want := "it's a $HOME \"quoted\"||" + sub + "\n"
		if ev.State != Done || string(ev.Stdout) != want {
			t.Errorf("got %v %q (%v), want %q", ev.State, ev.Stdout, ev.Err, want)
		}
	})

	t.Run("Files", func(t *testing.T) {
		t.Parallel()
		in := filepath.Join(dir, "in.txt")
		if err := os.WriteFile(in, []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		made := submit(t, d, &Job{
			Command: "tr a-z A-Z < in.txt > out/deep/up.txt",
			Dir:     dir,
			Inputs:  []File{{Path: "in.txt"}},
			Outputs: []File{{Path: "out/deep/up.txt"}},
		})
		missing := submit(t, d, &Job{Command: "true", Dir: dir, Outputs: []File{{Path: "never.txt"}}})
		if ev := rec.final(t, made); ev.State != Done || ev.ExitCode != 0 {
			t.Errorf("job making its output: %v %d %v", ev.State, ev.ExitCode, ev.Err)
		} else if b, _ := os.ReadFile(filepath.Join(dir, "out/deep/up.txt")); string(b) != "HELLO\n" {
			t.Errorf("output holds %q", b)
		}
		if ev := rec.final(t, missing); ev.State != Failed || !errors.Is(ev.Err, ErrMissingOutput) ||
			!strings.Contains(ev.Err.Error(), "never.txt") {
			t.Errorf("job not making its output: %v %v, want ErrMissingOutput naming never.txt", ev.State, ev.Err)
		}
	})

	t.Run("BadJobs", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name string
			job  Job
			want string
			is   error
		}{
			{"no command", Job{Command: " "}, "no command", nil},
			{"missing input", Job{Command: "true", Dir: dir, Inputs: []File{{Path: "nope.txt"}}}, "nope.txt", os.ErrNotExist},
			{"missing directory", Job{Command: "true", Dir: filepath.Join(dir, "nodir")}, "nodir", os.ErrNotExist},
			{"bad environment", Job{Command: "true", Env: []string{"1X=y"}}, "1X=y", nil},
			{"renaming", Job{Command: "true", Outputs: []File{{Path: "a", Remote: "b"}}}, "renaming", errors.ErrUnsupported},
			{"negative resources", Job{Command: "true", Resources: Resources{Cores: -1}}, "negative", nil},
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
		id := submit(t, d, &Job{Name: "sleeper", Command: "sleep 300", Dir: dir})
		rec.wait(t, id, Running)
		if st, err := d.Status(id); err != nil || st.State != Running || st.Started.IsZero() {
			t.Errorf("Status of a running job = %+v, %v", st, err)
		}
		if err := d.Remove(context.Background(), id); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		if ev := rec.final(t, id); ev.State != Failed || !errors.Is(ev.Err, ErrRemoved) {
			t.Errorf("removed job: %v %v, want failed with ErrRemoved", ev.State, ev.Err)
		}
		if err := d.Remove(context.Background(), id); err != nil {
			t.Errorf("Remove of an ended job = %v, want nil", err)
		}
		if err := d.Remove(context.Background(), "no-such-job"); !errors.Is(err, ErrUnknownJob) {
			t.Errorf("Remove of an unknown job = %v, want ErrUnknownJob", err)
		}
		if _, err := d.Status("no-such-job"); !errors.Is(err, ErrUnknownJob) {
			t.Errorf("Status of an unknown job = %v, want ErrUnknownJob", err)
		}
	})
}

// testClose checks that Close removes the jobs still running and closes the
// channel, and that Submit then fails.
func testClose(t *testing.T, d Driver) {
	testCloseStarted(t, d, func(rec *recorder, id string) { rec.wait(t, id, Running) })
}

// testCloseStarted is testClose for a driver that may not report a job
// running: started returns once job id has started.
func testCloseStarted(t *testing.T, d Driver, started func(rec *recorder, id string)) {
	rec := record(t, d)
	id := submit(t, d, &Job{Command: "sleep 300", Dir: t.TempDir()})
	started(rec, id)
	closeDriver(t, d)
	rec.mu.Lock()
	for !rec.closed {
		rec.cond.Wait()
	}
	rec.mu.Unlock()
	if st, err := d.Status(id); err != nil || st.State != Failed || !errors.Is(st.Err, ErrRemoved) {
		t.Errorf("after Close, Status = %+v, %v; want failed with ErrRemoved", st, err)
	}
	if _, err := d.Submit(context.Background(), &Job{Command: "true"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}
