package distmaster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/batch/wq"
	"github.com/rightsize/rightsize/distmaster/jobs"
	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/workqueue"
)

// FastAbort configures the fast abort of straggling block jobs (see
// jobs.FastAbort: package lifecycle's policy, applied to jobs).
type FastAbort = jobs.FastAbort

// TrackerCounts count what happened to a run's blocks and jobs.
type TrackerCounts = jobs.Counts

// Config is what every distributed run needs besides its problem. Driver
// and WorkDir are required; the zero value of every other field means its
// documented default.
type Config struct {
	// Driver runs the block jobs. The runs do not close it. OpenDriver
	// opens one with Work Queue's fast abort set up for the block jobs.
	Driver batch.Driver
	// Kind is the batch type the driver is for (see batch.Kinds); it sets
	// the dispatch latency the models assume. Default: "wq" for a Work
	// Queue driver, "local" for a local one, otherwise "batch".
	Kind string
	// Program is the executable every job runs in sub-problem mode: this
	// same program (os.Executable) by default.
	Program string
	// WorkDir holds each job's files while it runs: inputs written for it
	// and outputs fetched back. On a batch system it must be on the
	// filesystem the execution hosts share. A run empties it first (of
	// what a killed run left) and removes it at the end. DefaultWorkDir
	// puts it beside the checkpoint.
	WorkDir string
	// Retries, MaxJobs and FastAbort: see jobs.Config. FastAbort is the
	// master's own timer for batch systems; for Work Queue it is set when
	// the driver is opened (OpenDriver) and the master leaves it to Work
	// Queue.
	Retries   lifecycle.Retries
	MaxJobs   int
	FastAbort FastAbort
	// Cluster, if set, holds the measured inputs of the models that size
	// the jobs: the cluster's width, dispatch latency and bandwidth; it
	// means placement has explained the run, so the explanation does not
	// repeat the models' choice. Without it the models assume a figure
	// per kind of batch system.
	Cluster *place.Cluster
	// LocalCores are this machine's cores when they take jobs too (a
	// hybrid run); the models count them as more slots.
	LocalCores int
	// JobCores are the cores each job asks for and runs its cells on
	// (default 1): with a whole node's, a batch system starts one job per
	// node rather than one per core, each paying a dispatch.
	JobCores int
	// Shapes, if set, are the cores and wall times a block job may have
	// (seed 002's moldable requests): the run takes the one Chooser
	// predicts to finish first, whose cores replace JobCores and whose
	// wall time becomes every job's wall-clock limit (batch.Resources),
	// the models keeping each job to half of it.
	Shapes []shape.Shape
	// Chooser picks among Shapes (default shape.For: SLURM's own
	// prediction on slurm, a conservative-backfilling model of the free
	// cores where the batch system says them, else the first).
	Chooser shape.Chooser
	// TickInterval is how often running jobs are checked for stragglers
	// (default 1 s).
	TickInterval time.Duration
	// Explain, if set, receives the measurements, the models' predictions,
	// the choice of job size, and every retry and fast abort, in words.
	Explain io.Writer
	// Logger receives the same events as structured records (default:
	// discarded).
	Logger *slog.Logger
	// JobEnded, if set, is called as each block job ends, however it
	// ended, for a report of the run (package report).
	JobEnded func(JobEnd)
	// InFlight, if set, is called with the cells of the jobs submitted and
	// not yet ended (queued or running: Work Queue says which only at the
	// end) whenever that number changes, for a status page.
	InFlight func(cells int64)

	// wallTime is the chosen shape's wall time (chooseShape), or 0.
	wallTime time.Duration
}

// A JobEnd is a block job that ended.
type JobEnd struct {
	Block   int    // the block's number in the run
	Name    string // the block, in words: "x0-y5"
	Parents []int  // the blocks whose cells it read
	// Here says the job was done in this process (batch.Job.Do), not by
	// a process on the batch system or here.
	Here           bool
	Started, Ended time.Time // Started is Ended when the job was not seen running
	Err            error     // why it failed; nil when it completed its block
	Stderr         []byte    // the end of its standard error
}

func (c *Config) fill() error {
	if c.Driver == nil {
		return errors.New("distmaster: no batch driver")
	}
	if c.WorkDir == "" {
		return errors.New("distmaster: no work directory")
	}
	if c.Kind == "" {
		_, local := c.Driver.(*batch.Local)
		switch {
		case batch.ShipsFiles(c.Driver):
			c.Kind = "wq"
		case local:
			c.Kind = "local"
		default:
			c.Kind = "batch"
		}
	}
	if c.JobCores < 1 {
		c.JobCores = 1
	}
	if c.TickInterval <= 0 {
		c.TickInterval = time.Second
	}
	if c.Explain == nil {
		c.Explain = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// dispatchLatency is the time the models take between submitting a job
// and its start: the cluster's measured (or, where it says so, assumed)
// dispatch when the run was placed with one, else a rough figure for the
// kind of batch system.
func dispatchLatency(cfg *Config) place.Value {
	if cfg.Cluster != nil {
		return cfg.Cluster.Dispatch
	}
	d := time.Second
	switch cfg.Kind {
	case "local":
		d = 20 * time.Millisecond
	case "wq":
		d = 100 * time.Millisecond
	case "condor":
		d = 30 * time.Second
	}
	return place.Value{V: d.Seconds()}
}

// hostBound is how many jobs can run at once, as far as the master knows:
// the cluster's slots where they were counted (and this machine's cores in
// a hybrid run), the local driver's slots, or 400; at most -J.
func hostBound(cfg *Config) int {
	n := 400
	switch {
	case cfg.Cluster != nil && !cfg.Cluster.Hosts.Assumed():
		n = max(cfg.Cluster.Slots()/cfg.JobCores+cfg.LocalCores, 1)
	case cfg.Kind == "local":
		n = runtime.NumCPU()
	}
	if cfg.MaxJobs > 0 {
		n = min(n, cfg.MaxJobs)
	}
	return n
}

// OpenDriver opens the batch driver of type kind (one of batch.Kinds). For
// wq it starts a Work Queue master configured by wqcfg, with fast abort fa
// for jobs of category (the block jobs' category: "allpairs" or
// "wavefront"); the other kinds are batch.New's, with opts.
func OpenDriver(kind string, opts batch.Options, wqcfg workqueue.Config, category string, fa FastAbort) (batch.Driver, error) {
	if kind != "wq" {
		return batch.New(kind, opts)
	}
	if fa.Multiplier >= 1 || fa.Sigmas > 0 {
		cats := map[string]FastAbort{category: fa}
		for k, v := range wqcfg.FastAbortCategories {
			if k != category {
				cats[k] = v
			}
		}
		wqcfg.FastAbortCategories = cats
	}
	return wq.Open(wqcfg)
}

// blockSource is what the run loop needs of an abstraction.
type blockSource interface {
	// name names block b in messages and file names.
	name(b int) string
	// job writes the files of a job for block b into dir (new and empty)
	// and returns the job.
	job(b int, dir string) (*batch.Job, error)
	// absorb keeps whatever cells of block b the job left in dir — all of
	// them, or those it finished before it failed — and reports whether
	// the block is now complete. It is called for every job that ended,
	// except stragglers the tracker removed.
	absorb(b int, dir string) (complete bool, err error)
	// done reports that block b is complete and returns the blocks that
	// it made ready.
	done(b int) []int
	// failed reports that block b was given up.
	failed(b int, err *BlockError)
	// parents returns the blocks whose cells block b reads.
	parents(b int) []int
	// size returns the cells block b computes.
	size(b int) int64
}

// BlockError is a block given up after its last attempt, with the end of
// what its last job wrote.
type BlockError struct {
	Block    string // which block, in words
	Attempts int    // jobs it had
	Err      error  // why the last one failed
	Stderr   []byte // the end of the last job's standard error
}

func (e *BlockError) Error() string {
	attempts := "1 attempt"
	if e.Attempts != 1 {
		attempts = fmt.Sprintf("%d attempts", e.Attempts)
	}
	return fmt.Sprintf("block %s failed after %s: %v", e.Block, attempts, e.Err)
}

func (e *BlockError) Unwrap() error { return e.Err }

// StderrTail returns the last few lines of the job's standard error,
// indented for a report.
func (e *BlockError) StderrTail() string {
	const maxLines, maxBytes = 8, 1500
	s := bytes.TrimRight(e.Stderr, "\n")
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
	}
	lines := bytes.Split(s, []byte("\n"))
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	var b bytes.Buffer
	for _, l := range lines {
		if len(l) > 0 {
			b.WriteString("    ")
			b.Write(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// FailedError is returned when blocks were given up. Every block that
// finished was kept.
type FailedError struct {
	Blocks []*BlockError // in the order they were given up
	Total  int           // blocks in the run
}

func (e *FailedError) Error() string {
	s := fmt.Sprintf("%d of %d blocks failed", len(e.Blocks), e.Total)
	if len(e.Blocks) > 0 {
		s += "; first: " + e.Blocks[0].Error()
	}
	return s
}

func (e *FailedError) Unwrap() error {
	if len(e.Blocks) == 0 {
		return nil
	}
	return e.Blocks[0]
}

// loopStats is what the run loop reports.
type loopStats struct {
	TrackerCounts
	// MeanJob is the mean running time of the jobs that ran as processes
	// and finished their blocks: what the cluster's jobs cost, which the
	// blocks done in the master's process (batch.Job.Do) do not say.
	MeanJob time.Duration
	// MeanJobCells is the mean cells of the jobs MeanJob counts: not a
	// whole block's, since the blocks at the problem's edges are smaller.
	MeanJobCells float64
	// HereJobs counts the jobs done in the master's process.
	HereJobs int
	// Dispatch is the least time from a job's submission to its start,
	// of the jobs that ran as processes (0 if the driver said none): the
	// batch system's dispatch latency, without the waits for a free slot.
	Dispatch time.Duration
}

// leastDispatch keeps in *least the time from ev's submission to its
// start, if the driver reported both and it is less.
func leastDispatch(least *time.Duration, ev batch.Event) {
	if ev.Submitted.IsZero() || ev.Started.IsZero() || ev.Started.Before(ev.Submitted) {
		return
	}
	if d := ev.Started.Sub(ev.Submitted); *least == 0 || d < *least {
		*least = max(d, time.Nanosecond)
	}
}

// RefusedError is the error of a run stopped because the batch system
// refused every job submitted to it: Refused submissions in a row, the last
// with Err. What finished before is kept in the checkpoint.
type RefusedError struct {
	Refused int
	Err     error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the batch system refused %d jobs in a row, the last with: %v", e.Refused, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// runLoop submits the blocks of src, starting with ready, and follows their
// jobs until every block is done or given up, or ctx ends. Jobs still
// running when it returns early are removed.
func runLoop(ctx context.Context, cfg *Config, src blockSource, ready []int, total int) (loopStats, error) {
	fa := cfg.FastAbort
	if batch.AbortsStragglers(cfg.Driver) {
		fa = FastAbort{} // Work Queue, say, aborts stragglers itself
	}
	tr := jobs.New(jobs.Config{Retries: cfg.Retries, MaxJobs: cfg.MaxJobs, FastAbort: fa})
	tr.Add(ready...)
	type jobInfo struct {
		block   int
		cells   int64
		dir     string
		started time.Time   // when it was seen running
		here    atomic.Bool // done in this process
	}
	submitted := map[string]*jobInfo{}
	var inFlight int64 // cells of the jobs in submitted
	flight := func(delta int64) {
		inFlight += delta
		if cfg.InFlight != nil {
			cfg.InFlight(inFlight)
		}
	}
	var ran time.Duration // by the jobs that ran as processes and finished
	var ranJobs, hereJobs int
	var ranCells int64 // of those jobs
	var dispatch time.Duration
	stats := func() loopStats {
		st := loopStats{TrackerCounts: tr.Counts(), HereJobs: hereJobs, Dispatch: dispatch}
		if ranJobs > 0 {
			st.MeanJob = ran / time.Duration(ranJobs)
			st.MeanJobCells = float64(ranCells) / float64(ranJobs)
		}
		return st
	}
	var failures []*BlockError
	d := cfg.Driver
	defer func() {
		// Whatever still runs is no longer wanted: removed without waiting.
		rm, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range tr.Running() {
			d.Remove(rm, id)
		}
	}()

	handle := func(o jobs.Outcome, stderr []byte) {
		name := src.name(o.Block)
		switch {
		case o.Done:
			tr.Add(src.done(o.Block)...)
		case o.Retry:
			fmt.Fprintf(cfg.Explain, "block %s failed (attempt %d): %v; submitting it again\n", name, o.Attempts, o.Err)
			cfg.Logger.Warn("block failed; retrying", "block", name, "attempt", o.Attempts, "err", o.Err)
		case o.GaveUp:
			be := &BlockError{Block: name, Attempts: o.Attempts, Err: o.Err, Stderr: stderr}
			failures = append(failures, be)
			cfg.Logger.Error("block failed", "block", name, "attempts", o.Attempts, "err", o.Err)
			src.failed(o.Block, be)
		}
	}
	submit := func() error {
		for {
			b, attempt, ok := tr.Next()
			if !ok {
				return nil
			}
			dir := filepath.Join(cfg.WorkDir, fmt.Sprintf("%s.%d", src.name(b), attempt))
			began := time.Now() // the master's own time on the job starts
			job, err := src.job(b, dir)
			if err != nil {
				// The master could not write the job's files: a problem
				// here (a full disk), not on a worker, that retries
				// would not mend.
				return fmt.Errorf("block %s: %w", src.name(b), err)
			}
			info := &jobInfo{block: b, cells: src.size(b), dir: dir}
			if do := job.Do; do != nil {
				job.Do = func(ctx context.Context) error {
					info.here.Store(true)
					return do(ctx)
				}
			}
			id, err := d.Submit(ctx, job)
			if err != nil {
				os.RemoveAll(dir)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				o := tr.SubmitFailed(b, err)
				if o.Halt {
					return &RefusedError{Refused: o.Refused, Err: err}
				}
				handle(o, nil)
				continue
			}
			tr.Submitted(b, id, time.Now())
			tr.Spent(id, time.Since(began))
			submitted[id] = info
			flight(info.cells)
		}
	}
	finish := func(ev batch.Event) {
		info, ok := submitted[ev.ID]
		if !ok {
			return
		}
		delete(submitted, ev.ID)
		flight(-info.cells)
		defer os.RemoveAll(info.dir)
		var jobErr error
		switch {
		case ev.State == batch.Failed:
			jobErr = ev.Err
		case ev.ExitCode != 0:
			jobErr = fmt.Errorf("exit status %d", ev.ExitCode)
		}
		// Even a failed job's finished cells are kept.
		began := time.Now()
		complete, err := src.absorb(info.block, info.dir)
		tr.Spent(ev.ID, time.Since(began))
		switch {
		case jobErr != nil:
		case err != nil:
			jobErr = err
		case !complete:
			jobErr = errors.New("the job exited 0 but did not return every cell of its block")
		}
		// The driver's times where it has them: Work Queue reports no
		// start but for the final event, and the job's time on its worker
		// should not include its wait in the queue.
		ended := cmp.Or(ev.Ended, time.Now())
		if !ev.Started.IsZero() {
			tr.Started(ev.ID, ev.Started)
			info.started = ev.Started
		}
		if jobErr == nil && !info.here.Load() && !info.started.IsZero() {
			ran += ended.Sub(info.started)
			ranJobs++
			ranCells += info.cells
			leastDispatch(&dispatch, ev)
		}
		if info.here.Load() {
			hereJobs++
		}
		if cfg.JobEnded != nil {
			cfg.JobEnded(JobEnd{
				Block: info.block, Name: src.name(info.block), Parents: src.parents(info.block), Here: info.here.Load(),
				Started: cmp.Or(info.started, ended), Ended: ended, Err: jobErr, Stderr: ev.Stderr,
			})
		}
		handle(tr.Ended(ev.ID, ended, jobErr), ev.Stderr)
	}

	tick := time.NewTicker(cfg.TickInterval)
	defer tick.Stop()
	for {
		if err := submit(); err != nil {
			return stats(), err
		}
		if tr.Idle() {
			break
		}
		select {
		case ev, ok := <-d.Events():
			if !ok {
				return stats(), errors.New("the batch driver closed while jobs were running")
			}
			switch {
			case ev.State == batch.Running:
				started := cmp.Or(ev.Started, time.Now())
				tr.Started(ev.ID, started)
				if info, ok := submitted[ev.ID]; ok {
					info.started = started
				}
			case ev.State.Final():
				finish(ev)
			}
		case now := <-tick.C:
			for _, sl := range tr.Tick(now) {
				info := submitted[sl.Job]
				delete(submitted, sl.Job)
				flight(-info.cells)
				why := fmt.Sprintf("block %s ran %v, past the fast-abort limit of %v (mean job %v): removed and submitted again",
					src.name(info.block), sl.Ran.Round(time.Millisecond), sl.Limit.Round(time.Millisecond), sl.Mean.Round(time.Millisecond))
				if sl.Final {
					why += ", for the last time"
				}
				fmt.Fprintln(cfg.Explain, why)
				// Not only with -v: a machine that got loaded makes
				// every job a straggler, and the user should see why
				// the run slows down.
				cfg.Logger.Warn("fast abort", "block", src.name(info.block), "ran", sl.Ran.Round(time.Millisecond),
					"limit", sl.Limit.Round(time.Millisecond), "mean", sl.Mean.Round(time.Millisecond), "abort", sl.Abort, "final", sl.Final)
				if err := d.Remove(ctx, sl.Job); err != nil && !errors.Is(err, batch.ErrUnknownJob) {
					cfg.Logger.Warn("remove straggler", "job", sl.Job, "err", err)
				}
				os.RemoveAll(info.dir)
			}
		case <-ctx.Done():
			return stats(), ctx.Err()
		}
	}
	st := stats()
	if len(failures) > 0 {
		return st, &FailedError{Blocks: failures, Total: total}
	}
	return st, nil
}
