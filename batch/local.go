package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
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
type Local struct {
	slots     int
	killDelay time.Duration
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
	proc     *os.Process
	reg      proc.Slot // the process group, registered with the keeper
	exited   bool      // the shell has exited: no more signals
	removed  bool
	timedOut bool
	timer    *time.Timer // wall time, then the SIGKILL after SIGTERM
	ended    bool
}

var _ Driver = (*Local)(nil)

// NewLocal returns a Local driver. It uses Options.Slots and
// Options.KillDelay.
func NewLocal(opts Options) *Local {
	d := &Local{
		slots:     opts.Slots,
		killDelay: opts.KillDelay,
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
	d.waiting = append(d.waiting, lj)
	d.startWaiting()
	return lj.id, nil
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

// start starts lj's process and a goroutine that waits for it. Called with
// d.mu held.
func (d *Local) start(lj *localJob) {
	outR, outW, err := os.Pipe()
	if err != nil {
		d.startFailed(lj, err)
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		d.startFailed(lj, err)
		return
	}
	cmd := exec.Command("/bin/sh", "-c", lj.job.Command)
	cmd.Dir = lj.job.dir
	cmd.Env = append(os.Environ(), lj.job.Env...)
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	reg, err := d.keeper.Reserve()
	if err == nil {
		if err = cmd.Start(); err != nil {
			reg.Release()
		}
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		d.startFailed(lj, err)
		return
	}
	reg.Set(cmd.Process.Pid)
	lj.proc, lj.reg = cmd.Process, reg
	started := time.Now()
	d.t.Set(Event{ID: lj.id, Status: Status{State: Running, Started: started}})
	if wt := lj.job.Resources.WallTime; wt > 0 {
		lj.timer = time.AfterFunc(wt, func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			if !lj.ended && !lj.removed {
				lj.timedOut = true
				d.terminate(lj)
			}
		})
	}
	d.running.Add(1)
	go d.wait(lj, cmd, outR, errR)
}

func (d *Local) startFailed(lj *localJob, err error) {
	d.free += lj.cores
	lj.ended = true
	delete(d.jobs, lj.id)
	d.t.Set(Event{ID: lj.id, Status: Status{State: Failed, Err: fmt.Errorf("start: %w", err), Ended: time.Now()}})
}

// wait waits for lj's shell to exit, kills what it left in its process
// group, collects the ends of its output and reports the final event.
func (d *Local) wait(lj *localJob, cmd *exec.Cmd, outR, errR *os.File) {
	defer d.running.Done()
	var stdout, stderr tailBuffer
	copied := make(chan struct{}, 2)
	copyTail := func(w *tailBuffer, r *os.File) {
		io.Copy(w, r)
		copied <- struct{}{}
	}
	go copyTail(&stdout, outR)
	go copyTail(&stderr, errR)
	// Until the shell is reaped its group's id cannot be reused: stop
	// signalling, kill what it left in its group, release the group, then
	// reap.
	proc.WaitExit(lj.proc.Pid)
	d.mu.Lock()
	lj.exited = true
	d.mu.Unlock()
	syscall.Kill(-lj.proc.Pid, syscall.SIGKILL)
	lj.reg.Release()
	waitErr := cmd.Wait()
	ended := time.Now()
	// A process that left the group (setsid) may still hold the pipes;
	// do not wait for it for long.
	grace := time.NewTimer(2 * time.Second)
	for n := 0; n < 2; n++ {
		select {
		case <-copied:
		case <-grace.C:
			outR.Close()
			errR.Close()
			<-copied
		}
	}
	grace.Stop()
	outR.Close()
	errR.Close()

	d.mu.Lock()
	lj.ended = true
	if lj.timer != nil {
		lj.timer.Stop()
	}
	removed, timedOut := lj.removed, lj.timedOut
	delete(d.jobs, lj.id)
	d.free += lj.cores
	d.startWaiting()
	d.mu.Unlock()

	var st Status
	var exitErr *exec.ExitError
	switch {
	case removed:
		st = Status{State: Failed, Err: ErrRemoved}
	case timedOut:
		st = Status{State: Failed, Err: fmt.Errorf("%w (%v)", ErrTimeLimit, lj.job.Resources.WallTime)}
	case waitErr == nil:
		st = lj.job.finish(0)
	case errors.As(waitErr, &exitErr):
		code := exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// As the wrapper's shell reports it on a batch system.
			code = 128 + int(ws.Signal())
		}
		st = lj.job.finish(code)
	default:
		st = Status{State: Failed, Err: waitErr}
	}
	st.Ended = ended
	d.t.Set(Event{ID: lj.id, Status: st, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()})
}

// terminate sends SIGTERM to lj's process group and SIGKILL after the kill
// delay. Called with d.mu held, for a started job that has not ended.
func (d *Local) terminate(lj *localJob) {
	if lj.exited {
		return // its group is being killed
	}
	syscall.Kill(-lj.proc.Pid, syscall.SIGTERM)
	if lj.timer != nil {
		lj.timer.Stop()
	}
	lj.timer = time.AfterFunc(d.killDelay, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !lj.exited {
			syscall.Kill(-lj.proc.Pid, syscall.SIGKILL)
		}
	})
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
	if lj.proc != nil {
		d.terminate(lj)
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
