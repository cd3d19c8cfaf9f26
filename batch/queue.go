package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// system is one batch system's commands, as a queueDriver uses them. Every
// method is one command (or a few) for all the jobs it is given.
type system interface {
	// kind is the batch type, as Kinds spells it.
	kind() string
	// submit hands j's wrapper script to the batch system and returns the
	// job's ID.
	submit(ctx context.Context, j *spooled) (string, error)
	// query says what the batch system knows of the jobs ids. A job it
	// does not list is absent from the map.
	query(ctx context.Context, ids []string) (map[string]observation, error)
	// remove asks the batch system to stop the jobs ids.
	remove(ctx context.Context, ids []string) error
	// history says what the batch system remembers of jobs that left its
	// queue without an exit status, for the error message; best effort.
	history(ctx context.Context, ids []string) map[string]observation
}

// phase is where the batch system says a job is.
type phase int

const (
	waiting phase = iota // queued, held by the user, being set up
	running              // running, suspended, finishing
	ended                // the batch system considers it finished, whatever the reason
	stuck                // it will never run as it is: held by the system, in error, unsatisfiable
)

// observation is what a batch system said of one job, in its own words.
type observation struct {
	phase     phase
	state     string // the system's state, e.g. PENDING, Eqw, 5
	reason    string // the system's explanation, if any
	killed    bool   // the system ended the job itself: cancelled, wall time, node failure, ...
	timeLimit bool   // the system says it stopped the job at its wall-time limit
}

func (o observation) String() string {
	s := o.state
	if o.reason != "" {
		s += " (" + o.reason + ")"
	}
	return s
}

// spooled is one job of a queueDriver, with its files in the spool.
type spooled struct {
	*sharedJob
	id                         string
	script, out, err, exitFile string
	submitted                  time.Time

	// Owned by the polling goroutine.
	started   time.Time
	goneSince time.Time   // when the job was first seen ended or absent without an exit status
	last      observation // what was last seen of it
	seen      bool        // whether last is set

	// Guarded by queueDriver.mu.
	removing bool
}

// queueDriver is the Driver for batch systems with a shared filesystem. It
// is the same for every system; what differs is behind sys.
type queueDriver struct {
	sys  system
	opts Options
	dir  string // this driver's spool directory
	t    *Jobs

	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}

	mu     sync.Mutex
	jobs   map[string]*spooled // not yet final, by ID
	seq    int
	closed bool
}

// newQueueDriver starts a driver for sys; opts has been filled.
func newQueueDriver(sys system, opts Options) (Driver, error) {
	spool := opts.Spool
	if spool == "" {
		spool = "."
	}
	spool, err := filepath.Abs(spool)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(spool, ".rightsize-"+sys.kind()+"-")
	if err != nil {
		return nil, fmt.Errorf("spool directory: %w", err)
	}
	d := &queueDriver{
		sys:     sys,
		opts:    opts,
		dir:     dir,
		t:       NewJobs(),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		jobs:    make(map[string]*spooled),
	}
	go d.loop()
	return d, nil
}

// Submit writes the job's wrapper script to the spool and submits it.
func (d *queueDriver) Submit(ctx context.Context, job *Job) (string, error) {
	j, err := prepareShared(job)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return "", ErrClosed
	}
	d.seq++
	base := filepath.Join(d.dir, strconv.Itoa(d.seq))
	d.mu.Unlock()

	sp := &spooled{sharedJob: j, script: base + ".sh", out: base + ".out", err: base + ".err", exitFile: base + ".status"}
	if err := os.WriteFile(sp.script, []byte(j.wrapper(sp.exitFile)), 0o755); err != nil {
		return "", fmt.Errorf("job script: %w", err)
	}
	sp.submitted = time.Now()
	id, err := d.sys.submit(ctx, sp)
	if err != nil {
		d.removeFiles(sp)
		return "", err
	}
	sp.id = id

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		// Close ran while the job was being submitted and could not
		// remove it.
		d.sys.remove(context.WithoutCancel(ctx), []string{id})
		d.removeFiles(sp)
		return "", ErrClosed
	}
	if err := d.t.Add(id, Status{State: Queued, Submitted: sp.submitted}); err != nil {
		d.sys.remove(context.WithoutCancel(ctx), []string{id})
		d.removeFiles(sp)
		return "", err
	}
	d.jobs[id] = sp
	return id, nil
}

// Status returns what the driver last saw of job id.
func (d *queueDriver) Status(id string) (Status, error) { return d.t.Status(id) }

// Remove asks the batch system to stop job id.
func (d *queueDriver) Remove(ctx context.Context, id string) error {
	d.mu.Lock()
	j, ok := d.jobs[id]
	if !ok {
		d.mu.Unlock()
		_, err := d.t.Status(id) // nil for a job that has ended
		return err
	}
	if j.removing {
		d.mu.Unlock()
		return nil
	}
	j.removing = true
	d.mu.Unlock()

	if err := d.sys.remove(ctx, []string{id}); err != nil {
		// Batch systems refuse to remove a job they no longer have; then
		// there is nothing left to stop.
		obs, qerr := d.sys.query(ctx, []string{id})
		if o, listed := obs[id]; qerr != nil || listed && o.phase != ended {
			d.mu.Lock()
			_, active := d.jobs[id]
			if active {
				j.removing = false
			}
			d.mu.Unlock()
			if active {
				return err
			}
		}
	}
	select {
	case d.kick <- struct{}{}:
	default:
	}
	return nil
}

// Events returns the channel of job events.
func (d *queueDriver) Events() <-chan Event { return d.t.Events() }

// Close removes the jobs that have not ended, stops polling and removes the
// spool directory.
func (d *queueDriver) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	var ids []string
	for id, j := range d.jobs {
		j.removing = true
		ids = append(ids, id)
	}
	d.mu.Unlock()
	close(d.stop)
	<-d.stopped

	var err error
	if len(ids) > 0 {
		err = d.sys.remove(ctx, ids)
		now := time.Now()
		for _, id := range ids {
			d.t.Set(Event{ID: id, Status: Status{State: Failed, Err: ErrRemoved, Ended: now}})
		}
	}
	d.t.Close()
	if !d.opts.KeepFiles {
		os.RemoveAll(d.dir)
	}
	return err
}

// loop looks for exit-status files four times per poll interval and asks
// the batch system once per interval, or at once after a Remove.
func (d *queueDriver) loop() {
	defer close(d.stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-d.stop
		cancel()
	}()
	tick := time.NewTicker(max(d.opts.PollInterval/4, 10*time.Millisecond))
	defer tick.Stop()
	var lastQuery time.Time
	for {
		ask := false
		select {
		case <-d.stop:
			return
		case <-d.kick:
			ask = true
		case now := <-tick.C:
			ask = now.Sub(lastQuery) >= d.opts.PollInterval
		}
		if ask {
			lastQuery = time.Now()
		}
		d.poll(ctx, ask)
	}
}

// verdict is what poll does with one job after a look.
type verdict int

const (
	keep    verdict = iota // nothing new
	started                // it is running: report Running once
	exited                 // its command exited on its own: report Done
	reject                 // the batch system will never run it: remove it, report ErrRejected
	removed                // it was being removed and no longer runs: report ErrRemoved
	settle                 // its end needs the batch system's word (see judge)
)

// judge decides what to do with job j. exit is its command's exit status
// from the exit-status file, or -1 if there is none yet; asked says whether
// the batch system was asked this time, and obs and listed what it said.
// It has no I/O and only updates what j remembers (the last observation,
// the grace-period clock), so that it can be tested on its own.
//
// Two ends need the batch system's word, and get settle. A job that left
// the queue without an exit status, once the grace period for the file to
// show has passed. And a command killed by a signal (exit > 128): when the
// batch system cancels a job or stops it at its wall time, it signals every
// process of the job, and the command may die, and the wrapper record 143,
// a moment before the wrapper itself is stopped; that is the batch system
// ending the job, not the command failing, if the system says so.
func judge(j *spooled, removing bool, exit int, asked bool, obs observation, listed bool, now time.Time, grace time.Duration) verdict {
	if asked && listed {
		j.last, j.seen = obs, true
	}
	switch {
	case exit >= 0 && removing:
		return removed
	case exit >= 0 && exit <= 128:
		return exited
	case exit >= 0 && (!asked || listed && obs.phase != ended):
		return keep // until the batch system has finished with the job
	case exit >= 0:
		return settle
	case !asked:
		return keep
	case listed && obs.phase == waiting:
		j.goneSince = time.Time{}
		return keep
	case listed && obs.phase == running:
		j.goneSince = time.Time{}
		if removing || !j.started.IsZero() {
			return keep
		}
		return started
	case listed && obs.phase == stuck:
		if removing {
			return keep
		}
		return reject
	case removing:
		return removed
	case j.goneSince.IsZero():
		j.goneSince = now
		return keep
	case now.Sub(j.goneSince) >= grace:
		return settle
	}
	return keep
}

// poll looks at every job once: for exit-status files always, and in the
// batch system when ask is set.
func (d *queueDriver) poll(ctx context.Context, ask bool) {
	d.mu.Lock()
	jobs := make([]*spooled, 0, len(d.jobs))
	removing := make(map[*spooled]bool, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
		removing[j] = j.removing
	}
	d.mu.Unlock()
	if len(jobs) == 0 {
		return
	}
	exits := d.exitFiles()
	var obs map[string]observation
	if ask {
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i] = j.id
		}
		var err error
		if obs, err = d.sys.query(ctx, ids); err != nil {
			// The batch system may be restarting; its jobs are not lost
			// for that. Keep asking.
			if ctx.Err() == nil {
				d.opts.Logger.Warn("batch queue query failed; will retry", "batch", d.sys.kind(), "err", err)
			}
			ask = false
		}
	}
	now := time.Now()
	var rejected, unsettled []*spooled
	for _, j := range jobs {
		exit, err := -1, error(nil)
		if exits[j.exitFile] {
			exit, err = readExit(j.exitFile)
			if err != nil {
				d.finish(j, Status{State: Failed, Err: err})
				continue
			}
		}
		o, listed := obs[j.id]
		switch judge(j, removing[j], exit, ask, o, listed, now, d.opts.ExitGrace) {
		case started:
			j.started = now
			d.t.Set(Event{ID: j.id, Status: Status{State: Running, Started: now}})
		case exited:
			d.finish(j, j.finish(exit))
		case removed:
			d.finish(j, Status{State: Failed, Err: ErrRemoved})
		case reject:
			rejected = append(rejected, j)
		case settle:
			unsettled = append(unsettled, j)
		}
	}
	if len(rejected) > 0 {
		ids := make([]string, len(rejected))
		for i, j := range rejected {
			ids[i] = j.id
		}
		rmErr := d.sys.remove(ctx, ids)
		for _, j := range rejected {
			err := fmt.Errorf("%w: %s job %s is %s", ErrRejected, d.sys.kind(), j.id, j.last)
			if rmErr != nil {
				err = fmt.Errorf("%w; removing it failed: %v", err, rmErr)
			}
			d.finish(j, Status{State: Failed, Err: err})
		}
	}
	if len(unsettled) > 0 {
		d.settle(ctx, unsettled, now)
	}
}

// settle reports the jobs judge could not: with what the batch system last
// said of each, or, for a job it no longer lists, what it remembers.
func (d *queueDriver) settle(ctx context.Context, jobs []*spooled, now time.Time) {
	var ids []string
	for _, j := range jobs {
		if !j.seen || j.last.phase != ended {
			ids = append(ids, j.id)
		}
	}
	var hist map[string]observation
	if len(ids) > 0 {
		hist = d.sys.history(ctx, ids)
	}
	// An exit status may have appeared meanwhile.
	exits := d.exitFiles()
	for _, j := range jobs {
		o, known := hist[j.id]
		if !known {
			o, known = j.last, j.seen && j.last.phase == ended
		}
		what := "left the queue"
		if known {
			what = "ended as " + o.String()
		}
		if exits[j.exitFile] {
			exit, err := readExit(j.exitFile)
			switch {
			case err != nil:
				d.finish(j, Status{State: Failed, Err: err})
			case exit > 128 && known && o.killed:
				d.finish(j, Status{State: Failed, Err: fmt.Errorf("%w: %s job %s %s; the command was killed by signal %d",
					d.endedBy(j, o, now), d.sys.kind(), j.id, what, exit-128)})
			default:
				d.finish(j, j.finish(exit))
			}
			continue
		}
		d.finish(j, Status{State: Failed, Err: fmt.Errorf("%w: %s job %s %s without reporting the command's exit status",
			d.endedBy(j, o, now), d.sys.kind(), j.id, what)})
	}
}

// endedBy returns ErrTimeLimit if the batch system says it stopped j at its
// wall time, or j ran at least that long; ErrVanished otherwise.
func (d *queueDriver) endedBy(j *spooled, o observation, now time.Time) error {
	wt := j.Resources.WallTime
	if o.timeLimit || wt > 0 && !j.started.IsZero() && now.Sub(j.started) >= wt {
		return ErrTimeLimit
	}
	return ErrVanished
}

// exitFiles returns the exit-status files in the spool, with one directory
// read, which costs the same for one job or a thousand and asks a network
// filesystem afresh.
func (d *queueDriver) exitFiles() map[string]bool {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil
	}
	m := make(map[string]bool)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".status") {
			m[filepath.Join(d.dir, e.Name())] = true
		}
	}
	return m
}

// readExit reads an exit-status file.
func readExit(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("exit status: %w", err)
	}
	code, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || code < 0 {
		return 0, fmt.Errorf("exit status file %s: %q is not an exit status", path, b)
	}
	return code, nil
}

// finish reports j's final status, with the ends of its output, unless it
// is no longer active. A job being removed always ends as ErrRemoved.
func (d *queueDriver) finish(j *spooled, st Status) {
	d.mu.Lock()
	if _, ok := d.jobs[j.id]; !ok {
		d.mu.Unlock()
		return
	}
	if j.removing {
		st = Status{State: Failed, Err: ErrRemoved}
	}
	delete(d.jobs, j.id)
	d.mu.Unlock()
	st.Started = j.started
	st.Ended = time.Now()
	ev := Event{ID: j.id, Status: st, Stdout: readTail(j.out), Stderr: readTail(j.err)}
	d.t.Set(ev)
	if !d.opts.KeepFiles {
		d.removeFiles(j)
	}
}

func (d *queueDriver) removeFiles(j *spooled) {
	for _, p := range []string{j.script, j.out, j.err, j.exitFile, j.script + ".sub"} {
		os.Remove(p)
	}
}

// tools is what a system takes from the Options: where its commands are,
// what to add to a submission, where to log.
type tools struct {
	opts Options
}

// path returns the path of a batch-system command: in Options.Bin if set,
// else the bare name, found on PATH.
func (t tools) path(name string) string {
	if t.opts.Bin != "" {
		return filepath.Join(t.opts.Bin, name)
	}
	return name
}

// need checks that the batch system's command name is there to run, so
// that a missing batch system is one clear error when the driver is made,
// not a failure of every job.
func (t tools) need(name, system string) error {
	if _, err := exec.LookPath(t.path(name)); err != nil {
		if t.opts.Bin != "" {
			return fmt.Errorf("%s is not in %s; is %s installed there?", name, t.opts.Bin, system)
		}
		return fmt.Errorf("%s is not in PATH; is %s installed here?", name, system)
	}
	return nil
}

// commandTimeout bounds one batch-system command, so that a hung controller
// cannot stop the driver for good.
const commandTimeout = 2 * time.Minute

// run runs a batch-system command and returns its standard output. If it
// fails, the error is a *CommandError with what it printed.
func run(ctx context.Context, path string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		out := strings.TrimSpace(stderr.String())
		if out == "" {
			out = strings.TrimSpace(stdout.String())
		}
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return stdout.String(), &CommandError{Args: append([]string{filepath.Base(path)}, args...), Err: err, Output: out}
	}
	return stdout.String(), nil
}
