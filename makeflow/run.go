package makeflow

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rightsize/rightsize/jx"
	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/model"
)

// Options configures Run. The zero value runs every rule on this machine,
// with one job per CPU, discarding the commands' output.
type Options struct {
	// Dir is the workflow's directory: commands run there and relative
	// file names are relative to it. Empty means the current directory.
	Dir string
	// LogPath is the transaction log; empty means Workflow.Path +
	// ".makeflowlog".
	LogPath string

	// Executor runs the rules that run on this machine; nil means a Local
	// executor that discards the commands' output.
	Executor Executor
	// Remote, if set, runs every rule but those marked LOCAL and nested
	// workflows: a Batch, on a batch system or Work Queue workers. At most
	// RemoteLimits.Jobs of them run at once; its resource fields, if set,
	// bound the sum of what they declare (zero: the batch system decides).
	Remote       Executor
	RemoteLimits Limits
	// Cost and Here, if set, are automatic placement's: each rule's
	// predicted seconds, which orders ready rules by the critical path in
	// time, and the rules kept on this machine although Remote is set,
	// too short to be worth a dispatch (see SchedulerConfig).
	Cost []float64
	Here []bool

	// Local bounds the jobs on this machine. Zero fields take this
	// machine's values: one job per CPU, its cores and memory, and the free
	// space of Dir's file system.
	Local Limits

	// Retries is how many more times a failing rule is tried
	// (lifecycle.Retries; default none, as in CCTools).
	Retries lifecycle.Retries

	// DryRun marks Executor as one that runs nothing (DryRun): no log is
	// written or changed, no output is checked or removed.
	DryRun bool

	// LogVerbose writes the workflow's structure into the log on its first
	// run (CCTools' --log-verbose): each rule's command, category, parents,
	// sources and targets, as comment lines recovery passes over.
	LogVerbose bool
	// SkipFileCheck skips comparing the files on disk with the log at
	// recovery; only the log then says what is done.
	SkipFileCheck bool

	// GC deletes intermediate files during the run (see GC); GCCount
	// (default 16) and GCSize are GCOnDemand's thresholds: more made files
	// on disk than GCCount, or less free space than GCSize bytes.
	GC      GC
	GCCount int
	GCSize  int64

	// ZeroLengthError makes an empty output a failure of its rule
	// (CCTools' -z).
	ZeroLengthError bool
	// WaitForFiles is how long a rule's outputs may take to appear after
	// its command ends, as on a shared filesystem that shows them late
	// (CCTools' --wait-for-files-upto); zero: they must be there at once.
	WaitForFiles time.Duration
	// DiscardFailedOutput deletes a failed rule's partial outputs instead
	// of keeping them in makeflow.failed.N (CCTools'
	// --do-not-save-failed-output).
	DiscardFailedOutput bool
	// SubmitTimeout is how long a job the batch system refuses (its
	// submit command fails) is tried again, after pauses of 1 s, 2 s, 4 s
	// and so on, before its rule fails (CCTools' -S); zero means
	// DefaultSubmitTimeout, negative not at all. A job that is itself
	// wrong (a missing input) fails at once.
	SubmitTimeout time.Duration
	// firstSubmitWait replaces the first pause, for tests.
	firstSubmitWait time.Duration

	// Storage, if set, holds the run to a disk budget by the order in
	// which rules start and by deleting intermediate files as soon as no
	// rule needs them (CCTools' --storage-type and --storage-limit); the
	// Report says the peak.
	Storage *Storage

	// Archive, if set, keeps the outputs of rules that succeed and reuses
	// them for a rule with the same command, inputs and outputs (CCTools'
	// --archive).
	Archive *Archive

	// MonitorDir, if set, receives what each attempt at a rule used (peak
	// memory, CPU and wall time, the size of its outputs) as CCTools'
	// resource summaries, resource-rule-N.summary, relative to Dir; the
	// Report keeps it in Usage (CCTools' --monitor).
	MonitorDir string

	// MakeflowCommand is the program that runs nested workflows
	// ("MAKEFLOW sub.mf" rules); empty means "makeflow" from PATH.
	MakeflowCommand string

	// Out receives what a run has to say: the commands as they start,
	// recovery notes, retries and failures. Nil discards it.
	Out io.Writer
	// Logger receives debug records; nil discards them.
	Logger *slog.Logger
	// Progress, if set, is called with the rule counts whenever they
	// change, at most once per batch of events.
	Progress func(Counts)
	// Failed, if set, is called with each rule that fails for good, as it
	// does (the Report lists them all at the end).
	//
	// Progress and Failed are called one call at a time, but not always
	// on the same goroutine: a local rule's exit is handled on the
	// goroutine that reaped it (see Local), which waits for every other
	// local rule too, so they must not block.
	Failed func(Failure)
	// Ended, if set, is called as each attempt at a rule ends, however it
	// ended, with whether it ran on Remote (for a report of the run).
	Ended func(r *Rule, res *Result, remote bool)
}

// A Report is what a run did.
type Report struct {
	Counts  Counts // final state of every rule
	Skipped int    // rules already done before this run
	Ran     int    // rules completed by this run
	// Took is how long each rule this run completed ran, by rule ID:
	// from its start where it ran to its end (a batch system's queue, which
	// the log's Running line includes, is not the rule's time).
	Took map[int]time.Duration
	// Usage is what each rule's last attempt used, by rule ID, with
	// Options.MonitorDir.
	Usage map[int]Usage
	// StoragePeak is the most bytes the run's made files held at once,
	// with Options.Storage.
	StoragePeak int64
	Failures    []Failure // rules that failed with no retries left
	// Blocked are the rules that did not run because a rule they need
	// failed, or because the run was interrupted.
	Blocked []*Rule
	Elapsed time.Duration
}

// A Failure is a rule that failed for good.
type Failure struct {
	Rule     *Rule
	Result   *Result // its last attempt
	Attempts int
	// SavedIn is the directory its partial outputs were moved to
	// (makeflow.failed.<id>), or "" if it left none.
	SavedIn string
}

// A FailedError reports a run that went on to the end with failed rules.
// Everything that could run did run, and is recorded in the log. It has
// the name and the meaning of allpairs.FailedError, wavefront.FailedError
// and distmaster.FailedError.
type FailedError struct {
	Report *Report
}

func (e *FailedError) Error() string {
	const maxListed = 10
	rep := e.Report
	var b strings.Builder
	fmt.Fprintf(&b, "workflow failed: %d of %d rules failed", len(rep.Failures), rep.Counts.Total)
	if n := len(rep.Blocked); n > 0 {
		its := "its"
		if len(rep.Failures) > 1 {
			its = "their"
		}
		noun := "rules that need"
		if n == 1 {
			noun = "rule that needs"
		}
		fmt.Fprintf(&b, "; %d %s %s outputs did not run", n, noun, its)
	}
	for i, f := range rep.Failures {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  ... and %d more", len(rep.Failures)-maxListed)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(describeFailure(f))
	}
	return b.String()
}

// describeFailure says which rule failed, how, and the end of its stderr.
func describeFailure(f Failure) string {
	r := f.Rule
	var b strings.Builder
	fmt.Fprintf(&b, "rule %d (%s) failed: %s", r.ID, r.Pos, f.Result.Status())
	if f.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", f.Attempts)
	}
	cmd := r.Command
	if r.Nested != nil {
		cmd = "MAKEFLOW " + r.Nested.File
	}
	fmt.Fprintf(&b, "\n    command: %s", cmd)
	if tail := lastLines(f.Result.Stderr, 5); tail != "" {
		b.WriteString("\n    stderr: ")
		b.WriteString(strings.ReplaceAll(tail, "\n", "\n            "))
	}
	if f.SavedIn != "" {
		fmt.Fprintf(&b, "\n    partial outputs moved to %s", f.SavedIn)
	}
	return b.String()
}

// lastLines returns at most n last lines of b, without the final newline.
func lastLines(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	if len(b) == 0 {
		return ""
	}
	i := len(b)
	for ; n > 0 && i > 0; n-- {
		i = bytes.LastIndexByte(b[:i], '\n')
		if i < 0 {
			i = 0
			break
		}
	}
	return strings.TrimLeft(string(b[i:]), "\n")
}

// Run runs a workflow to the end: every rule that is not already done
// according to the log and that can run, runs. It returns a *FailedError if
// rules failed (the rest still ran), an ErrorList if the workflow has
// structural problems (nothing ran then), and an error wrapping ctx.Err()
// if ctx was cancelled (running jobs are cancelled; what finished is kept).
func Run(ctx context.Context, w *Workflow, opts Options) (*Report, error) {
	d := &driver{w: w, opts: opts, dir: opts.Dir, start: time.Now()}
	if d.dir == "" {
		d.dir = "."
	}
	d.logger = opts.Logger
	if d.logger == nil {
		d.logger = slog.New(slog.DiscardHandler)
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	d.out = bufio.NewWriter(out)
	defer d.out.Flush()

	d.g = newGraph(w)
	exists := func(name string) bool {
		_, err := os.Stat(inDir(d.dir, name))
		return err == nil
	}
	if opts.SkipFileCheck {
		exists = nil
	}
	errs := d.g.check(exists)
	if p, ok := opts.Remote.(planner); ok {
		errs = append(errs, p.plan(w)...)
		sortErrors(errs)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if err := d.setup(); err != nil {
		return nil, err
	}
	defer d.closeExecutors()
	return d.run(ctx)
}

// A planner is a remote executor that checks the workflow before anything
// runs and plans for it (Batch decides which inputs to cache).
type planner interface {
	plan(w *Workflow) ErrorList
}

type driver struct {
	w      *Workflow
	g      *graph
	opts   Options
	dir    string
	start  time.Time
	logger *slog.Logger
	out    *bufio.Writer

	sched      *Scheduler
	log        *logWriter // nil in a dry run
	local      Executor
	remote     Executor
	closeLocal bool

	jobs       []*Job  // the running job of each rule
	jobIDs     []int64 // its executor's id for it, for the log
	onRemote   []bool  // whether that job went to the remote executor
	running    int
	pending    []Start // decided but not yet submitted
	spare      []Start // the other buffer for pending
	report     Report
	keep       *guard               // see guard()
	retries    map[int]*submitRetry // refused jobs waiting to be submitted again
	resubmit   chan int             // rules whose pause after a refusal is over
	archiveIDs map[int]string       // task IDs in Options.Archive, by rule
	gc         *collector           // nil without Options.GC
	aborting   bool
	err        error // what stopped the run early, if anything

	// mu guards the driver's state, shared by its loop and takeExit.
	mu   sync.Mutex
	wake chan struct{} // takeExit's word to the loop that nothing runs
}

// setup reads the log, decides what is done, and makes the scheduler and
// executors.
func (d *driver) setup() error {
	o := d.opts
	logPath := o.LogPath
	if logPath == "" {
		logPath = d.w.Path + ".makeflowlog"
	}
	if !o.DryRun {
		// Lock the log before reading it: another run may be writing it.
		var err error
		if d.log, err = openLog(logPath); err != nil {
			return err
		}
	}
	rec, err := readLog(logPath, len(d.w.Rules))
	if err != nil {
		d.closeLog()
		return err
	}
	if o.LogVerbose && d.log != nil && rec.runs == 0 && len(rec.made) == 0 {
		d.log.structure(d.w)
	}
	rc := planRecovery(d.g, rec, d.dir, !o.SkipFileCheck)
	done := 0
	for _, ok := range rc.done {
		if ok {
			done++
		}
	}
	if rec.runs > 0 || len(rec.made) > 0 {
		fmt.Fprintf(d.out, "recovering from %s: %d of %d rules already done\n", logPath, done, len(d.w.Rules))
	}
	const maxWhy = 10
	for i, why := range rc.why {
		if i == maxWhy {
			fmt.Fprintf(d.out, "... and %d more rules are out of date\n", len(rc.why)-maxWhy)
			break
		}
		fmt.Fprintln(d.out, why)
	}
	d.report.Skipped = done

	local := o.Local
	if local.Jobs <= 0 {
		local.Jobs = runtime.NumCPU()
	}
	// What the probe cannot read stays 0: unbounded.
	machine, _ := model.Probe(d.dir)
	if local.Cores <= 0 {
		local.Cores = int64(machine.Cores)
	}
	if local.MemoryMB <= 0 {
		local.MemoryMB = machine.MemoryMB
	}
	if local.DiskMB <= 0 {
		local.DiskMB = machine.DiskMB
	}
	cfg := SchedulerConfig{Local: local, Retries: o.Retries, Done: rc.done, Cost: o.Cost, Here: o.Here, Storage: o.Storage}
	if o.Remote != nil {
		rl := o.RemoteLimits
		cfg.Remote = &rl
	}
	d.sched, err = newScheduler(d.g, cfg)
	if err != nil {
		d.closeLog()
		return err
	}
	d.warnOversized(local)
	if o.GC != GCNone && !o.DryRun {
		d.gc = newCollector(d, rc.done)
	}
	d.logger.Debug("limits", "jobs", local.Jobs, "cores", local.Cores, "memory_mb", local.MemoryMB, "disk_mb", local.DiskMB)

	d.local, d.remote = o.Executor, o.Remote
	if d.local == nil {
		l, err := NewLocal(LocalOptions{})
		if err != nil {
			d.closeLog()
			return err
		}
		d.local, d.closeLocal = l, true
	}
	d.jobs = make([]*Job, len(d.w.Rules))
	d.onRemote = make([]bool, len(d.w.Rules))
	d.jobIDs = make([]int64, len(d.w.Rules))
	d.retries = map[int]*submitRetry{}
	d.archiveIDs = map[int]string{}
	d.resubmit = make(chan int, len(d.w.Rules))
	if o.DryRun {
		return nil
	}
	if h, ok := d.local.(lockHolder); ok {
		if d.log.release, err = h.holdLock(d.log.f); err != nil {
			d.closeLog()
			return err
		}
	}
	d.log.event("STARTED")
	if err := d.clearStale(rc, rec); err != nil {
		d.closeLog()
		return err
	}
	if err := d.log.sync(); err != nil {
		d.closeLog()
		return fmt.Errorf("write log: %w", err)
	}
	return nil
}

// clearStale makes way for the rules that will run: nothing an earlier
// instance of a rule left may stay where the rule writes, or a command that
// appends to its output would double it, and a failing one would leave an
// old file that looks made. Outputs the log says this workflow made or was
// making are deleted, as CCTools does, and the log records the reset. Any
// other file in the way (the log was lost or cut short, or the file was
// there before the workflow ran) is moved aside into makeflow.stale.<rule>:
// nothing says it is not the only copy of something.
func (d *driver) clearStale(rc *recovery, rec *logRecord) error {
	reset := make([]bool, len(d.w.Rules))
	for _, id := range rc.reset {
		reset[id] = true
	}
	for id, r := range d.w.Rules {
		if rc.done[id] {
			continue
		}
		var aside []string
		for _, f := range r.Targets {
			p := inDir(d.dir, f.Name)
			if _, err := os.Lstat(p); err != nil {
				continue
			}
			if what := d.guard().holds(p); what != "" {
				return fmt.Errorf("rule %d (%s) must run, but its output %s holds %s, which makeflow will not remove: move it out of the way and run again",
					id, r.Pos, quoteName(f.Name), what)
			}
			_, made := rec.made[f.Name]
			if !reset[id] && !made && !rec.expected[f.Name] {
				aside = append(aside, f.Name)
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("rule %d (%s) must run, but its old output cannot be removed: %w", id, r.Pos, err)
			}
			fmt.Fprintf(d.out, "deleted %s\n", f.Name)
		}
		if len(aside) > 0 {
			quoted := make([]string, len(aside))
			for i, name := range aside {
				quoted[i] = quoteName(name)
			}
			to := freeStaleDir(d.dir, id)
			if _, err := d.moveInto(to, aside); err != nil {
				return fmt.Errorf("rule %d (%s) must run, but a file in its way cannot be moved aside: %w; remove it and run again", id, r.Pos, err)
			}
			them := "them"
			if len(aside) == 1 {
				them = "it"
			}
			fmt.Fprintf(d.out, "moved %s to %s/: rule %d (%s) must run, and the log does not say that this workflow made %s\n",
				strings.Join(quoted, " "), to, id, r.Pos, them)
		}
		if reset[id] && rec.state[id] != Waiting {
			d.log.node(id, Waiting, 0, d.sched.Counts())
		}
	}
	return nil
}

// guard returns what removing outputs must not destroy, made on first use.
func (d *driver) guard() *guard {
	if d.keep == nil {
		d.keep = newGuard(d.w, d.dir)
	}
	return d.keep
}

// warnOversized notes rules that ask for more than this machine has: they
// will run alone.
func (d *driver) warnOversized(l Limits) {
	for _, r := range d.w.Rules {
		if d.opts.Remote != nil && !r.onThisMachine() {
			continue
		}
		res := r.Resources
		if (l.Cores > 0 && res.Cores > l.Cores) || (l.MemoryMB > 0 && res.MemoryMB > l.MemoryMB) || (l.DiskMB > 0 && res.DiskMB > l.DiskMB) {
			fmt.Fprintf(d.out, "warning: rule %d (%s) asks for %s, more than this machine offers; it will run alone\n",
				r.ID, r.Pos, res)
		}
	}
}

// closeLog gives up the log when setup fails.
func (d *driver) closeLog() {
	if d.log != nil {
		d.log.unhold()
		d.log.f.Close()
		d.log = nil
	}
}

func (d *driver) closeExecutors() {
	if d.closeLocal {
		d.local.Close()
	}
}

func (d *driver) run(ctx context.Context) (*Report, error) {
	if d.sched.Counts().Complete == len(d.w.Rules) {
		fmt.Fprintln(d.out, "nothing left to do.")
	}
	d.queue(d.sched.Next())
	var remoteResults <-chan *Result
	if d.remote != nil {
		remoteResults = d.remote.Results()
	}
	localResults := d.local.Results()
	// The local commands' exits are handled, when this loop is idle, by
	// the goroutine that reaps them (see takeExit): it holds d.mu, which
	// this loop holds except while it waits.
	d.wake = make(chan struct{}, 1)
	if l, ok := d.local.(*Local); ok {
		l.setTake(d.takeExit)
		defer l.setTake(nil)
	}
	ctxDone := ctx.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.progress()
	for {
		d.launch()
		if d.sched.Finished() && d.running == 0 {
			break
		}
		d.mu.Unlock()
		var res *Result
		resubmit, tock := -1, false
		select {
		case res = <-localResults:
		case res = <-remoteResults:
		case resubmit = <-d.resubmit:
		case <-ctxDone:
		case <-tick.C:
			tock = true
		case <-d.wake:
		}
		d.mu.Lock()
		switch {
		case res != nil:
			d.finish(res)
		case resubmit >= 0:
			d.resubmitted(resubmit)
		case ctxDone != nil && ctx.Err() != nil:
			ctxDone = nil
			d.abort(ctx.Err())
		case tock:
			if d.log != nil {
				d.log.flush()
				d.log.maybeSync()
			}
		}
		// Take every result that is already in before acting, so that one
		// flush covers them all.
	drain:
		for d.running > 0 {
			select {
			case res := <-localResults:
				d.finish(res)
			case res := <-remoteResults:
				d.finish(res)
			default:
				break drain
			}
		}
		d.checkLog()
		d.progress()
	}
	return d.end(ctx)
}

// takeExit handles a local command's exit on the goroutine that reaped it,
// without a hand-off to the driver's loop, if that loop is waiting (it
// reports whether it did): the next rule starts there and then, as make
// starts one from its SIGCHLD loop. The loop is woken only when the run
// may be over.
func (d *driver) takeExit(res *Result) bool {
	if !d.mu.TryLock() {
		return false
	}
	defer d.mu.Unlock()
	d.finish(res)
	d.checkLog()
	d.launch()
	d.progress()
	if d.running == 0 {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// checkLog stops the run if the log can no longer be written.
func (d *driver) checkLog() {
	if d.log != nil && d.log.err != nil && !d.aborting {
		d.abort(fmt.Errorf("write log: %w", d.log.err))
	}
}

func (d *driver) queue(starts []Start) { d.pending = append(d.pending, starts...) }

// launch submits the jobs the scheduler decided on. Before any of them
// starts, the log records that their outputs are expected, and everything
// logged before (the completions they depend on) is handed to the kernel:
// a run killed at any moment leaves a log that says which rules may have
// left partial outputs, and never one that shows a rule started before the
// rules it needs were complete. The lines saying the jobs started go out
// with the next flush (the expected outputs already tell recovery what it
// needs), which saves a write per job.
func (d *driver) launch() {
	launched := false
	for len(d.pending) > 0 && !d.aborting {
		batch := d.pending
		d.pending = d.spare[:0]
		for _, st := range batch {
			r := d.w.Rules[st.Rule]
			if !d.opts.DryRun {
				fmt.Fprintln(d.out, d.command(r))
			}
			if d.log != nil {
				for _, f := range r.Targets {
					size, ok := d.w.Sizes[f.Name]
					if !ok {
						size = defaultExpectSize
					}
					d.log.file(f.Name, fileExpect, size)
				}
			}
		}
		d.flush()
		for _, st := range batch {
			d.submit(st) // a job that cannot start may queue a retry in d.pending
		}
		d.spare = batch
		launched = true
	}
	// Rules chosen to start when the run was stopped never start.
	for _, st := range d.pending {
		d.sched.Abort(st.Rule)
	}
	d.pending = d.pending[:0]
	if launched {
		d.out.Flush()
	} else {
		d.flush() // completions with nothing new to start
	}
}

func (d *driver) flush() {
	if d.log != nil {
		d.log.flush()
	}
	d.out.Flush()
}

func (d *driver) submit(st Start) {
	r := d.w.Rules[st.Rule]
	job := &Job{Rule: r, Attempt: st.Attempt, Command: d.command(r), Dir: d.dir}
	if d.fromArchive(job) {
		return
	}
	exec := d.local
	if st.Remote {
		exec = d.remote
	}
	jobID, err := exec.Submit(job)
	if err != nil {
		d.logger.Debug("submit failed", "rule", r.ID, "err", err)
		if st.Remote && d.retrySubmit(st, job, err) {
			return
		}
		delete(d.retries, r.ID)
		now := time.Now()
		d.running++
		d.finish(&Result{Job: job, ExitCode: -1, Err: fmt.Errorf("could not start: %w", err), Started: now, Ended: now})
		return
	}
	delete(d.retries, r.ID)
	d.jobs[r.ID] = job
	d.jobIDs[r.ID] = jobID
	d.onRemote[r.ID] = st.Remote
	d.running++
	if d.log != nil {
		d.log.node(r.ID, Running, jobID, d.sched.Counts())
	}
	d.logger.Debug("started", "rule", r.ID, "attempt", st.Attempt, "job", jobID, "remote", st.Remote)
}

// command is what runs for a rule: its own command, or for a nested
// workflow this program run on the nested file.
func (d *driver) command(r *Rule) string {
	if r.Nested == nil {
		return r.Command
	}
	exe := d.opts.MakeflowCommand
	if exe == "" {
		exe = "makeflow"
	}
	args := []string{shellQuote(exe), "-T", "local"}
	if c := r.Resources.Cores; c > 0 {
		args = append(args, "-j", strconv.FormatInt(c, 10))
	}
	switch {
	case r.Nested.JX:
		args = append(args, "--jx")
		// The args as variables (checked when the workflow was read).
		if vars, err := r.Nested.jxArgs(); err == nil {
			for _, p := range vars.Pairs {
				args = append(args, "--jx-define", shellQuote(p.Key+"="+jx.Format(p.Value)))
			}
		}
	case r.Nested.JSON:
		args = append(args, "--json")
	}
	file := r.Nested.File
	if r.Nested.Dir != "" {
		args = append(args, "-X", shellQuote(r.Nested.Dir))
		if !filepath.IsAbs(file) {
			if abs, err := filepath.Abs(inDir(d.dir, file)); err == nil {
				file = abs
			}
		}
	}
	if r.nestedLog() != "" {
		args = append(args, "-l", shellQuote(fmt.Sprintf("%s.%d.makeflowlog", file, r.ID)))
	}
	return strings.Join(append(args, shellQuote(file)), " ")
}

// finish records how a job ended and what the scheduler makes of it.
func (d *driver) finish(res *Result) {
	r := res.Job.Rule
	id := r.ID
	d.running--
	d.jobs[id] = nil
	ok := res.OK()
	var sizes []int64
	if ok && !d.opts.DryRun {
		sizes, res.Err = d.verify(r)
		ok = res.Err == nil
	}
	d.logger.Debug("finished", "rule", id, "status", res.Status(), "ok", ok, "seconds", res.Ended.Sub(res.Started).Seconds())
	if d.opts.Ended != nil {
		d.opts.Ended(r, res, d.onRemote[id])
	}
	if !res.Canceled && !res.archived {
		d.monitor(res)
	}
	switch {
	case ok:
		for i, f := range r.Targets {
			if d.log != nil {
				d.log.file(f.Name, fileExists, sizes[i])
			}
			if sizes != nil {
				d.sched.FileSize(f.Name, sizes[i])
			}
		}
		d.toArchive(res)
		d.queue(d.sched.Ended(id, true))
		d.collectForStorage()
		d.report.Ran++
		if d.report.Took == nil {
			d.report.Took = map[int]time.Duration{}
		}
		d.report.Took[id] = res.Ended.Sub(res.Started)
		d.lognode(id, Complete)
		if d.gc != nil {
			d.gc.completed(r)
		}
	case res.Canceled && d.aborting:
		d.sched.Abort(id)
		d.removeOutputs(r)
		d.lognode(id, Aborted)
	default:
		d.queue(d.sched.Ended(id, false))
		d.lognode(id, Failed)
		// With retries left the rule is waiting again, or already chosen
		// to start again (it is in d.pending, submitted after this).
		if d.sched.State(id) != Failed {
			d.lognode(id, Waiting)
			d.removeOutputs(r)
			fmt.Fprintf(d.out, "rule %d (%s) failed: %s; trying again (attempt %d of %d)\n",
				id, r.Pos, res.Status(), res.Job.Attempt+1, d.opts.Retries.Limit(0)+1)
			return
		}
		f := Failure{Rule: r, Result: res, Attempts: d.sched.Attempts(id)}
		switch {
		case d.opts.DryRun:
		case d.opts.DiscardFailedOutput:
			d.removeOutputs(r)
		default:
			f.SavedIn = d.saveFailed(r)
		}
		d.report.Failures = append(d.report.Failures, f)
		if d.opts.Failed != nil {
			d.opts.Failed(f)
		}
		fmt.Fprintf(d.out, "rule %d (%s) failed: %s\n", id, r.Pos, res.Status())
	}
}

func (d *driver) lognode(id int, st RuleState) {
	if d.log != nil {
		d.log.node(id, st, d.jobIDs[id], d.sched.Counts())
	}
}

// verify checks that a rule made every target, and returns their sizes.
func (d *driver) verify(r *Rule) ([]int64, error) {
	sizes := make([]int64, len(r.Targets))
	deadline := time.Now().Add(d.opts.WaitForFiles)
	for i, f := range r.Targets {
		info, err := os.Stat(inDir(d.dir, f.Name))
		for err != nil && time.Now().Before(deadline) {
			time.Sleep(min(100*time.Millisecond, time.Until(deadline)))
			info, err = os.Stat(inDir(d.dir, f.Name))
		}
		if err != nil {
			return nil, fmt.Errorf("the command succeeded but did not create %s", quoteName(f.Name))
		}
		if d.opts.ZeroLengthError && info.Mode().IsRegular() && info.Size() == 0 {
			return nil, fmt.Errorf("the command succeeded but left %s empty (-z)", quoteName(f.Name))
		}
		sizes[i] = info.Size()
	}
	return sizes, nil
}

// remove deletes a file or directory the workflow made and reports
// whether there was one. It leaves alone one that holds an input or the
// workflow, with a warning.
func (d *driver) remove(name string) bool {
	p := inDir(d.dir, name)
	if _, err := os.Lstat(p); err != nil {
		return false
	}
	if what := d.guard().holds(p); what != "" {
		fmt.Fprintf(d.out, "warning: not removing %s: it holds %s\n", name, what)
		return false
	}
	if err := os.RemoveAll(p); err != nil {
		fmt.Fprintf(d.out, "warning: could not remove %s: %v\n", name, err)
		return false
	}
	return true
}

func (d *driver) removeOutputs(r *Rule) {
	if d.opts.DryRun {
		return
	}
	for _, f := range r.Targets {
		d.remove(f.Name)
	}
}

// failedDir is where a failed rule's partial outputs are kept.
func failedDir(id int) string { return "makeflow.failed." + strconv.Itoa(id) }

// staleDir is the n-th directory (from 0) where files in the way of rule
// id were moved: makeflow.stale.<id>, then makeflow.stale.<id>.<n>.
func staleDir(id, n int) string {
	name := "makeflow.stale." + strconv.Itoa(id)
	if n > 0 {
		name += "." + strconv.Itoa(n)
	}
	return name
}

// staleDirs returns the stale directories of rule id that exist in dir.
func staleDirs(dir string, id int) []string {
	var names []string
	for n := 0; ; n++ {
		name := staleDir(id, n)
		if _, err := os.Lstat(inDir(dir, name)); err != nil {
			return names
		}
		names = append(names, name)
	}
}

// freeStaleDir returns the first stale directory name of rule id that is
// not taken: an earlier one is never replaced.
func freeStaleDir(dir string, id int) string {
	return staleDir(id, len(staleDirs(dir, id)))
}

// saveFailed moves what a failed rule left into makeflow.failed.<id>, so
// that it is neither lost for debugging nor taken for a result.
func (d *driver) saveFailed(r *Rule) string {
	name := failedDir(r.ID)
	os.RemoveAll(inDir(d.dir, name))
	var left []string
	for _, f := range r.Targets {
		if _, err := os.Lstat(inDir(d.dir, f.Name)); err == nil && d.guard().holds(inDir(d.dir, f.Name)) == "" {
			left = append(left, f.Name)
		}
	}
	if moved, _ := d.moveInto(name, left); moved == 0 {
		os.RemoveAll(inDir(d.dir, name))
		return ""
	}
	return name
}

// moveInto moves the workflow files names into the directory dirName
// (relative to the workflow's), keeping their relative paths (an absolute
// or upward one keeps only its base name), and returns how many it moved
// and the first error. It never replaces a file.
func (d *driver) moveInto(dirName string, names []string) (moved int, err error) {
	dst := inDir(d.dir, dirName)
	for _, name := range names {
		rel := name
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			rel = filepath.Base(rel)
		}
		to := filepath.Join(dst, rel)
		var merr error
		if _, serr := os.Lstat(to); serr == nil {
			merr = fmt.Errorf("move %s to %s: %w", name, to, fs.ErrExist)
		} else if merr = os.MkdirAll(filepath.Dir(to), 0o777); merr == nil {
			merr = os.Rename(inDir(d.dir, name), to)
		}
		if merr == nil {
			moved++
		} else if err == nil {
			err = merr
		}
	}
	return moved, err
}

// abort stops starting rules and cancels the running ones.
func (d *driver) abort(cause error) {
	if d.aborting {
		return
	}
	d.aborting = true
	if d.err == nil {
		d.err = cause
	}
	d.sched.Halt()
	d.stopRetries()
	for id, job := range d.jobs {
		switch {
		case job == nil:
		case d.onRemote[id]:
			d.remote.Cancel(job)
		default:
			d.local.Cancel(job)
		}
	}
}

func (d *driver) progress() {
	if d.opts.Progress != nil {
		d.opts.Progress(d.sched.Counts())
	}
}

// end writes the log's last line and builds the report.
func (d *driver) end(ctx context.Context) (*Report, error) {
	rep := &d.report
	rep.Counts = d.sched.Counts()
	rep.Elapsed = time.Since(d.start)
	for _, id := range d.sched.Blocked() {
		rep.Blocked = append(rep.Blocked, d.w.Rules[id])
	}
	rep.StoragePeak = d.sched.StoragePeak()
	if id, stuck := d.sched.StorageStuck(); stuck && d.err == nil {
		r := d.w.Rules[id]
		d.err = fmt.Errorf("storage limit of %d bytes (--storage-type %s) reached with nothing running: rule %d (%s) needs %d bytes more, and %d are held; "+
			"give a larger limit, or --storage-type 1 (at least the minimum footprint, see --storage-print)",
			d.opts.Storage.Limit, d.opts.Storage.Type, id, r.Pos, d.sched.storage.need(r), d.sched.storage.used)
	}
	var err error
	switch {
	case d.err != nil && ctx.Err() != nil:
		err = fmt.Errorf("interrupted with %d of %d rules done (they are kept; run again to finish): %w",
			rep.Counts.Complete, rep.Counts.Total, d.err)
		d.logEvent("ABORTED")
	case d.err != nil:
		err = d.err
		d.logEvent("ABORTED")
	case len(rep.Failures) > 0 || len(rep.Blocked) > 0:
		err = &FailedError{Report: rep}
		d.logEvent("FAILED")
	default:
		// The last pass, for a workflow that ends: every intermediate
		// file left goes.
		if d.gc != nil {
			d.gc.collect()
		}
		d.logEvent("COMPLETED")
	}
	if d.log != nil {
		if cerr := d.log.close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return rep, err
}

// collectForStorage deletes the files the storage limit freed, and logs
// them as garbage collection does.
func (d *driver) collectForStorage() {
	freed := d.sched.StorageFreed()
	if len(freed) == 0 || d.opts.DryRun {
		return
	}
	for _, name := range freed {
		if d.remove(name) && d.log != nil {
			d.log.file(name, fileDeleted, 0)
		}
	}
	d.logger.Debug("storage limit collected", "files", len(freed))
}

func (d *driver) logEvent(what string) {
	if d.log != nil {
		d.log.event(what)
	}
}
