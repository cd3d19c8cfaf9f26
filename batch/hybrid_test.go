package batch_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/batchtest"
	"github.com/rightsize/rightsize/internal/testutil"
)

func TestHybridContract(t *testing.T) {
	tests := []struct {
		name   string
		remote func() batch.Driver
	}{
		{"remote runs jobs", func() batch.Driver { return newTestLocal(t, 4) }},
		// Every job the local slot cannot take at once waits for a move.
		{"remote queue never moves", func() batch.Driver {
			return batch.NewLocal(batch.Options{Slots: 4, DispatchDelay: time.Hour, KillDelay: time.Second})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batchtest.Contract(t, func(t *testing.T) batch.Driver {
				return batch.NewHybrid(newTestLocal(t, 1), 1, tt.remote())
			})
		})
	}
}

func TestHybridClose(t *testing.T) {
	batchtest.CloseRunning(t, batch.NewHybrid(newTestLocal(t, 1), 1, newTestLocal(t, 1)))
}

// fakeDriver is a batch system the test runs by hand: its jobs stay queued
// until the test starts or ends them.
type fakeDriver struct {
	prefix string // of its IDs
	t      *batch.Jobs

	mu      sync.Mutex
	ids     []string // in submission order
	removed []string
	closed  bool
	// submitErr and removeErr make Submit and Remove fail; removeFinishes
	// makes a removed job end Done, as if it had finished as it was
	// removed.
	submitErr, removeErr error
	removeFinishes       bool
}

func newFakeDriver(prefix string) *fakeDriver {
	return &fakeDriver{prefix: prefix, t: batch.NewJobs()}
}

func (f *fakeDriver) Submit(ctx context.Context, job *batch.Job) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.submitErr != nil {
		return "", f.submitErr
	}
	id := f.prefix + strconv.Itoa(len(f.ids)+1)
	if err := f.t.Add(id, batch.Status{State: batch.Queued, Submitted: time.Now()}); err != nil {
		return "", err
	}
	f.ids = append(f.ids, id)
	return id, nil
}

func (f *fakeDriver) Status(id string) (batch.Status, error) { return f.t.Status(id) }

func (f *fakeDriver) Remove(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removeErr != nil {
		return f.removeErr
	}
	if _, err := f.t.Status(id); err != nil {
		return err
	}
	f.removed = append(f.removed, id)
	if f.removeFinishes {
		f.t.Set(batch.Event{ID: id, Status: batch.Status{State: batch.Done, Ended: time.Now()}})
	}
	f.t.Set(batch.Event{ID: id, Status: batch.Status{State: batch.Failed, Err: batch.ErrRemoved, Ended: time.Now()}})
	return nil
}

func (f *fakeDriver) Events() <-chan batch.Event { return f.t.Events() }

func (f *fakeDriver) Close(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, id := range f.t.Unfinished() {
		f.t.Set(batch.Event{ID: id, Status: batch.Status{State: batch.Failed, Err: batch.ErrRemoved, Ended: time.Now()}})
	}
	f.t.Close()
	return nil
}

// with calls change with f locked, for changing its settings.
func (f *fakeDriver) with(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
}

func (f *fakeDriver) start(id string) {
	f.t.Set(batch.Event{ID: id, Status: batch.Status{State: batch.Running, Started: time.Now()}})
}

func (f *fakeDriver) finish(id string, code int) {
	f.t.Set(batch.Event{ID: id, Status: batch.Status{State: batch.Done, ExitCode: code, Ended: time.Now()}})
}

// submitted returns the IDs of the jobs submitted so far, and those removed.
func (f *fakeDriver) submitted() (ids, removed []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ids), slices.Clone(f.removed)
}

// checkFake checks which jobs f was given and which were removed from it.
func checkFake(t *testing.T, name string, f *fakeDriver, ids, removed []string) {
	t.Helper()
	gotIDs, gotRemoved := f.submitted()
	if !slices.Equal(gotIDs, ids) || !slices.Equal(gotRemoved, removed) {
		t.Errorf("%s driver got jobs %q and removed %q, want %q and %q", name, gotIDs, gotRemoved, ids, removed)
	}
}

// checkCounts checks h's counts. It also waits for h to have handled the
// events the test has received: Counts takes the lock under which Hybrid
// passes each event on and makes the moves it allows.
func checkCounts(t *testing.T, h *batch.Hybrid, want batch.HybridCounts) {
	t.Helper()
	if got := h.Counts(); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
}

func TestHybridPlacesAndMoves(t *testing.T) {
	local, remote := newFakeDriver("L"), newFakeDriver("R")
	h := batch.NewHybrid(local, 1, remote)
	defer batchtest.Close(t, h)
	rec := batchtest.Record(t, h)

	var a, b, c, d string
	for _, id := range []*string{&a, &b, &c, &d} {
		*id = batchtest.Submit(t, h, &batch.Job{Command: "true"})
	}
	checkFake(t, "local", local, []string{"L1"}, nil)
	checkFake(t, "remote", remote, []string{"R1", "R2", "R3"}, nil)
	submitted, err := h.Status(b)
	if err != nil {
		t.Fatal(err)
	}

	// c starts on the remote: it is not moved, though queued before d.
	remote.start("R2")
	rec.Wait(t, c, batch.Running)

	// a's slot frees: b, the earliest job queued there, moves here.
	local.finish("L1", 0)
	rec.Final(t, a)
	checkCounts(t, h, batch.HybridCounts{Local: 1, Moved: 1})
	checkFake(t, "local", local, []string{"L1", "L2"}, nil)
	checkFake(t, "remote", remote, []string{"R1", "R2", "R3"}, []string{"R1"})
	if st, err := h.Status(b); err != nil || st.State != batch.Queued {
		t.Errorf("moved job: %+v, %v; want still queued", st, err)
	}

	// Removing the moved job removes it here; its slot goes to d.
	local.start("L2")
	rec.Wait(t, b, batch.Running)
	if err := h.Remove(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Final(t, b); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRemoved) {
		t.Errorf("removed job: %+v, want failed with ErrRemoved", ev.Status)
	} else if !ev.Submitted.Equal(submitted.Submitted) {
		t.Errorf("moved job submitted at %v, then at %v; want its submission to Hybrid", submitted.Submitted, ev.Submitted)
	}
	checkCounts(t, h, batch.HybridCounts{Local: 2, Moved: 2})
	checkFake(t, "local", local, []string{"L1", "L2", "L3"}, []string{"L2"})
	checkFake(t, "remote", remote, []string{"R1", "R2", "R3"}, []string{"R1", "R3"})

	remote.finish("R2", 0)
	local.finish("L3", 3)
	for _, tt := range []struct {
		id   string
		code int
	}{{a, 0}, {c, 0}, {d, 3}} {
		if ev := rec.Final(t, tt.id); ev.State != batch.Done || ev.ExitCode != tt.code {
			t.Errorf("job %s: %+v, want done exit %d", tt.id, ev.Status, tt.code)
		}
	}
	checkCounts(t, h, batch.HybridCounts{Local: 3, Remote: 1, Moved: 2})
}

// TestHybridMoves follows a job queued on the remote while the one local
// slot is taken, through what may happen to it before the slot frees.
func TestHybridMoves(t *testing.T) {
	errRefused := errors.New("refused")
	tests := []struct {
		name   string
		job    batch.Job
		before func(h *batch.Hybrid, id string, local, remote *fakeDriver)

		moved   bool // the job ends on the local driver, as L2
		state   batch.State
		code    int
		err     error
		counts  batch.HybridCounts
		removed []string // from remote
	}{{
		name:  "queued there",
		moved: true, state: batch.Done, code: 5,
		counts: batch.HybridCounts{Local: 2, Moved: 1}, removed: []string{"R1"},
	}, {
		name:   "started there",
		before: func(_ *batch.Hybrid, _ string, _, remote *fakeDriver) { remote.start("R1") },
		state:  batch.Done, code: 7,
		counts: batch.HybridCounts{Local: 1, Remote: 1},
	}, {
		name:   "ended there",
		before: func(_ *batch.Hybrid, _ string, _, remote *fakeDriver) { remote.finish("R1", 7) },
		state:  batch.Done, code: 7,
		counts: batch.HybridCounts{Local: 1, Remote: 1},
	}, {
		name: "removal refused there",
		before: func(_ *batch.Hybrid, _ string, _, remote *fakeDriver) {
			remote.with(func() { remote.removeErr = errRefused })
		},
		state: batch.Done, code: 7,
		counts: batch.HybridCounts{Local: 1, Remote: 1},
	}, {
		// The remote's final event, Done, is not the job's: that comes
		// from here.
		name: "ended there as it was removed",
		before: func(_ *batch.Hybrid, _ string, _, remote *fakeDriver) {
			remote.with(func() { remote.removeFinishes = true })
		},
		moved: true, state: batch.Done, code: 5,
		counts: batch.HybridCounts{Local: 2, Moved: 1}, removed: []string{"R1"},
	}, {
		name:  "too big for here",
		job:   batch.Job{Command: "true", Resources: batch.Resources{Cores: 2}},
		state: batch.Done, code: 7,
		counts: batch.HybridCounts{Local: 1, Remote: 1},
	}, {
		// Taken off the remote, the job cannot go back to the head of its
		// queue: it fails, saying why.
		name: "refused here",
		before: func(_ *batch.Hybrid, _ string, local, _ *fakeDriver) {
			local.with(func() { local.submitErr = errRefused })
		},
		state: batch.Failed, err: errRefused,
		counts: batch.HybridCounts{Local: 2}, removed: []string{"R1"},
	}, {
		name: "removed by the caller",
		before: func(h *batch.Hybrid, id string, _, _ *fakeDriver) {
			if err := h.Remove(context.Background(), id); err != nil {
				t.Error(err)
			}
		},
		state: batch.Failed, err: batch.ErrRemoved,
		counts: batch.HybridCounts{Local: 1, Remote: 1}, removed: []string{"R1"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, remote := newFakeDriver("L"), newFakeDriver("R")
			h := batch.NewHybrid(local, 1, remote)
			defer batchtest.Close(t, h)
			rec := batchtest.Record(t, h)

			first := batchtest.Submit(t, h, &batch.Job{Command: "true"})
			job := tt.job
			if job.Command == "" {
				job.Command = "true"
			}
			id := batchtest.Submit(t, h, &job)
			if tt.before != nil {
				tt.before(h, id, local, remote)
			}
			local.finish("L1", 0)
			rec.Final(t, first)
			// Any move is made by now: see checkCounts.
			moved := h.Counts().Moved == 1
			if moved != tt.moved {
				t.Errorf("moved = %v, want %v", moved, tt.moved)
			}
			if st, _ := h.Status(id); !st.State.Final() {
				if moved {
					local.finish("L2", 5)
				} else {
					remote.finish("R1", 7)
				}
			}
			ev := rec.Final(t, id)
			if ev.State != tt.state || ev.ExitCode != tt.code || tt.err != nil && !errors.Is(ev.Err, tt.err) {
				t.Errorf("job: %v exit %d (%v), want %v exit %d (%v)", ev.State, ev.ExitCode, ev.Err, tt.state, tt.code, tt.err)
			}
			checkCounts(t, h, tt.counts)
			if _, removed := remote.submitted(); !slices.Equal(removed, tt.removed) {
				t.Errorf("removed from the remote: %q, want %q", removed, tt.removed)
			}
		})
	}
}

// A job removed as it finishes ends failed with ErrRemoved, as the contract
// says, even if the driver under it reports it done.
func TestHybridRemoveFinishing(t *testing.T) {
	local, remote := newFakeDriver("L"), newFakeDriver("R")
	h := batch.NewHybrid(local, 1, remote)
	defer batchtest.Close(t, h)
	rec := batchtest.Record(t, h)
	id := batchtest.Submit(t, h, &batch.Job{Command: "true"})
	local.start("L1")
	rec.Wait(t, id, batch.Running)
	local.with(func() { local.removeFinishes = true })
	if err := h.Remove(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Final(t, id); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRemoved) {
		t.Errorf("removed job: %+v, want failed with ErrRemoved", ev.Status)
	}
}

func TestHybridCloseBothSides(t *testing.T) {
	local, remote := newFakeDriver("L"), newFakeDriver("R")
	h := batch.NewHybrid(local, 1, remote)
	rec := batchtest.Record(t, h)
	here := batchtest.Submit(t, h, &batch.Job{Command: "true"})
	there := batchtest.Submit(t, h, &batch.Job{Command: "true"})
	local.start("L1")
	rec.Wait(t, here, batch.Running)
	batchtest.Close(t, h)
	for range h.Events() {
		// Drain what Record has not taken: the channel must close.
	}
	for _, id := range []string{here, there} {
		if st, err := h.Status(id); err != nil || st.State != batch.Failed || !errors.Is(st.Err, batch.ErrRemoved) {
			t.Errorf("after Close, Status(%s) = %+v, %v; want failed with ErrRemoved", id, st, err)
		}
	}
	for name, f := range map[string]*fakeDriver{"local": local, "remote": remote} {
		var closed bool
		f.with(func() { closed = f.closed })
		if !closed {
			t.Errorf("%s driver not closed", name)
		}
	}
	if _, err := h.Submit(context.Background(), &batch.Job{Command: "true"}); !errors.Is(err, batch.ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
	checkCounts(t, h, batch.HybridCounts{})
}

func TestHybridSubmitErrors(t *testing.T) {
	errFull := errors.New("queue full")
	local, remote := newFakeDriver("L"), newFakeDriver("R")
	h := batch.NewHybrid(local, 1, remote)
	defer batchtest.Close(t, h)
	remote.with(func() { remote.submitErr = errFull })
	batchtest.Submit(t, h, &batch.Job{Command: "true"})
	_, err := h.Submit(context.Background(), &batch.Job{Command: "true"})
	if !errors.Is(err, errFull) || err.Error() != "remote: queue full" {
		t.Errorf("Submit with the remote refusing = %v, want remote: queue full", err)
	}
	if _, err := h.Status("h2"); !errors.Is(err, batch.ErrUnknownJob) {
		t.Errorf("Status of the refused job = %v, want ErrUnknownJob", err)
	}
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

// With real processes on both sides: the moved jobs run here, in their
// directory.
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
	checkCounts(t, h, batch.HybridCounts{Local: 3, Moved: 2})
	if b, err := os.ReadFile(filepath.Join(dir, "b.out")); err != nil || string(b) != "b\n" {
		t.Errorf("the moved job's output: %q, %v", b, err)
	}
}

// This machine's one slot takes the first job at once; the others wait in
// the remote's queue and move here one by one as the slot frees. The
// remote here stands for a busy cluster: a Local driver whose jobs wait an
// hour in its queue.
func ExampleNewHybrid() {
	ctx := context.Background()
	cluster := batch.NewLocal(batch.Options{DispatchDelay: time.Hour})
	h := batch.NewHybrid(batch.NewLocal(batch.Options{Slots: 1}), 1, cluster)
	defer h.Close(ctx)

	var ids []string
	for _, cmd := range []string{"echo one", "echo two", "echo three"} {
		id, err := h.Submit(ctx, &batch.Job{Command: cmd})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, id)
	}
	stdout := map[string]string{}
	for ev := range h.Events() {
		if ev.State.Final() {
			stdout[ev.ID] = string(ev.Stdout)
			if len(stdout) == len(ids) {
				break
			}
		}
	}
	for _, id := range ids {
		fmt.Printf("%s: %s", id, stdout[id])
	}
	fmt.Printf("%+v\n", h.Counts())
	// Output:
	// h1: one
	// h2: two
	// h3: three
	// {Local:3 Remote:0 Moved:2}
}

// TestHybridHold: with a remote dispatch longer than this machine takes to
// start them, jobs wait here and never reach the remote queue; with a
// short one they go, as many at a time as the remote's slots.
func TestHybridHold(t *testing.T) {
	t.Run("jobs this machine starts first stay here", func(t *testing.T) {
		local, remote := newFakeDriver("L"), newFakeDriver("R")
		h := batch.NewHybrid(local, 1, remote)
		h.Hold(batch.HybridHold{Dispatch: time.Hour})
		defer batchtest.Close(t, h)
		rec := batchtest.Record(t, h)
		a := batchtest.Submit(t, h, &batch.Job{Command: "true"})
		b := batchtest.Submit(t, h, &batch.Job{Command: "true"})
		c := batchtest.Submit(t, h, &batch.Job{Command: "true"})
		checkFake(t, "local", local, []string{"L1"}, nil)
		checkFake(t, "remote", remote, nil, nil)

		// Removing a held job ends it without a driver.
		if err := h.Remove(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		if ev := rec.Final(t, c); ev.State != batch.Failed || !errors.Is(ev.Err, batch.ErrRemoved) {
			t.Errorf("removed held job: %+v", ev.Status)
		}
		local.finish("L1", 0)
		rec.Final(t, a)
		checkCounts(t, h, batch.HybridCounts{Local: 1})
		checkFake(t, "local", local, []string{"L1", "L2"}, nil)
		local.finish("L2", 0)
		if ev := rec.Final(t, b); ev.State != batch.Done {
			t.Errorf("held job: %+v", ev.Status)
		}
		checkFake(t, "remote", remote, nil, nil)
	})

	t.Run("jobs go once this machine would start them later", func(t *testing.T) {
		local, remote := newFakeDriver("L"), newFakeDriver("R")
		h := batch.NewHybrid(local, 1, remote)
		// Nothing known of the jobs' times: L1, running longer than the
		// millisecond's dispatch, makes the held jobs go.
		h.Hold(batch.HybridHold{Dispatch: time.Millisecond})
		defer batchtest.Close(t, h)
		for range 3 {
			batchtest.Submit(t, h, &batch.Job{Command: "true"})
		}
		testutil.WaitFor(t, "the held jobs sent", 10*time.Second, func() bool {
			ids, _ := remote.submitted()
			return len(ids) == 2
		})
		checkFake(t, "local", local, []string{"L1"}, nil)
	})

	t.Run("no more at a time than the remote's slots", func(t *testing.T) {
		local, remote := newFakeDriver("L"), newFakeDriver("R")
		h := batch.NewHybrid(local, 1, remote)
		h.Hold(batch.HybridHold{Dispatch: time.Millisecond, Mean: time.Hour, RemoteSlots: 1})
		defer batchtest.Close(t, h)
		rec := batchtest.Record(t, h)
		batchtest.Submit(t, h, &batch.Job{Command: "true"})
		b := batchtest.Submit(t, h, &batch.Job{Command: "true"})
		c := batchtest.Submit(t, h, &batch.Job{Command: "true"})
		checkFake(t, "remote", remote, []string{"R1"}, nil)
		remote.start("R1")
		rec.Wait(t, b, batch.Running)
		remote.finish("R1", 0)
		rec.Final(t, b)
		// Counts waits for Hybrid to have handled R1's end, which sends c.
		checkCounts(t, h, batch.HybridCounts{Remote: 1})
		checkFake(t, "remote", remote, []string{"R1", "R2"}, nil)
		remote.start("R2")
		rec.Wait(t, c, batch.Running)
	})

	t.Run("jobs known to be long go at once", func(t *testing.T) {
		local, remote := newFakeDriver("L"), newFakeDriver("R")
		h := batch.NewHybrid(local, 1, remote)
		// A local job takes two hours, twice the dispatch: the second
		// job would start here after two, the third after four.
		h.Hold(batch.HybridHold{Dispatch: time.Hour, Mean: 2 * time.Hour})
		defer batchtest.Close(t, h)
		for range 3 {
			batchtest.Submit(t, h, &batch.Job{Command: "true"})
		}
		checkFake(t, "local", local, []string{"L1"}, nil)
		checkFake(t, "remote", remote, []string{"R1", "R2"}, nil)
	})

	t.Run("held jobs end at close", func(t *testing.T) {
		local, remote := newFakeDriver("L"), newFakeDriver("R")
		h := batch.NewHybrid(local, 1, remote)
		h.Hold(batch.HybridHold{Dispatch: time.Hour})
		batchtest.Submit(t, h, &batch.Job{Command: "true"})
		b := batchtest.Submit(t, h, &batch.Job{Command: "true"})
		batchtest.Close(t, h)
		if st, err := h.Status(b); err != nil || st.State != batch.Failed || !errors.Is(st.Err, batch.ErrRemoved) {
			t.Errorf("held job at close: %+v, %v", st, err)
		}
		checkFake(t, "remote", remote, nil, nil)
	})
}

func TestHybridHoldContract(t *testing.T) {
	batchtest.Contract(t, func(t *testing.T) batch.Driver {
		h := batch.NewHybrid(newTestLocal(t, 1), 1, newTestLocal(t, 4))
		h.Hold(batch.HybridHold{Dispatch: 50 * time.Millisecond, RemoteSlots: 2})
		return h
	})
}
