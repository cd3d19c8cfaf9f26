// Package factory keeps Work Queue workers running on a batch system for a
// master, or for every master of a project, as CCTools' work_queue_factory
// does: it submits workers as batch jobs (through a batch.Driver: local
// processes, SLURM, Grid Engine, HTCondor), keeps between a minimum and a
// maximum of them submitted — within that, as many as the masters' tasks
// need and their capacities allow (seed 000's pool decisions D1–D6,
// Limits.Policy) — replaces those that end, and removes them all when it
// stops.
//
// How many workers to submit is decided by Plan, a state machine without
// I/O, so that other drivers (the simulator model/sim, a worker pool) make
// the same decision; Run is the thin driver around it that asks the masters, submits
// jobs and follows their events.
//
// The factory does not run tasks, choose between masters, or weigh one
// master against another (package workqueue/pool does, by a policy), and it
// never removes a worker that is merely idle: workers leave at their idle
// timeout.
//
// Workers connect to the master from wherever the batch system runs them,
// so the master's address must be reachable from the execution hosts: on a
// cluster that means the submit host's name or an address on the cluster
// network, not 127.0.0.1 (which works only when the batch system runs jobs
// on this machine, as the single-node SLURM of the tests does).
package factory

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// Config configures Run. The zero value of each field means its documented
// default; Driver, Worker.Command, and Master or Project are required.
type Config struct {
	// Driver is the batch system the workers are submitted to. Run removes
	// the jobs it submitted before it returns, but does not close Driver,
	// and expects to be the only reader of its events.
	Driver batch.Driver

	// Master is the "host:port" of the master to serve, as the workers will
	// reach it; the factory asks it directly how many tasks it has.
	Master string
	// Project, instead of Master, is a regular expression (anchored, as in
	// CCTools) for the project names of the masters to serve, found
	// through Catalogs (default catalog.DefaultAddrs()). The workers are
	// told the same project and catalogs.
	Project  string
	Catalogs []string
	// PasswordFile is the masters' password file: the workers are given its
	// path, and the factory uses it to ask a Master for its status.
	PasswordFile string
	// TLS, if set, is how the factory reaches a Master that wants TLS (see
	// wire.ClientTLS); give the workers --ssl in Worker.Args.
	TLS *tls.Config

	// Worker says what each worker job runs.
	Worker Worker
	// Limits bound the number of workers and say how to meet failures.
	Limits Limits

	// Shapes, if set, are the cores and wall times a worker job may have
	// (seed 002's moldable requests): each request of k workers is
	// submitted as the candidate (k times its cores, its wall time, cut to
	// the workers Limits.Max leaves room for) that Chooser predicts to
	// finish first, and counts as its cores over Worker.Cores workers,
	// rounded up (shape.Workers), so that the jobs never hold more than
	// Limits.Max workers' cores.
	// Worker.Cores is then the unit (default 1).
	Shapes []shape.Shape
	// Chooser picks among the candidates (default shape.For: a
	// conservative-backfilling model of the cores the batch system says it
	// has free, where it says; else the first candidate). On SLURM, give
	// shape.Slurm: SLURM's own prediction.
	Chooser shape.Chooser

	// Interval is how often the masters are asked what they need (default
	// 10 s). A catalog learns of a master's tasks only as often as the
	// master advertises (every minute by default).
	Interval time.Duration
	// Logger receives the factory's log: workers submitted, ended,
	// rejected (default: discarded).
	Logger *slog.Logger
	// Report, if set, is called from Run's goroutine whenever the counts
	// change.
	Report func(Counts)
}

// Worker describes the worker jobs.
type Worker struct {
	// Command is the worker program and its first arguments, e.g.
	// {"/usr/local/bin/workqueue", "worker"}, or CCTools'
	// {"work_queue_worker"}: anything that takes their flags (-t, --cores,
	// --memory, --disk, -P, -C, -M) and HOST PORT. It must exist at that
	// path on the execution hosts.
	Command []string
	// Cores, MemoryMB and DiskMB are what each worker offers its master and
	// what its batch job asks for; zero leaves both to their defaults (the
	// worker offers what it finds, the job gets the batch system's
	// default).
	Cores    int
	MemoryMB int64
	DiskMB   int64
	// IdleTimeout is how long a worker waits without a task (or without a
	// master) before it exits (default 5 min, as CCTools).
	IdleTimeout time.Duration
	// Args are further arguments for the worker, before the master.
	Args []string
	// Env holds NAME=value entries added to the workers' environment.
	Env []string
	// Dir is the directory the jobs start in (default: the working
	// directory).
	Dir string
	// Name labels the jobs in the batch system's listings (default
	// "wq-worker").
	Name string
	// WallTime, if set, is the jobs' wall-clock limit: the batch system
	// ends the worker then.
	WallTime time.Duration
}

// The timeouts of what Run does outside its loop.
const (
	askTimeout    = 10 * time.Second // one question to a master or catalog
	removeTimeout = time.Minute      // removing every worker at the end
)

func (c *Config) validate() (password []byte, project *regexp.Regexp, err error) {
	switch {
	case c.Driver == nil:
		return nil, nil, errors.New("factory: no batch driver")
	case len(c.Worker.Command) == 0 || c.Worker.Command[0] == "":
		return nil, nil, errors.New("factory: no worker command")
	case c.Master != "" && c.Project != "":
		return nil, nil, errors.New("factory: give a master address or a project, not both")
	case c.Master == "" && c.Project == "":
		return nil, nil, errors.New("factory: need a master address or a project")
	}
	if c.Master != "" {
		if _, port, err := net.SplitHostPort(c.Master); err != nil {
			return nil, nil, fmt.Errorf("factory: master address: %w", err)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, nil, fmt.Errorf("factory: master address %q: bad port", c.Master)
		}
	}
	if c.Project != "" {
		if project, err = regexp.Compile("^(" + c.Project + ")$"); err != nil {
			return nil, nil, fmt.Errorf("factory: project pattern: %w", err)
		}
		if len(c.Catalogs) == 0 {
			c.Catalogs = catalog.DefaultAddrs()
		}
	}
	if c.PasswordFile != "" {
		// The workers read it from wherever they run.
		if c.PasswordFile, err = filepath.Abs(c.PasswordFile); err != nil {
			return nil, nil, err
		}
		warn := func(msg string) {
			if c.Logger != nil {
				c.Logger.Warn(msg)
			}
		}
		if password, err = wire.ReadPasswordFile(c.PasswordFile, warn); err != nil {
			return nil, nil, fmt.Errorf("factory: password: %w", err)
		}
	}
	w := &c.Worker
	if w.Cores < 0 || w.MemoryMB < 0 || w.DiskMB < 0 || w.IdleTimeout < 0 {
		return nil, nil, errors.New("factory: negative worker resources or timeout")
	}
	if w.IdleTimeout == 0 {
		w.IdleTimeout = 5 * time.Minute
	}
	if w.Name == "" {
		w.Name = "wq-worker"
	}
	if c.Limits.TasksPerWorker == 0 {
		c.Limits.TasksPerWorker = max(w.Cores, 1)
	}
	if len(c.Shapes) > 0 && c.Chooser == nil {
		c.Chooser = shape.For("", c.Driver, nil)
	}
	if _, ok := c.Driver.(batch.FreeReporter); c.Limits.Strategy == Optimal && !ok {
		return nil, nil, errors.New("factory: the optimal strategy needs a batch system that says what it has free (local or slurm)")
	}
	if c.Interval <= 0 {
		c.Interval = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return password, project, nil
}

// job returns the batch job of a request of k workers.
func (c *Config) job(k int) *batch.Job {
	var target []string
	if c.Project != "" {
		target = []string{"-M", c.Project, "-C", strings.Join(c.Catalogs, ",")}
	} else {
		host, port, _ := net.SplitHostPort(c.Master)
		target = []string{host, port}
	}
	return c.Worker.Request(k).Job(c.PasswordFile, target...)
}

// Request returns the worker that stands for a request of k workers (see
// Strategy): one worker offering k times w's cores, memory and disk, its
// job asking the batch system for as much. A w without cores counts as one
// core a worker.
func (w Worker) Request(k int) Worker {
	if k <= 1 {
		return w
	}
	w.Cores = k * max(w.Cores, 1)
	w.MemoryMB *= int64(k)
	w.DiskMB *= int64(k)
	return w
}

// Shaped returns the worker that stands for a request of n workers in
// shape s (package batch/shape): one worker of s's cores, offering n times
// w's memory and disk, its job asking for s's wall time.
func (w Worker) Shaped(s shape.Shape, n int) Worker {
	w = w.Request(n)
	w.Cores, w.WallTime = s.Cores, s.Wall
	return w
}

// Job returns the batch job that runs one worker with the password file
// passwordFile (if any) for target: the worker's last arguments, "HOST
// PORT" or "-M PROJECT -C CATALOGS". w's defaults must be filled in (as
// Run does).
func (w Worker) Job(passwordFile string, target ...string) *batch.Job {
	args := append([]string(nil), w.Command...)
	// Whole seconds, as CCTools' worker reads -t.
	args = append(args, "-t", strconv.Itoa(max(1, int((w.IdleTimeout+time.Second-1)/time.Second))))
	if w.Cores > 0 {
		args = append(args, "--cores", strconv.Itoa(w.Cores))
	}
	if w.MemoryMB > 0 {
		args = append(args, "--memory", strconv.FormatInt(w.MemoryMB, 10))
	}
	if w.DiskMB > 0 {
		args = append(args, "--disk", strconv.FormatInt(w.DiskMB, 10))
	}
	if passwordFile != "" {
		args = append(args, "-P", passwordFile)
	}
	args = append(args, w.Args...)
	args = append(args, target...)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return &batch.Job{
		Name:      w.Name,
		Command:   strings.Join(quoted, " "),
		Dir:       w.Dir,
		Env:       w.Env,
		Resources: batch.Resources{Cores: w.Cores, MemoryMB: w.MemoryMB, DiskMB: w.DiskMB, WallTime: w.WallTime},
	}
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Run keeps workers submitted for the masters until ctx is cancelled or the
// plan gives up, then removes every worker it submitted. It returns ctx's
// error when cancelled, the plan's when it gave up (after too many
// rejected jobs or crashed workers, or no master for Limits.NoMaster), an
// error if the driver's events end, and an error if cfg is not valid.
func Run(ctx context.Context, cfg Config) error {
	password, project, err := cfg.validate()
	if err != nil {
		return err
	}
	plan, err := NewPlan(cfg.Limits, time.Now())
	if err != nil {
		return err
	}
	f := &factory{cfg: cfg, log: cfg.Logger, plan: plan, password: password, project: project}
	return f.run(ctx)
}

// factory is Run's state, owned by its goroutine.
type factory struct {
	cfg      Config
	log      *slog.Logger
	plan     *Plan
	password []byte
	project  *regexp.Regexp

	askErr   string // the last error asking the masters, to log only changes
	reported Counts
}

// answer is what one look at the masters found.
type answer struct {
	demand Demand
	err    error
}

func (f *factory) run(ctx context.Context) error {
	f.log.Info("factory started", "command", f.cfg.job(1).Command, "min", f.plan.lim.Min, "max", f.plan.lim.Max,
		"strategy", f.plan.lim.Strategy)
	answers := make(chan answer)
	askCtx, stopAsking := context.WithCancel(ctx)
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		f.ask(askCtx, answers)
	}()
	retry := time.NewTimer(time.Hour)
	retry.Stop()

	var err error
	for err == nil {
		if err = f.act(ctx, retry); err != nil {
			break
		}
		f.report()
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case ev, ok := <-f.cfg.Driver.Events():
			if !ok {
				err = errors.New("factory: the batch driver was closed")
				break
			}
			f.event(ev)
		case a := <-answers:
			f.observe(a)
		case <-retry.C:
		}
	}
	stopAsking()
	<-asked
	f.removeAll()
	f.report()
	return err
}

// act submits workers while the plan says so, and arms retry when it
// pauses.
func (f *factory) act(ctx context.Context, retry *time.Timer) error {
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if f.plan.lim.Strategy == Optimal {
			f.observeFree(ctx)
		}
		d := f.plan.Next(time.Now())
		switch {
		case d.Err != nil:
			return d.Err
		case d.Retry > 0:
			retry.Reset(d.Retry)
			return nil
		case d.Submit == 0:
			return nil
		}
		for _, want := range d.Requests {
			job, k := f.shaped(ctx, want, f.plan.Room())
			id, err := f.cfg.Driver.Submit(ctx, job)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				f.plan.SubmitFailed(err, time.Now())
				f.log.Warn("worker not submitted", "workers", k, "err", err, "failures", f.plan.Counts().Failures)
				break
			}
			f.plan.Submitted(id, k)
			f.log.Debug("worker submitted", "job", id, "workers", k)
			if k != want {
				break // a shape other than asked for: the plan splits what remains afresh
			}
		}
	}
}

// shaped returns the job of a request of k workers, when room workers may
// still be added, and the workers it counts as: with candidate shapes, the
// one predicted to finish first, cut to room (shape.Pick).
func (f *factory) shaped(ctx context.Context, k, room int) (*batch.Job, int) {
	if len(f.cfg.Shapes) == 0 {
		return f.cfg.job(k), k
	}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	c, n, err := shape.Pick(ctx, f.cfg.Chooser, f.cfg.Shapes, k, f.cfg.Worker.Cores, room)
	if err != nil {
		f.log.Warn("cannot predict the candidate shapes; taking the first", "err", err)
	}
	w := f.cfg
	w.Worker = w.Worker.Shaped(c.Shape, n)
	job := w.job(1)
	f.log.Debug("request shape chosen", "workers", k, "cores", c.Shape.Cores, "wall", c.Shape.Wall,
		"predicted_start", c.Start, "predicted_finish", c.Finish)
	return job, n
}

// observeFree tells the plan how many workers the batch system could
// start now.
func (f *factory) observeFree(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	cores, err := f.cfg.Driver.(batch.FreeReporter).FreeCores(ctx)
	if err != nil {
		f.log.Warn("cannot learn what the batch system has free", "err", err)
		f.plan.ObserveFree(-1)
		return
	}
	f.plan.ObserveFree(cores / max(f.cfg.Worker.Cores, 1))
}

// event records a change in one worker job.
func (f *factory) event(ev batch.Event) {
	switch {
	case ev.State == batch.Running:
		f.plan.Started(ev.ID)
		f.log.Debug("worker started", "job", ev.ID)
	case ev.State.Final():
		switch o := f.plan.Ended(ev, time.Now()); o {
		case Exited, Removed:
			f.log.Debug("worker ended", "job", ev.ID, "how", o)
		case Killed:
			f.log.Warn("worker died; replacing it", "job", ev.ID, "status", status(ev.Status))
		default:
			f.log.Warn("worker "+o.String(), "job", ev.ID, "status", status(ev.Status),
				"stderr", strings.TrimPrefix(crashReason(ev.Stderr), ": "), "failures", f.plan.Counts().Failures)
		}
	}
}

// status says how a job ended, for the log.
func status(st batch.Status) string {
	if st.State == batch.Done {
		return "exit " + strconv.Itoa(st.ExitCode)
	}
	return st.Err.Error()
}

// observe records what the masters said.
func (f *factory) observe(a answer) {
	msg := ""
	switch {
	case a.err != nil:
		f.plan.Unobserved()
		msg = a.err.Error()
	case a.demand.Masters == 0:
		f.plan.Observe(a.demand, time.Now())
		msg = "no master of project " + f.cfg.Project + " in the catalog"
	default:
		f.plan.Observe(a.demand, time.Now())
	}
	if msg != f.askErr {
		if msg != "" {
			f.log.Warn("cannot learn what the masters need; keeping the minimum of workers", "reason", msg)
		} else {
			f.log.Info("masters found", "masters", a.demand.Masters)
		}
		f.askErr = msg
	}
}

// ask looks at the masters every interval and sends what it found, until
// ctx ends.
func (f *factory) ask(ctx context.Context, answers chan<- answer) {
	tick := time.NewTicker(f.cfg.Interval)
	defer tick.Stop()
	for {
		actx, cancel := context.WithTimeout(ctx, min(askTimeout, f.cfg.Interval))
		var a answer
		if f.project != nil {
			a.demand, a.err = askCatalogs(actx, f.cfg.Catalogs, f.project)
		} else {
			a.demand, a.err = askMaster(actx, f.cfg.Master, f.password, f.cfg.TLS)
		}
		cancel()
		select {
		case answers <- a:
		case <-ctx.Done():
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// removeAll removes every worker job that has not ended and waits, for a
// while, until the batch system confirms that each has.
func (f *factory) removeAll() {
	RemoveAll(f.cfg.Driver, f.log, f.plan.Jobs, f.event)
}

// RemoveAll removes every worker job of d that jobs lists and waits, up
// to a minute, until d's events (passed to event, which updates what jobs
// lists) confirm that each has ended. The factory and the pool end so.
func RemoveAll(d batch.Driver, log *slog.Logger, jobs func() []string, event func(batch.Event)) {
	ids := jobs()
	if len(ids) == 0 {
		return
	}
	log.Info("removing workers", "jobs", len(ids))
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	for _, id := range ids {
		if err := d.Remove(ctx, id); err != nil {
			log.Warn("removing worker", "job", id, "err", err)
		}
	}
	for len(jobs()) > 0 {
		select {
		case ev, ok := <-d.Events():
			if !ok {
				return
			}
			event(ev)
		case <-ctx.Done():
			log.Warn("workers not confirmed removed", "jobs", jobs())
			return
		}
	}
}

// report hands the counts to Config.Report when they have changed.
func (f *factory) report() {
	if c := f.plan.Counts(); !reflect.DeepEqual(c, f.reported) {
		f.reported = c
		if f.cfg.Report != nil {
			f.cfg.Report(c)
		}
	}
}
