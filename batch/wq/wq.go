// Package wq is the batch.Driver for Work Queue workers: each job becomes a
// task of a workqueue.Master, which ships the job's inputs to whichever
// worker runs it and fetches its outputs back. It is a package of its own so
// that batch and its users (Makeflow, the worker factory) do not link the
// Work Queue master unless they use it.
//
// Besides batch.Driver, a Driver has the capabilities batch describes as
// optional interfaces: it ships files (batch.FileShipper), aborts
// stragglers itself and counts them (batch.StragglerAborter), listens for
// workers (batch.Listener) and reports the master's capacity
// (batch.CapacityReporter). A worker in this same process can do the work
// of a job that carries it (batch.Job.Do) without a process: see
// Driver.InProcess. A job whose task still waits for a worker can be taken
// back (Driver.RemoveQueued), as a hybrid Wavefront does when this
// machine's cores run out of cells; Work Queue reports no start, so a job
// some worker holds is never taken back.
package wq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/workqueue"
)

// tailBytes is how much of a task's output the final event keeps.
const tailBytes = 4 << 10

// Driver is the batch.Driver for Work Queue workers: each job becomes a task of
// a workqueue.Master, which ships the job's inputs to whichever worker runs
// it (keeping those marked Cache there for later jobs) and fetches its
// outputs back. Nothing is shared with the workers but the connection, so
// files may be renamed (File.Remote) but every name on the worker must be
// relative and stay inside the task's sandbox: an input or output with an
// absolute path needs a relative Remote name, or Submit refuses it.
//
// The command runs in the task's sandbox on the worker, not in Job.Dir,
// which is only where relative local paths are resolved. Resources map to
// the task's cores, memory and disk, and WallTime to the task's wall time;
// Category to the task's category. Workers report no start, so there are
// no Running events. A final event's Stdout and Stderr both hold the end of
// the command's output, in which the worker interleaves the two streams.
type Driver struct {
	m         *workqueue.Master
	ownMaster bool // Close closes m
	t         *batch.Jobs

	mu     sync.Mutex // orders Submit's add before the loop's set of one task
	inproc *inProcessJobs
	wake   chan struct{}
	stop   context.CancelFunc
	done   chan struct{}
}

// New returns a driver that submits jobs to m. Close does not close m;
// Open returns a driver that owns a master of its own.
func New(m *workqueue.Master) *Driver {
	ctx, stop := context.WithCancel(context.Background())
	d := &Driver{m: m, t: batch.NewJobs(), inproc: newInProcessJobs(), wake: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	go d.loop(ctx)
	return d
}

// Master returns the Work Queue master the driver submits to, e.g. to learn
// its port or statistics.
func (d *Driver) Master() *workqueue.Master { return d.m }

// Submit turns job into a task and submits it.
func (d *Driver) Submit(ctx context.Context, job *batch.Job) (string, error) {
	if err := job.Validate(); err != nil {
		return "", err
	}
	dir := job.Dir
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	task := &workqueue.Task{
		Command:  job.Command,
		Env:      job.Env,
		Category: job.Category,
		Tag:      job.Name,
		WallTime: job.Resources.WallTime,
		Resources: workqueue.Resources{
			Cores:    float64(job.Resources.Cores),
			MemoryMB: job.Resources.MemoryMB,
			DiskMB:   job.Resources.DiskMB,
		},
	}
	key := ""
	if job.Do != nil {
		var env string
		key, env = d.inproc.mark(job)
		task.Env = append(task.Env[:len(task.Env):len(task.Env)], env)
		defer func() {
			if key != "" {
				d.inproc.forget("", key) // not submitted
			}
		}()
	}
	for _, f := range job.Inputs {
		local, remote, err := shipNames(dir, f)
		if err != nil {
			return "", fmt.Errorf("input %w", err)
		}
		if _, err := os.Stat(local); err != nil {
			return "", fmt.Errorf("input %s: %w", f.Path, err)
		}
		task.AddInput(local, remote, f.Cache)
	}
	for _, f := range job.Outputs {
		local, remote, err := shipNames(dir, f)
		if err != nil {
			return "", fmt.Errorf("output %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(local), 0o777); err != nil {
			return "", fmt.Errorf("output %s: %w", f.Path, err)
		}
		task.AddOutput(local, remote, false)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := d.m.Submit(task)
	if err != nil {
		if errors.Is(err, workqueue.ErrClosed) {
			return "", batch.ErrClosed
		}
		return "", err
	}
	id := strconv.Itoa(n)
	if err := d.t.Add(id, batch.Status{State: batch.Queued, Submitted: time.Now()}); err != nil {
		d.m.Cancel(n)
		return "", err
	}
	if key != "" {
		d.inproc.submitted(id, key)
		key = ""
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return id, nil
}

// shipNames returns where a file is on this host and what it is called in
// the task's sandbox, refusing sandbox names a worker would refuse.
func shipNames(dir string, f batch.File) (local, remote string, err error) {
	local = f.Path
	if !filepath.IsAbs(local) {
		local = filepath.Join(dir, local)
	}
	remote = f.Remote
	if remote == "" {
		remote = f.Path
	}
	remote = filepath.Clean(remote)
	if filepath.IsAbs(remote) || remote == ".." || strings.HasPrefix(remote, "../") {
		return "", "", fmt.Errorf("%s: a Work Queue worker can only use names inside its sandbox; give it a relative remote name (%s -> name): %w",
			f.Path, f.Path, errors.ErrUnsupported)
	}
	return local, remote, nil
}

// loop turns the master's results into events.
func (d *Driver) loop(ctx context.Context) {
	defer close(d.done)
	for {
		r, err := d.m.Wait(ctx)
		switch {
		case errors.Is(err, workqueue.ErrEmpty):
			select {
			case <-d.wake:
				continue
			case <-ctx.Done():
				return
			}
		case err != nil:
			return // cancelled by Close, or the master was closed
		}
		ev := resultEvent(r)
		d.mu.Lock()
		d.t.Set(ev)
		d.mu.Unlock()
		d.inproc.forget(ev.ID, "")
	}
}

// resultEvent maps a finished task to the job's final event.
func resultEvent(r *workqueue.Result) batch.Event {
	out := r.Output
	if len(out) > tailBytes {
		out = out[len(out)-tailBytes:]
	}
	ev := batch.Event{
		ID:     strconv.Itoa(r.ID),
		Status: batch.Status{Submitted: r.Submitted, Started: r.Dispatched, Ended: r.Finished},
		Stdout: out, Stderr: out,
	}
	reason := func(base error) error {
		if r.Err != nil {
			return fmt.Errorf("%w: %v", base, r.Err)
		}
		return base
	}
	switch r.Status {
	case workqueue.Success:
		ev.State, ev.ExitCode = batch.Done, r.ExitCode
	case workqueue.Signaled:
		ev.State, ev.ExitCode = batch.Done, 128+r.ExitCode // as /bin/sh reports it
	case workqueue.OutputMissing:
		if r.ExitCode != 0 {
			// The command failed, and its outputs are missing because of
			// it: report its exit status, as the shared-filesystem drivers
			// do.
			ev.State, ev.ExitCode = batch.Done, r.ExitCode
			break
		}
		ev.State, ev.Err = batch.Failed, reason(batch.ErrMissingOutput)
	case workqueue.MaxRunTime:
		ev.State, ev.Err = batch.Failed, reason(batch.ErrTimeLimit)
	case workqueue.MaxRetries:
		ev.State, ev.Err = batch.Failed, reason(batch.ErrVanished)
	default:
		ev.State = batch.Failed
		ev.Err = fmt.Errorf("work queue: %v", r.Status)
		if r.Err != nil {
			ev.Err = fmt.Errorf("work queue: %v: %w", r.Status, r.Err)
		}
	}
	return ev
}

// batch.Status returns what the driver last saw of job id.
func (d *Driver) Status(id string) (batch.Status, error) { return d.t.Status(id) }

// Remove cancels job id's task, queued or running.
func (d *Driver) Remove(ctx context.Context, id string) error {
	st, err := d.t.Status(id)
	if err != nil {
		return err
	}
	if st.State.Final() {
		return nil
	}
	n, _ := strconv.Atoi(id)
	d.m.Cancel(n)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.t.Set(batch.Event{ID: id, Status: batch.Status{State: batch.Failed, Err: batch.ErrRemoved, Ended: time.Now()}})
	d.inproc.forget(id, "")
	return nil
}

// RemoveQueued removes job id only if its task waits in the master's
// queue, taken by no worker, and reports whether it did: a caller that
// can do the job itself takes it back so (a hybrid Wavefront's cores,
// left without cells) without cancelling the work of a worker that has
// it. Workers report no start, so Status cannot tell the two apart.
func (d *Driver) RemoveQueued(ctx context.Context, id string) (bool, error) {
	st, err := d.t.Status(id)
	if err != nil {
		return false, err
	}
	if st.State.Final() {
		return false, nil
	}
	n, _ := strconv.Atoi(id)
	if !d.m.CancelWaiting(n) {
		return false, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.t.Set(batch.Event{ID: id, Status: batch.Status{State: batch.Failed, Err: batch.ErrRemoved, Ended: time.Now()}})
	d.inproc.forget(id, "")
	return true, nil
}

// Events returns the channel of job events.
func (d *Driver) Events() <-chan batch.Event { return d.t.Events() }

// Close cancels every job that has not ended, stops the event loop and, if
// the driver started its master, closes it (releasing its workers).
func (d *Driver) Close(ctx context.Context) error {
	live := d.t.Unfinished()
	for _, id := range live {
		d.Remove(ctx, id)
	}
	d.t.Close()
	d.stop()
	<-d.done
	if d.ownMaster {
		return d.m.Close()
	}
	return nil
}

// Open starts a Work Queue master with cfg and returns a driver that owns
// it: Close closes the master too, releasing its workers.
func Open(cfg workqueue.Config) (*Driver, error) {
	m, err := workqueue.Listen(cfg)
	if err != nil {
		return nil, err
	}
	d := New(m)
	d.ownMaster = true
	return d, nil
}

// ShipsFiles reports that the driver sends a job's inputs to where it runs
// and brings its outputs back (batch.FileShipper).
func (d *Driver) ShipsFiles() bool { return true }

// AbortsStragglers reports that the master aborts straggling tasks itself,
// by its Config.FastAbort (batch.StragglerAborter).
func (d *Driver) AbortsStragglers() bool { return true }

// FastAborts returns how many stragglers the master has aborted.
func (d *Driver) FastAborts() int { return d.m.Stats().FastAborts }

// Transferred returns the bytes the master has sent to workers and
// received from them, and the time their transfers took, summed over the
// tasks that finished. Read it before Close.
func (d *Driver) Transferred() (bytes int64, took time.Duration) {
	st := d.m.Stats()
	return st.BytesSent + st.BytesReceived, st.TransferTime
}

// Port returns the port the master listens on for workers (batch.Listener).
func (d *Driver) Port() int { return d.m.Port() }

// Capacity returns how many tasks the master could keep running at once,
// by seed 000's Eq. 4.5 over its recent tasks, or 0 before a task has
// finished (batch.CapacityReporter).
func (d *Driver) Capacity() float64 { return d.m.Stats().Capacity }

var (
	_ batch.FileShipper      = (*Driver)(nil)
	_ batch.StragglerAborter = (*Driver)(nil)
	_ batch.Listener         = (*Driver)(nil)
	_ batch.CapacityReporter = (*Driver)(nil)
)
