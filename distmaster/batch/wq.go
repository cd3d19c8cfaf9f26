package batch

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

	"github.com/rightsize/rightsize/workqueue"
)

// tailBytes is how much of a task's output the final event keeps.
const tailBytes = 4 << 10

// WorkQueue is the Driver for Work Queue workers: each job becomes a task of
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
type WorkQueue struct {
	m         *workqueue.Master
	ownMaster bool // Close closes m
	t         *table

	mu   sync.Mutex // orders Submit's add before the loop's set of one task
	wake chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

// NewWorkQueue returns a driver that submits jobs to m. Close does not close
// m; New("wq", ...) returns a driver that owns a master of its own.
func NewWorkQueue(m *workqueue.Master) *WorkQueue {
	ctx, stop := context.WithCancel(context.Background())
	d := &WorkQueue{m: m, t: newTable(), wake: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	go d.loop(ctx)
	return d
}

// Master returns the Work Queue master the driver submits to, e.g. to learn
// its port or statistics.
func (d *WorkQueue) Master() *workqueue.Master { return d.m }

// Submit turns job into a task and submits it.
func (d *WorkQueue) Submit(ctx context.Context, job *Job) (string, error) {
	if err := checkJob(job); err != nil {
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
			return "", ErrClosed
		}
		return "", err
	}
	id := strconv.Itoa(n)
	if err := d.t.add(id, Status{State: Queued, Submitted: time.Now()}); err != nil {
		d.m.Cancel(n)
		return "", err
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return id, nil
}

// shipNames returns where a file is on this host and what it is called in
// the task's sandbox, refusing sandbox names a worker would refuse.
func shipNames(dir string, f File) (local, remote string, err error) {
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
func (d *WorkQueue) loop(ctx context.Context) {
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
		d.mu.Lock()
		d.t.set(resultEvent(r))
		d.mu.Unlock()
	}
}

// resultEvent maps a finished task to the job's final event.
func resultEvent(r *workqueue.Result) Event {
	out := r.Output
	if len(out) > tailBytes {
		out = out[len(out)-tailBytes:]
	}
	ev := Event{
		ID:     strconv.Itoa(r.ID),
		Status: Status{Submitted: r.Submitted, Started: r.Dispatched, Ended: r.Finished},
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
		ev.State, ev.ExitCode = Done, r.ExitCode
	case workqueue.Signaled:
		ev.State, ev.ExitCode = Done, 128+r.ExitCode // as /bin/sh reports it
	case workqueue.OutputMissing:
		if r.ExitCode != 0 {
			// The command failed, and its outputs are missing because of
			// it: report its exit status, as the shared-filesystem drivers
			// do.
			ev.State, ev.ExitCode = Done, r.ExitCode
			break
		}
		ev.State, ev.Err = Failed, reason(ErrMissingOutput)
	case workqueue.MaxRunTime:
		ev.State, ev.Err = Failed, reason(ErrTimeLimit)
	case workqueue.MaxRetries:
		ev.State, ev.Err = Failed, reason(ErrVanished)
	default:
		ev.State = Failed
		ev.Err = fmt.Errorf("work queue: %v", r.Status)
		if r.Err != nil {
			ev.Err = fmt.Errorf("work queue: %v: %w", r.Status, r.Err)
		}
	}
	return ev
}

// Status returns what the driver last saw of job id.
func (d *WorkQueue) Status(id string) (Status, error) { return d.t.status(id) }

// Remove cancels job id's task, queued or running.
func (d *WorkQueue) Remove(ctx context.Context, id string) error {
	st, err := d.t.status(id)
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
	d.t.set(Event{ID: id, Status: Status{State: Failed, Err: ErrRemoved, Ended: time.Now()}})
	return nil
}

// Events returns the channel of job events.
func (d *WorkQueue) Events() <-chan Event { return d.t.out }

// Close cancels every job that has not ended, stops the event loop and, if
// the driver started its master, closes it (releasing its workers).
func (d *WorkQueue) Close(ctx context.Context) error {
	d.t.mu.Lock()
	var live []string
	for id, st := range d.t.jobs {
		if !st.State.Final() {
			live = append(live, id)
		}
	}
	d.t.mu.Unlock()
	for _, id := range live {
		d.Remove(ctx, id)
	}
	d.t.close()
	d.stop()
	<-d.done
	if d.ownMaster {
		return d.m.Close()
	}
	return nil
}
