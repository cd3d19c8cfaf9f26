package batch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/rightsize/rightsize/internal/proc"
)

// Local is the Driver for processes on this machine: a small batch system
// with Options.Slots cores. Jobs start in submission order as soon as their
// cores are free (a job asking for no cores takes one); a job asking for
// more cores than there are slots is refused at Submit. Memory and disk
// requests are not enforced. Resources.WallTime is: the job is stopped as
// Remove would stop it and fails with ErrTimeLimit.
//
// Each job runs as /bin/sh -c Command in its own process group, in Job.Dir.
// When the shell exits, whatever the command left running in its group is
// killed, as a batch system would at the end of a job. Remove, Close and the
// wall-time limit send SIGTERM to the group, then SIGKILL after
// Options.KillDelay. Each job's process group is also registered with a
// keeper process (internal/proc) that kills it if the process that started
// it dies first, kill -9 included, so that a killed caller does not leave
// jobs racing its re-run.
//
// With Options.InProcess, a job that has Job.Do is done by calling it in a
// goroutine instead: its slots, wall time, removal and events are a
// process's.
type Local struct {
	slots     int
	killDelay time.Duration
	delay     time.Duration // Options.DispatchDelay
	inProcess bool          // Options.InProcess
	t         *Jobs
	running   sync.WaitGroup

	mu      sync.Mutex
	free    int
	waiting []*localJob          // in submission order
	jobs    map[string]*localJob // not ended
	seq     int
	closed  bool

	keeper proc.Keeper
}

type localJob struct {
	id    string
	job   *sharedJob
	cores int

	// Set under Local.mu.
	proc    *proc.Process
	cancel  context.CancelFunc // ends Job.Do's context, in process
	removed bool
	ended   bool
}

var _ Driver = (*Local)(nil)

// NewLocal returns a Local driver. It uses Options.Slots,
// Options.KillDelay, Options.DispatchDelay and Options.InProcess.
func NewLocal(opts Options) *Local {
	d := &Local{
		slots:     opts.Slots,
		killDelay: opts.KillDelay,
		delay:     opts.DispatchDelay,
		inProcess: opts.InProcess,
		t:         NewJobs(),
		jobs:      make(map[string]*localJob),
	}
	if d.slots <= 0 {
		d.slots = runtime.NumCPU()
	}
	if d.killDelay <= 0 {
		d.killDelay = 5 * time.Second
	}
	d.free = d.slots
	return d
}

// Submit queues job to start as soon as its cores are free.
func (d *Local) Submit(ctx context.Context, job *Job) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	j, err := prepareShared(job)
	if err != nil {
		return "", err
	}
	cores := max(j.Resources.Cores, 1)
	if cores > d.slots {
		return "", fmt.Errorf("%w: the job asks for %d cores; this machine has %d slots", ErrRejected, cores, d.slots)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return "", ErrClosed
	}
	d.seq++
	lj := &localJob{id: "local-" + strconv.Itoa(d.seq), job: j, cores: cores}
	if err := d.t.Add(lj.id, Status{State: Queued, Submitted: time.Now()}); err != nil {
		return "", err
	}
	d.jobs[lj.id] = lj
	if d.delay > 0 {
		time.AfterFunc(d.delay, func() { d.release(lj) })
		return lj.id, nil
	}
	d.waiting = append(d.waiting, lj)
	d.startWaiting()
	return lj.id, nil
}

// release lets lj wait for its cores once its dispatch delay has passed,
// unless it was removed meanwhile.
func (d *Local) release(lj *localJob) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if lj.ended || d.closed {
		return
	}
	d.waiting = append(d.waiting, lj)
	d.startWaiting()
}

// startWaiting starts waiting jobs, first come first served, while their
// cores are free. Called with d.mu held.
func (d *Local) startWaiting() {
	for len(d.waiting) > 0 && d.waiting[0].cores <= d.free {
		lj := d.waiting[0]
		d.waiting = d.waiting[1:]
		d.free -= lj.cores
		d.start(lj)
	}
}

// start starts lj's process and a goroutine that waits for it, or the
// goroutine that does it in process. Called with d.mu held.
func (d *Local) start(lj *localJob) {
	if d.inProcess && lj.job.Do != nil {
		d.startDo(lj)
		return
	}
	cmd := &proc.Cmd{
		Path: "/bin/sh", Args: []string{"sh", "-c", lj.job.Command},
		Dir:        lj.job.dir,
		Env:        append(os.Environ(), lj.job.Env...),
		StdoutTail: tailSize, StderrTail: tailSize,
		Keeper:    &d.keeper,
		WallTime:  lj.job.Resources.WallTime,
		KillDelay: d.killDelay,
	}
	p, err := cmd.Start()
	if err != nil {
		d.startFailed(lj, err)
		return
	}
	lj.proc = p
	d.t.Set(Event{ID: lj.id, Status: Status{State: Running, Started: time.Now()}})
	d.running.Add(1)
	go d.wait(lj)
}

func (d *Local) startFailed(lj *localJob, err error) {
	d.free += lj.cores
	lj.ended = true
	delete(d.jobs, lj.id)
	d.t.Set(Event{ID: lj.id, Status: Status{State: Failed, Err: fmt.Errorf("start: %w", err), Ended: time.Now()}})
}

// wait waits for lj's shell to exit (the runner kills what it left in its
// process group) and reports the final event.
func (d *Local) wait(lj *localJob) {
	defer d.running.Done()
	res := lj.proc.Wait()
	removed := d.finished(lj)

	var st Status
	switch {
	case removed:
		st = Status{State: Failed, Err: ErrRemoved}
	case res.TimedOut:
		st = Status{State: Failed, Err: fmt.Errorf("%w (%v)", ErrTimeLimit, lj.job.Resources.WallTime)}
	case res.Err != nil:
		st = Status{State: Failed, Err: res.Err}
	case res.Signal != 0:
		// As the wrapper's shell reports it on a batch system.
		st = lj.job.finish(128 + int(res.Signal))
	default:
		st = lj.job.finish(res.ExitCode)
	}
	st.Ended = res.Ended
	d.t.Set(Event{ID: lj.id, Status: st, Stdout: res.StdoutTail, Stderr: res.StderrTail})
}

// finished frees the cores of lj, which has ended, for the jobs waiting,
// and reports whether it was removed.
func (d *Local) finished(lj *localJob) (removed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	lj.ended = true
	delete(d.jobs, lj.id)
	d.free += lj.cores
	d.startWaiting()
	return lj.removed
}

// startDo starts the goroutine that does lj in this process. Called with
// d.mu held.
func (d *Local) startDo(lj *localJob) {
	ctx, cancel := context.WithCancel(context.Background())
	if wt := lj.job.Resources.WallTime; wt > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), wt)
	}
	lj.cancel = cancel
	d.t.Set(Event{ID: lj.id, Status: Status{State: Running, Started: time.Now()}})
	d.running.Add(1)
	go d.do(ctx, lj)
}

// do calls lj's Do and reports the final event, as wait does for a
// process: an error is the command's exit status 1, with the error as its
// standard error.
func (d *Local) do(ctx context.Context, lj *localJob) {
	defer d.running.Done()
	err := callDo(ctx, lj.job.Do)
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	lj.cancel()
	removed := d.finished(lj)

	var st Status
	var stderr []byte
	switch {
	case removed:
		st = Status{State: Failed, Err: ErrRemoved}
	case timedOut:
		st = Status{State: Failed, Err: fmt.Errorf("%w (%v)", ErrTimeLimit, lj.job.Resources.WallTime)}
	case err != nil:
		st = lj.job.finish(1)
		stderr = []byte(err.Error() + "\n")
		if len(stderr) > tailSize {
			stderr = stderr[len(stderr)-tailSize:]
		}
	default:
		st = lj.job.finish(0)
	}
	st.Ended = time.Now()
	d.t.Set(Event{ID: lj.id, Status: st, Stderr: stderr})
}

// callDo calls do, turning a panic into an error: a job that panics fails,
// as a process that crashes would, and leaves the caller running.
func callDo(ctx context.Context, do func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return do(ctx)
}

// Status returns what the driver last saw of job id.
func (d *Local) Status(id string) (Status, error) { return d.t.Status(id) }

// Remove stops job id: a waiting job is dropped at once, a running one is
// sent SIGTERM and, after Options.KillDelay, SIGKILL.
func (d *Local) Remove(ctx context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	lj, ok := d.jobs[id]
	if !ok {
		// Ended jobs are forgotten here; the table remembers them.
		_, err := d.t.Status(id)
		return err
	}
	d.remove(lj)
	return nil
}

// remove is Remove with d.mu held.
func (d *Local) remove(lj *localJob) {
	if lj.ended || lj.removed {
		return
	}
	lj.removed = true
	switch {
	case lj.proc != nil:
		lj.proc.Terminate()
		return
	case lj.cancel != nil:
		lj.cancel()
		return
	}
	for i, w := range d.waiting {
		if w == lj {
			d.waiting = append(d.waiting[:i], d.waiting[i+1:]...)
			break
		}
	}
	lj.ended = true
	delete(d.jobs, lj.id)
	d.t.Set(Event{ID: lj.id, Status: Status{State: Failed, Err: ErrRemoved, Ended: time.Now()}})
}

// Events returns the channel of job events.
func (d *Local) Events() <-chan Event { return d.t.Events() }

// Close removes every job that has not ended and waits, until ctx is done,
// for their processes to exit.
func (d *Local) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	for _, lj := range d.jobs {
		d.remove(lj)
	}
	d.mu.Unlock()
	exited := make(chan struct{})
	go func() {
		d.running.Wait()
		close(exited)
	}()
	var err error
	select {
	case <-exited:
		d.keeper.Close()
	case <-ctx.Done():
		// The keeper kills them when this process exits.
		err = fmt.Errorf("local jobs still exiting: %w", ctx.Err())
	}
	d.t.Close()
	return err
}

var _ FreeReporter = (*Local)(nil)

// FreeCores returns the slots no job holds, less the cores of the jobs
// waiting for them.
func (d *Local) FreeCores(ctx context.Context) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.free
	for _, j := range d.waiting {
		n -= j.cores
	}
	return max(n, 0), nil
}
