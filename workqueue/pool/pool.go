package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/factory"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// Config configures Run. The zero value of each field means its documented
// default; Driver, PolicyFile and Worker.Command are required.
type Config struct {
	// Driver is the batch system the workers are submitted to. Run removes
	// the jobs it submitted before it returns, but does not close Driver,
	// and expects to be the only reader of its events.
	Driver batch.Driver
	// PolicyFile is the policy's path; Run reads it again when it changes.
	PolicyFile string
	// Catalogs are where the masters are found and the decision published
	// (default catalog.DefaultAddrs()); CatalogNetwork is how records are
	// sent to them, "udp" (default) or "tcp".
	Catalogs       []string
	CatalogNetwork string
	// Name is the pool's name, which its workers tell their masters and
	// its decision is published under (default HOSTNAME-PID, as the seed).
	Name string
	// PasswordFile is the masters' password file, given to the workers;
	// it also signs the published decision (enforce.Sign), which the
	// masters and workers that hold it honour only signed.
	PasswordFile string
	// Worker says what each worker job runs: a worker program that takes
	// CCTools' flags and --from-factory, --follow-pool (unless Stay) and
	// -C (the catalogs), and --billing-cycle when the policy has one, such
	// as this program's worker.
	Worker factory.Worker
	// Stay keeps each worker with the master it was submitted for: without
	// it, a worker a master releases, or whose master is gone, serves the
	// next master the pool's decision gives room (package enforce).
	Stay bool
	// Shapes, if set, are the cores and wall times a worker job may have
	// (seed 002's moldable requests), unless the policy names its own:
	// each request of k workers is submitted as the candidate (k times its
	// cores, its wall time, cut to the workers max_workers leaves room
	// for) that Chooser predicts to finish first, and counts as its cores
	// over Worker.Cores workers, rounded up (shape.Pick).
	Shapes []shape.Shape
	// Chooser picks among the candidates (default shape.For: a
	// conservative-backfilling model of the cores the batch system says
	// it has free, where it says; else the first candidate). On SLURM,
	// give shape.Slurm: SLURM's own prediction.
	Chooser shape.Chooser
	// Limits say how failures are met.
	Limits Limits
	// Interval is how often the catalog is asked about the masters and the
	// decision published (default 10 s).
	Interval time.Duration
	// Logger receives the pool's log (default: discarded).
	Logger *slog.Logger
	// Report, if set, is called from Run's goroutine after each decision.
	Report func(Report)
	// Reloaded, if set, is called from Run's goroutine after each reading
	// of the changed policy file, with the error that kept the last good
	// policy, or nil.
	Reloaded func(error)
}

// Report is what the pool decided and keeps.
type Report struct {
	Decision []Assignment
	Workers  map[string]int // jobs not ended, by master address
	Counts   factory.Counts
}

func (c *Config) validate() error {
	switch {
	case c.Driver == nil:
		return errors.New("pool: no batch driver")
	case c.PolicyFile == "":
		return errors.New("pool: no policy file")
	case len(c.Worker.Command) == 0 || c.Worker.Command[0] == "":
		return errors.New("pool: no worker command")
	}
	if len(c.Catalogs) == 0 {
		c.Catalogs = catalog.DefaultAddrs()
	}
	if c.CatalogNetwork == "" {
		c.CatalogNetwork = "udp"
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = host + "-" + strconv.Itoa(os.Getpid())
	}
	if strings.ContainsAny(c.Name, ":, \t\n") {
		return fmt.Errorf("pool: name %q: no colons, commas or spaces (it is listed in workers_by_pool)", c.Name)
	}
	if c.PasswordFile != "" {
		var err error
		if c.PasswordFile, err = filepath.Abs(c.PasswordFile); err != nil {
			return err
		}
	}
	w := &c.Worker
	if w.Cores < 0 || w.MemoryMB < 0 || w.DiskMB < 0 || w.IdleTimeout < 0 {
		return errors.New("pool: negative worker resources or timeout")
	}
	if w.IdleTimeout == 0 {
		w.IdleTimeout = 5 * time.Minute
	}
	if w.Name == "" {
		w.Name = "wq-pool-worker"
	}
	if c.Limits.TasksPerWorker == 0 {
		c.Limits.TasksPerWorker = max(w.Cores, 1)
	}
	if c.Limits.WorkerCores == 0 {
		c.Limits.WorkerCores = w.Cores
	}
	if c.Chooser == nil {
		c.Chooser = shape.For("", c.Driver, nil)
	}
	if c.Interval <= 0 {
		c.Interval = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Run keeps workers submitted for the masters the policy names until ctx
// is cancelled or the plan gives up, then removes every worker it
// submitted. It returns ctx's error when cancelled, the plan's when it
// gave up, and an error if cfg or the policy file is not valid.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	pol, err := ReadPolicy(cfg.PolicyFile)
	if err != nil {
		return err // it names the file
	}
	plan, err := NewPlan(pol, cfg.Limits, time.Now())
	if err != nil {
		return err
	}
	p := &pool{cfg: cfg, log: cfg.Logger, plan: plan}
	p.policy.Store(pol)
	if cfg.PasswordFile != "" {
		// The decision is signed with the masters' password: the
		// masters and the workers, who hold it, honour no other.
		p.password, err = wire.ReadPasswordFile(cfg.PasswordFile, func(msg string) { p.log.Warn(msg) })
		if err != nil {
			return fmt.Errorf("pool: %w", err)
		}
		p.prober = &prober{password: p.password, log: p.log, known: map[string]verdict{}}
	}
	return p.run(ctx)
}

// pool is Run's state, owned by its goroutine.
type pool struct {
	cfg  Config
	log  *slog.Logger
	plan *Plan
	// password is the masters' password file's content, which signs the
	// published decision, or nil.
	password []byte
	// prober, with a password, keeps the masters that prove they hold
	// it; only ask's goroutine uses it, with policy, the policy in force.
	prober *prober
	policy atomic.Pointer[Policy]

	askErr    string // the last error asking the catalog, to log only changes
	published string // the last decision published, to log only changes
}

// answer is what one look at the catalog found.
type answer struct {
	masters []Master
	err     error
}

// reload is one reading of the changed policy file.
type reload struct {
	policy *Policy
	err    error
}

func (p *pool) run(ctx context.Context) error {
	pol := p.plan.Policy()
	p.log.Info("pool started", "name", p.cfg.Name, "policy", p.cfg.PolicyFile, "max_workers", pol.MaxWorkers, "decision", pol.Decision)
	watcher, err := WatchPolicy(p.cfg.PolicyFile)
	if err != nil {
		return err
	}
	bg, stop := context.WithCancel(ctx)
	answers := make(chan answer)
	reloads := make(chan reload)
	done := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.ask(bg, answers) }()
	go func() {
		defer wg.Done()
		done <- watcher.Run(bg, func(pol *Policy, err error) {
			select {
			case reloads <- reload{pol, err}:
			case <-bg.Done():
			}
		})
	}()
	retry := time.NewTimer(time.Hour)
	retry.Stop()

	for err == nil {
		if err = p.act(ctx, retry); err != nil {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case ev, ok := <-p.cfg.Driver.Events():
			if !ok {
				err = errors.New("pool: the batch driver was closed")
				break
			}
			p.event(ev)
		case a := <-answers:
			p.observe(ctx, a)
		case r := <-reloads:
			p.reload(r)
		case werr := <-done:
			if werr != nil && ctx.Err() == nil {
				err = fmt.Errorf("pool: %w", werr)
			}
		case <-retry.C:
		}
	}
	stop()
	wg.Wait()
	p.removeAll()
	return err
}

// reload puts a changed policy in force, or says why not.
func (p *pool) reload(r reload) {
	if r.err != nil {
		p.log.Warn("policy not reloaded; keeping the last good one", "err", r.err)
	} else {
		p.plan.SetPolicy(r.policy)
		p.policy.Store(r.policy)
		p.log.Info("policy reloaded", "max_workers", r.policy.MaxWorkers, "decision", r.policy.Decision)
	}
	if p.cfg.Reloaded != nil {
		p.cfg.Reloaded(r.err)
	}
}

// act submits workers while the plan says so, and arms retry when it
// pauses.
func (p *pool) act(ctx context.Context, retry *time.Timer) error {
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p.plan.Policy().Strategy == factory.Optimal {
			p.observeFree(ctx)
		}
		d := p.plan.Next(time.Now())
		switch {
		case d.Err != nil:
			return fmt.Errorf("pool: %w", d.Err)
		case d.Retry > 0:
			retry.Reset(d.Retry)
			return nil
		case len(d.Submit) == 0:
			return nil
		}
		for _, r := range d.Submit {
			job, k := p.shaped(ctx, r, p.plan.Room())
			id, err := p.cfg.Driver.Submit(ctx, job)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				p.plan.SubmitFailed(err, time.Now())
				p.log.Warn("worker not submitted", "master", r.Addr, "workers", k, "err", err)
				break
			}
			p.plan.Submitted(id, r.Addr, k)
			p.log.Debug("worker submitted", "job", id, "master", r.Addr, "workers", k)
			if k != r.Workers {
				break // a shape other than asked for: the plan hands out what remains afresh
			}
		}
	}
}

// observeFree tells the plan how many workers the batch system could
// start now; one that cannot say gets none under the optimal strategy.
func (p *pool) observeFree(ctx context.Context) {
	fr, ok := p.cfg.Driver.(batch.FreeReporter)
	if !ok {
		p.log.Warn("strategy optimal: this batch system does not say what it has free (local and slurm do); submitting nothing")
		p.plan.ObserveFree(-1)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cores, err := fr.FreeCores(ctx)
	if err != nil {
		p.log.Warn("cannot learn what the batch system has free", "err", err)
		cores = -1
	}
	p.plan.ObserveFree(cores / max(p.cfg.Worker.Cores, 1))
}

// shaped returns the job of request r, when room workers may still be
// added, and the workers it counts as: with candidate shapes (the
// policy's, else Config.Shapes), the one predicted to finish first, cut
// to room (shape.Pick).
func (p *pool) shaped(ctx context.Context, r Request, room int) (*batch.Job, int) {
	shapes := p.plan.Policy().Shapes
	if len(shapes) == 0 {
		shapes = p.cfg.Shapes
	}
	if len(shapes) == 0 {
		return p.job(r.Addr, p.cfg.Worker.Request(r.Workers)), r.Workers
	}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	c, n, err := shape.Pick(ctx, p.cfg.Chooser, shapes, r.Workers, p.cfg.Worker.Cores, room)
	if err != nil {
		p.log.Warn("cannot predict the candidate shapes; taking the first", "err", err)
	}
	job := p.job(r.Addr, p.cfg.Worker.Shaped(c.Shape, n))
	p.log.Debug("request shape chosen", "master", r.Addr, "workers", r.Workers, "cores", c.Shape.Cores,
		"wall", c.Shape.Wall, "predicted_start", c.Start, "predicted_finish", c.Finish)
	return job, n
}

// job returns the batch job of worker w for the master at addr.
func (p *pool) job(addr string, w factory.Worker) *batch.Job {
	pre := []string{"--from-factory", p.cfg.Name}
	if !p.cfg.Stay {
		pre = append(pre, "--follow-pool", "-C", strings.Join(p.cfg.Catalogs, ","))
	}
	w.Args = append(pre, w.Args...)
	if c := p.plan.Policy().BillingCycle; c > 0 {
		w.Args = append(w.Args, "--billing-cycle", strconv.Itoa(max(1, int(c/time.Second))))
	}
	host, port, _ := net.SplitHostPort(addr)
	return w.Job(p.cfg.PasswordFile, host, port)
}

// event records a change in one worker job.
func (p *pool) event(ev batch.Event) {
	switch {
	case ev.State == batch.Running:
		p.plan.Started(ev.ID)
	case ev.State.Final():
		switch o := p.plan.Ended(ev, time.Now()); o {
		case factory.Exited, factory.Removed:
			p.log.Debug("worker ended", "job", ev.ID, "how", o)
		default:
			p.log.Warn("worker "+o.String(), "job", ev.ID, "state", ev.State.String(), "err", ev.Err)
		}
	}
}

// observe records what the catalog said, takes the decision and publishes
// it.
func (p *pool) observe(ctx context.Context, a answer) {
	msg := ""
	if a.err != nil {
		p.plan.Unobserved()
		msg = a.err.Error()
	} else {
		p.plan.Observe(a.masters, time.Now())
	}
	if msg != p.askErr {
		if msg != "" {
			p.log.Warn("cannot learn what the masters need", "reason", msg)
		}
		p.askErr = msg
	}
	if a.err != nil {
		return
	}
	p.plan.Next(time.Now()) // the decision, before it is published
	p.publish(ctx)
}

// publish sends the pool's record, with its decision, to the catalogs.
func (p *pool) publish(ctx context.Context) {
	dec := p.plan.Decision()
	c, ours := p.plan.Counts()
	pol := p.plan.Policy()
	s := FormatDecision(dec)
	rec := catalog.Record{
		"type": enforce.PoolType, "name": p.cfg.Name, "port": 0, "owner": os.Getenv("USER"),
		"decision": s, "decision_policy": pol.Decision.String(),
		"max_workers": pol.MaxWorkers, "workers": c.Queued + c.Running,
		"workers_queued": c.Queued, "workers_running": c.Running,
		"lifetime": max(180, 3*int(p.cfg.Interval.Seconds())),
	}
	enforce.Sign(rec, assignments(dec, p.cfg.Limits.WorkerCores), p.password, time.Now())
	for _, addr := range p.cfg.Catalogs {
		sctx, cancel := context.WithTimeout(ctx, min(askTimeout, p.cfg.Interval))
		if err := catalog.Send(sctx, addr, p.cfg.CatalogNetwork, rec); err != nil {
			p.log.Warn("decision not published", "catalog", addr, "err", err)
		}
		cancel()
	}
	if s != p.published {
		p.published = s
		p.log.Info("decision", "decision", s, "workers", c.Queued+c.Running)
	}
	if p.cfg.Report != nil {
		p.cfg.Report(Report{Decision: dec, Workers: ours, Counts: c})
	}
}

// assignments is the decision as the masters and the workers read it, in
// workers of unit cores (0: not known).
func assignments(dec []Assignment, unit int) []enforce.Assignment {
	out := make([]enforce.Assignment, len(dec))
	for i, a := range dec {
		host, _, _ := net.SplitHostPort(a.Addr)
		out[i] = enforce.Assignment{Project: a.Project, Name: a.Name, Port: a.Port, Address: host, Workers: a.Workers,
			WorkerCores: unit}
	}
	return out
}

// askTimeout bounds one question to the catalog.
const askTimeout = 10 * time.Second

// ask looks at the catalog every interval and sends what it found, until
// ctx ends.
func (p *pool) ask(ctx context.Context, answers chan<- answer) {
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for {
		actx, cancel := context.WithTimeout(ctx, min(askTimeout, p.cfg.Interval))
		found, err := catalog.FindMasters(actx, p.cfg.Catalogs, nil)
		cancel()
		if p.prober != nil {
			found = p.prober.genuine(ctx, found, p.policy.Load(), time.Now())
		}
		a := answer{err: err}
		for _, m := range found {
			a.masters = append(a.masters, masterOf(m, p.cfg.Name))
		}
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

// masterOf reads what the pool needs of a master's catalog record; pool is
// this pool's name in its workers_by_pool.
func masterOf(m catalog.Master, pool string) Master {
	tasks, workers, capacity := factory.RecordDemand(m.Record)
	return Master{Project: m.Project, Addr: m.Addr(), Name: m.Name, Port: m.Port, Tasks: tasks, Connected: workers,
		Received: enforce.Received(m.Record, pool), Capacity: capacity,
		Cores: factory.RecordCores(m.Record), PoolCores: max(enforce.PoolCores(m.Record, pool), 0)}
}

// removeAll removes every worker job that has not ended and waits, for a
// while, until the batch system confirms that each has.
func (p *pool) removeAll() {
	factory.RemoveAll(p.cfg.Driver, p.log, p.plan.Jobs, p.event)
}
