// Package distcmd holds what the allpairs and wavefront commands share for
// their distributed mode (-T) and their placement: the batch-system and
// Work Queue flags, their checks, opening the driver (with this machine as
// one more worker for a hybrid run: OwnWorker on Work Queue), the report of
// failed blocks, the live status page of --http (StatusPage), the HTML
// report of --report (RunReport), and finding
// the cluster, saying a placement decision, recording the run against it
// and keeping what it measured (place.go; makeflow uses these too), Work
// Queue's start-up among it: when the workers joined the master
// (startup.go).
//
// It does not run anything itself; package distmaster does, and package
// model/place decides.
package distcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/model/cluster"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/status"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// maxShownBlocks is how many failed blocks are described in full.
const maxShownBlocks = 10

// Flags are the flags of a distributed run.
type Flags struct {
	BatchType string
	Port      int
	Project   string
	Password  string
	SSLCert   string
	SSLKey    string
	PortFile  string
	MaxJobs   int
	Retries   int
	FastAbort float64
	// Hybrid makes this machine's cores take jobs too, as one more worker.
	Hybrid bool
	// CellsHere says the command does this machine's share of a hybrid
	// run itself, cell by cell (wavefront: see
	// distmaster.Wavefront.HereCores), so that Open does not make this
	// machine one more slot of the driver, nor, on Work Queue, one more
	// worker of the master.
	CellsHere bool
	// HTTP is where to serve the run's live status page (--http; see
	// StartStatus), on this machine or distributed.
	HTTP string
	// Report is where to write the run's HTML report (--report; see
	// StartReport).
	Report string
	// Shapes are the candidate job shapes of --shapes, CORESxWALL,...
	Shapes string

	// Tool is the command's name (allpairs, wavefront): placement reads,
	// and a run saves, the job cost of the tool's own jobs
	// (cluster.SaveJobCost).
	Tool string

	// Cluster, JobCores and Predicted are set by placement: the
	// cluster's measured inputs, for the models that size the jobs, the
	// cores each job takes (Decision.JobCores) and the run's predicted
	// seconds.
	Cluster   *place.Cluster
	JobCores  int
	Predicted float64

	// portSet records that --port was given.
	portSet bool
	// shapes are Shapes, parsed by Check.
	shapes []shape.Shape

	// log receives the warnings of the run (see Open); master is the Work
	// Queue master Open started, if any, for the status page.
	log    *slog.Logger
	master *workqueue.Master
	// report hears of a distributed run's jobs (see StartReport);
	// decision is placement's, for it.
	report   *RunReport
	decision *place.Decision
}

// Add registers the flags on fs.
func (f *Flags) Add(fs *pflag.FlagSet) {
	fs.StringVarP(&f.BatchType, "batch-type", "T", "", "run as blocks on a batch system: `TYPE` is wq (Work Queue workers), local, slurm, sge or condor")
	fs.IntVarP(&f.Port, "port", "p", 9123, "-T wq: the port workers connect to (0: any free port; see -Z)")
	fs.StringVarP(&f.Project, "project-name", "N", "", "-T wq: advertise the master to the catalog under this `NAME` (workers find it with -M NAME)")
	fs.StringVar(&f.Password, "password", "", "-T wq: workers must prove they know the password in `FILE`")
	fs.StringVar(&f.SSLCert, "ssl-cert", "", "-T wq: workers connect over TLS; the master's certificate is in `FILE` (PEM; needs --ssl-key)")
	fs.StringVar(&f.SSLKey, "ssl-key", "", "-T wq: the private key of --ssl-cert, in `FILE` (PEM)")
	fs.StringVarP(&f.PortFile, "port-file", "Z", "", "-T wq: listen on any free port (unless -p, or the named cluster's, says which) and write it to `FILE`, as makeflow -Z does")
	fs.IntVarP(&f.MaxJobs, "max-jobs", "J", 0, "-T: at most `N` jobs submitted at once (default 1000; local: the cores)")
	fs.IntVar(&f.Retries, "retries", 2, "-T: submit a failing block again up to `N` times before giving it up")
	fs.Float64Var(&f.FastAbort, "fast-abort", 3, "-T: remove and resubmit a job running longer than `M` times the mean of finished ones (0: never)")
	fs.StringVar(&f.Shapes, "shapes", "", "-T: candidate job shapes CORESxWALL,... (e.g. 8x1h,32x20m): the jobs take the one predicted to finish first (slurm: sbatch --test-only; local: a model of the free cores; else the first), its cores and its wall time")
	fs.BoolVar(&f.Hybrid, "hybrid", false, "-T: this machine's cores take jobs too, from the start, as one more worker")
	fs.StringVar(&f.HTTP, "http", "", "serve a live status page at `ADDR` (:PORT on this machine only, HOST:PORT where it says), with /status as JSON and /metrics for Prometheus")
	fs.StringVar(&f.Report, "report", "", "write an HTML report of the run to `FILE` at its end: a timeline of the jobs or cells, the critical path, placement's prediction, the failures")
}

// distributedOnly lists the flags that mean nothing without -T; wqOnly
// those that mean nothing without -T wq.
var (
	distributedOnly = []string{"max-jobs", "retries", "fast-abort", "hybrid", "shapes"}
	wqOnly          = []string{"port", "project-name", "password", "ssl-cert", "ssl-key", "port-file"}
)

// Check reports flags that do not fit together, as usage errors. extra
// lists the command's own flags that need -T.
func (f *Flags) Check(fs *pflag.FlagSet, extra ...string) error {
	f.portSet = fs.Changed("port")
	if f.PortFile != "" && !f.portSet {
		f.Port = 0 // any free one, as makeflow -Z (and CCTools) takes it
	}
	if f.Report != "" {
		if _, err := os.Stat(filepath.Dir(f.Report)); err != nil {
			return cmdutil.Usagef("--report %s: %v", f.Report, err)
		}
	}
	if f.HTTP != "" {
		if _, err := status.ListenAddr(f.HTTP); err != nil {
			return cmdutil.Usagef("--http %v", err)
		}
	}
	if f.BatchType == "" {
		for _, name := range slices.Concat(distributedOnly, wqOnly, extra) {
			if fs.Changed(name) {
				return cmdutil.Usagef("--%s applies to distributed runs: give -T TYPE too", name)
			}
		}
		return nil
	}
	if !slices.Contains(batch.Kinds(), f.BatchType) {
		return cmdutil.Usagef("-T %s: unknown batch type (known: %s)", f.BatchType, strings.Join(batch.Kinds(), ", "))
	}
	if f.BatchType != "wq" {
		for _, name := range wqOnly {
			if fs.Changed(name) {
				return cmdutil.Usagef("--%s applies to -T wq only", name)
			}
		}
	}
	switch {
	case (f.SSLCert == "") != (f.SSLKey == ""):
		return cmdutil.Usagef("--ssl-cert and --ssl-key go together")
	case f.Port < 0 || f.Port > 65535:
		return cmdutil.Usagef("--port %d: not a port", f.Port)
	case f.MaxJobs < 0:
		return cmdutil.Usagef("--max-jobs must be at least 1")
	case f.Retries < 0:
		return cmdutil.Usagef("--retries must not be negative")
	case f.FastAbort != 0 && f.FastAbort < 1:
		return cmdutil.Usagef("--fast-abort %g: the multiplier must be at least 1 (or 0 for off)", f.FastAbort)
	}
	if f.Shapes != "" {
		var err error
		if f.shapes, err = shape.Parse(f.Shapes); err != nil {
			return cmdutil.Usagef("--shapes: %v", err)
		}
	}
	return nil
}

// HybridByCells reports whether the run is hybrid with this machine's
// share done cell by cell by the command (CellsHere).
func (f *Flags) HybridByCells() bool {
	return f.Hybrid && f.CellsHere
}

// Distributed reports whether -T was given.
func (f *Flags) Distributed() bool { return f.BatchType != "" }

// fastAbort is the fast-abort setting the flags ask for.
func (f *Flags) fastAbort() distmaster.FastAbort {
	if f.FastAbort == 0 {
		return distmaster.FastAbort{}
	}
	return distmaster.FastAbort{Multiplier: f.FastAbort}
}

// Open opens the batch driver for f.Tool's jobs of category, with the batch
// systems' spool directory in spool. For Work Queue it says on msgs where
// workers should connect, writes the port file, and reports on msgs a
// password file or key others can read and the connections the master
// refuses. The returned function closes the driver, after keeping the
// bandwidth its transfers measured (SaveBandwidth).
//
// Warnings go to msgs too, with or without -v: fast aborts, failed blocks
// retried, and Work Queue workers dropped or kept out and why. They are
// what explains a run that slows down or stalls.
func (f *Flags) Open(category, spool string, msgs io.Writer) (batch.Driver, func(), error) {
	tool := f.Tool
	f.log = slog.New(slog.NewTextHandler(msgs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := batch.Options{Spool: spool}
	if c := f.Cluster; c != nil && f.BatchType == "local" {
		// A local "cluster" (RIGHTSIZE_CLUSTER=local ...) is as wide and
		// as slow to start jobs as it says.
		if !c.Hosts.Assumed() {
			opts.Slots = c.Slots()
		}
		opts.DispatchDelay = time.Duration(c.Delay * float64(time.Second))
	}
	var wq workqueue.Config
	if f.BatchType == "wq" {
		wq = workqueue.Config{Addr: ":" + strconv.Itoa(f.Port), Project: f.Project, Logger: f.log}
		warn := func(msg string) { fmt.Fprintf(msgs, "%s: warning: %s\n", tool, msg) }
		if f.Password != "" {
			pw, err := wire.ReadPasswordFile(f.Password, warn)
			if err != nil {
				return nil, nil, cmdutil.Usagef("--password: %w", err)
			}
			wq.Password = pw // as the workers read it: the whole file
		}
		if f.SSLCert != "" {
			tc, err := wire.ServerTLS(f.SSLCert, f.SSLKey, warn)
			if err != nil {
				return nil, nil, cmdutil.Usagef("--ssl-cert: %w", err)
			}
			wq.TLS = tc
		}
		wq.Notices = workqueue.NoticeLogger(Prefixed(msgs, tool+": "))
	}
	var joins *joinClock
	if f.BatchType == "wq" {
		// The workers' joining is Work Queue's dispatch, paid once: the
		// run measures it for the next decision.
		joins = watchJoins(&wq, distmaster.OnThisMachine())
	}
	var own *OwnWorker
	if f.Hybrid && !f.HybridByCells() && f.BatchType == "wq" {
		own = NewOwnWorker(&wq, tool, msgs, f.log)
		joins.ignore(own.feature)
	}
	if joins != nil {
		joins.started(time.Now())
	}
	d, err := distmaster.OpenDriver(f.BatchType, opts, wq, category, f.fastAbort())
	if err != nil {
		return nil, nil, err
	}
	f.master = MasterOf(d)
	closer := func() {
		if joins != nil {
			// Best effort, as SaveJobCost.
			cluster.SaveStartup(cluster.Options{}, f.BatchType, joins.startup())
		}
		SaveBandwidth(f.BatchType, d)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Close(ctx)
	}
	if f.Hybrid && !f.HybridByCells() {
		// closer closes d, which becomes the Hybrid (closing both of its
		// drivers) when there is one.
		both, stopLocal, err := f.addThisMachine(d, wq, own, msgs, tool)
		if err != nil {
			closer()
			return nil, nil, err
		}
		d = both
		closeRemote := closer
		closer = func() {
			closeRemote()
			stopLocal()
		}
	}
	if l, ok := d.(batch.Listener); ok {
		port := l.Port()
		where := fmt.Sprintf("port %d", port)
		if f.Project != "" {
			where += fmt.Sprintf(" as project %q", f.Project)
		}
		fmt.Fprintf(msgs, "%s: listening for workers on %s (workqueue worker HOST %d)\n", tool, where, port)
		if f.PortFile != "" {
			if err := os.WriteFile(f.PortFile, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
				closer()
				return nil, nil, fmt.Errorf("port file: %w", err)
			}
		}
	}
	return d, closer, nil
}

// addThisMachine makes this machine's cores one more worker of driver d:
// for Work Queue, own, a worker in this process connected to the master
// (it takes tasks as soon as they are queued, and the master balances them
// with the others'); for batch systems, a batch.Hybrid that runs jobs here
// while cores are free — in this process, with the function already open
// (batch.Options.InProcess) — and moves jobs still waiting in the queue
// here as cores free up. The returned function stops what it started.
func (f *Flags) addThisMachine(d batch.Driver, wqcfg workqueue.Config, own *OwnWorker, msgs io.Writer, tool string) (batch.Driver, func(), error) {
	l, ok := d.(batch.Listener)
	if !ok || own == nil {
		cores := runtime.NumCPU()
		local, err := batch.New("local", batch.Options{Slots: cores, InProcess: true})
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(msgs, "%s: this machine's %d cores take jobs too, while %s's queue holds them\n", tool, cores, f.BatchType)
		return batch.NewHybrid(local, cores, d), func() {}, nil
	}
	// The blocks it takes are done in this process, with the function
	// the master has open, not by a process per block.
	var inProcess func(*wire.TaskSpec) func(context.Context, string) error
	if ip, ok := d.(interface {
		InProcess(*wire.TaskSpec) func(context.Context, string) error
	}); ok {
		inProcess = ip.InProcess
	}
	stop, err := own.Start(l.Port(), wqcfg, inProcess)
	if err != nil {
		return nil, nil, err
	}
	return d, stop, nil
}

// Config returns the distributed master's configuration for driver d.
func (f *Flags) Config(d batch.Driver, workDir string, explain io.Writer) distmaster.Config {
	return distmaster.Config{
		Driver:     d,
		Kind:       f.BatchType,
		WorkDir:    workDir,
		Retries:    retries(f.Retries),
		MaxJobs:    f.MaxJobs,
		FastAbort:  f.fastAbort(),
		Explain:    explain,
		Logger:     f.log,
		Cluster:    f.Cluster,
		JobCores:   f.JobCores,
		Shapes:     f.shapes,
		Chooser:    shape.For(f.BatchType, d, nil),
		LocalCores: f.localCores(),
		JobEnded:   f.reportJob(),
	}
}

// reportJob returns what hears of the block jobs for --report, or nil.
func (f *Flags) reportJob() func(distmaster.JobEnd) {
	if f.report == nil {
		return nil
	}
	return f.report.job
}

// localCores are the cores this machine adds to a hybrid run.
func (f *Flags) localCores() int {
	if !f.Hybrid {
		return 0
	}
	return runtime.NumCPU()
}

// retries passes the flag on as distmaster's setting: on the command line
// 0 means none, as it reads.
func retries(n int) lifecycle.Retries {
	if n == 0 {
		return lifecycle.NoRetry
	}
	return lifecycle.Retries(n)
}

// FastAborts returns how many stragglers the run aborted: the tracker's
// count on batch systems, Work Queue's own with wq.
func FastAborts(d batch.Driver, counts distmaster.TrackerCounts) int {
	if a, ok := d.(batch.StragglerAborter); ok && a.AbortsStragglers() {
		return a.FastAborts()
	}
	return counts.FastAborts
}

// Summary describes the jobs of a run in one line.
func Summary(d batch.Driver, counts distmaster.TrackerCounts, meanJob time.Duration, hereJobs int) string {
	s := fmt.Sprintf("%d jobs", counts.Jobs)
	if h, ok := d.(*batch.Hybrid); ok {
		c := h.Counts()
		s += fmt.Sprintf(", %d done here (%d of them taken from the queue), %d on the cluster", c.Local, c.Moved, c.Remote)
	} else if hereJobs > 0 {
		s += fmt.Sprintf(", %d done here by the master's own worker", hereJobs)
	}
	if meanJob > 0 {
		s += fmt.Sprintf(", mean %v as a process", meanJob.Round(time.Millisecond))
	}
	if counts.Retries > 0 {
		s += fmt.Sprintf(", %d retried after a failure", counts.Retries)
	}
	if n := FastAborts(d, counts); n > 0 {
		s += fmt.Sprintf(", %d stragglers aborted and resubmitted", n)
	}
	return s
}

// ReportFailures prints the blocks that were given up, with the end of
// their standard error, and returns the error that ends the command.
func ReportFailures(w io.Writer, tool string, fe *distmaster.FailedError, kept string) error {
	for i, be := range fe.Blocks {
		if i == maxShownBlocks {
			fmt.Fprintf(w, "%s: … and %s\n", tool, cmdutil.Plural(len(fe.Blocks)-maxShownBlocks, "more failed block"))
			break
		}
		fmt.Fprintf(w, "%s: %v\n", tool, be)
		if tail := be.StderrTail(); tail != "" {
			fmt.Fprintf(w, "%s:   its last job said:\n%s", tool, tail)
		}
	}
	them := "them"
	if len(fe.Blocks) == 1 {
		them = "it"
	}
	return fmt.Errorf("%d of %s failed; %s; run the same command again to retry %s", len(fe.Blocks), cmdutil.Plural(fe.Total, "block"), kept, them)
}

// Stopped returns the error that ends a run stopped early by err (not by
// failed blocks: see ReportFailures), saying what was kept and what to do.
func Stopped(err error, kept string) error {
	var refused *distmaster.RefusedError
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted: %s; run the same command again to resume: %w", kept, err)
	case errors.As(err, &refused):
		return fmt.Errorf("%w; %s; run the same command again once it takes jobs", err, kept)
	default:
		return fmt.Errorf("%w (%s)", err, kept)
	}
}

// Prefixed returns a writer that starts every line written to w with
// prefix.
func Prefixed(w io.Writer, prefix string) io.Writer {
	return &prefixWriter{w: w, prefix: prefix, start: true}
}

type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	start  bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var buf bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if p.start {
			buf.WriteString(p.prefix)
		}
		buf.Write(line)
		p.start = line[len(line)-1] == '\n'
	}
	if _, err := p.w.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// IsFailed reports whether err says blocks were given up, and returns it.
func IsFailed(err error) (*distmaster.FailedError, bool) {
	var fe *distmaster.FailedError
	ok := errors.As(err, &fe)
	return fe, ok
}
