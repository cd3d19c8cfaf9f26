// Package makeflowcmd is the makeflow command: it parses a Makeflow and
// checks, draws, cleans or runs it with the makeflow package, on this
// machine or on the cluster that placement chooses (place.go: the rules'
// times from their earlier runs, the makespan models of package model,
// the decision of package model/place), serves its live status page with
// --http (statuspage.go, package status) and writes its HTML report with
// --report (report.go, package report). It reads the JX form too (jx.go,
// package jx), holds CCTools' run flags (runflags.go, container.go), and
// is also makeflow_analyze, which checks and describes a workflow without
// running it (analyze.go).
//
// It holds only flag handling and what the command prints; everything a
// program embedding Makeflow would need is in package makeflow.
package makeflowcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/wq"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/distcmd"
	"github.com/rightsize/rightsize/internal/progress"
	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/makeflow"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/status"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// Main runs the makeflow command with args and returns its exit code.
func Main(ctx context.Context, args []string, s cmdutil.Streams) int {
	cmd := Command(s)
	args, err := expandArgv(cmd.Flags(), args)
	if err != nil {
		fmt.Fprintf(s.Err, "makeflow: %v\n", err)
		return cmdutil.ExitUsage
	}
	return cmdutil.Execute(ctx, cmd, archiveDirArg(cmd.Flags(), args), s)
}

// Command returns the makeflow command, for Main and for its manual page.
func Command(s cmdutil.Streams) *cobra.Command { return newCommand(s) }

type options struct {
	batchType     string
	maxLocal      int
	maxRemote     int
	clean         string
	logPath       string
	retry         bool
	retries       int
	check         bool
	dot           bool
	debug         string
	changeDir     string
	localCores    int64
	localMemory   int64
	localDisk     int64
	skipFileCheck bool
	gc            string
	gcCount       int
	gcSize        string
	zeroLength    bool
	waitForFiles  time.Duration
	discardFailed bool
	summaryLog    string
	debugFile     string
	version       bool
	sendEnv       bool
	logVerbose    bool
	sandbox       bool
	advertise     bool
	wrappers      []string
	wrapperIn     []string
	wrapperOut    []string
	json          bool
	run           runFlags       // flags of runflags.go's kind: -L, -P, -S, --monitor, --archive, storage
	container     containerFlags // --docker, --singularity
	jx            jxOptions
	local         bool
	explain       bool
	autoLocal     bool
	hybrid        bool // --hybrid, or placement chose hybrid
	httpAddr      string
	quiet         bool
	verbose       bool
	reportPath    string
	wqMaster      *workqueue.Master // the master of -T wq, for the status page
	// localCluster is the local "cluster" placement sent rules to (not
	// a flag).
	localCluster *place.Cluster
	// hold is when a hybrid run sends a rule to the cluster rather than
	// keep it for this machine's next free core: placement's measure of
	// the cluster (not a flag).
	hold batch.HybridHold
	// hybridDriver is the driver of a hybrid run on a batch system, for
	// where its rules ran.
	hybridDriver *batch.Hybrid

	// Remote runs.
	port         int
	portFile     string
	project      string
	passwordFile string
	sslCert      string
	sslKey       string
	catalogs     string
	fastAbort    float64
	sharedFS     []string
	batchOptions string
}

// A batchType is a value of -T: where the rules run.
type batchType struct {
	name   string
	remote bool // runs rules elsewhere, through a batch driver; -J applies
	// maxRemote is the default of -J, as in CCTools.
	maxRemote int
}

func batchTypes() []batchType {
	return []batchType{
		{name: "local"},
		{name: "dryrun"},
		{name: "wq", remote: true, maxRemote: 1000},
		{name: "slurm", remote: true, maxRemote: 100},
		{name: "sge", remote: true, maxRemote: 100},
		{name: "condor", remote: true, maxRemote: 100},
	}
}

func lookupBatchType(name string) (batchType, error) {
	var names []string
	for _, bt := range batchTypes() {
		if bt.name == name {
			return bt, nil
		}
		names = append(names, bt.name)
	}
	return batchType{}, cmdutil.Usagef("-T %q: unknown batch type (known: %s)", name, strings.Join(names, ", "))
}

func newCommand(s cmdutil.Streams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "makeflow [flags] [WORKFLOW]",
		Short: "Run a workflow of commands written in the Makeflow language",
		Long:  longHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if cleanModeFirst(cmd, o, args) {
				return nil
			}
			return cmdutil.RangeArgs(0, 1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cleanModeFirst(cmd, o, args) {
				// "-c intermediates wf.mf": the mode given apart, as
				// CCTools' users write it.
				o.clean, args = args[0], args[1:]
			}
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			return run(cmd.Context(), o, file, cmd.Flags().Changed, s)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.batchType, "batch-type", "T", "", "where rules run: local, wq (Work Queue workers), slurm, sge, condor, or dryrun (default: $MAKEFLOW_BATCH_QUEUE_TYPE, else chosen by the models, see --explain)")
	f.BoolVar(&o.local, "local", false, "run every rule on this machine, whatever the models predict")
	f.BoolVar(&o.explain, "explain", false, "say what placement measured and predicted, where the rules run and why, and how the prediction compared")
	f.BoolVar(&o.autoLocal, "auto-local", false, "with -T: run here the rules predicted to take less than their dispatch")
	f.BoolVar(&o.hybrid, "hybrid", false, "with -T: this machine's cores take rules too, from the start (hybrid)")
	f.StringVar(&o.httpAddr, "http", "", "serve a live status page at `ADDR` (:PORT on this machine only, HOST:PORT where it says), with /status as JSON and /metrics for Prometheus")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "say nothing but errors: no progress bar, no commands as they start, no summary")
	f.BoolVar(&o.verbose, "verbose", false, "say where the rules run and why in a line, also when they stay here (-v is --version, as in CCTools)")
	f.StringVar(&o.reportPath, "report", "", "write an HTML report of the run to `FILE` at its end: a timeline of the rules, their CPU and memory, the critical path, placement's prediction, the failures")
	f.IntVarP(&o.maxLocal, "max-local", "j", 0, "most rules running at once on this machine (default: number of CPUs)")
	f.IntVarP(&o.maxRemote, "max-remote", "J", 0, "most rules running at once on a batch system (default 1000 for wq, 100 otherwise)")
	f.StringVarP(&o.clean, "clean", "c", "", "remove what the workflow made, as `MODE` says: all (default), outputs (MAKEFLOW_OUTPUTS, or the files no rule reads) or intermediates (the rest); runs nothing")
	f.Lookup("clean").NoOptDefVal = "all"
	f.StringVarP(&o.logPath, "makeflow-log", "l", "", "transaction log (default WORKFLOW.makeflowlog)")
	f.BoolVarP(&o.retry, "retry", "R", false, "retry failed rules up to 5 times")
	f.IntVarP(&o.retries, "retry-count", "r", 0, "retry failed rules up to `N` times")
	f.BoolVar(&o.check, "check", false, "check the workflow for errors and exit; runs nothing")
	f.BoolVar(&o.dot, "dot", false, "write the workflow's DAG in Graphviz dot format to standard output and exit")
	f.StringVarP(&o.debug, "debug", "d", "", "print debug messages (use -d all)")
	f.StringVarP(&o.changeDir, "change-directory", "X", "", "run as if started in `DIR`")
	f.Int64Var(&o.localCores, "local-cores", 0, "cores of this machine rules may use (default: all)")
	f.Int64Var(&o.localMemory, "local-memory", 0, "memory in MB of this machine rules may use (default: all)")
	f.Int64Var(&o.localDisk, "local-disk", 0, "disk in MB rules may use (default: free space)")
	f.BoolVar(&o.skipFileCheck, "skip-file-check", false, "trust the log: do not look for missing or changed files before running")
	f.BoolVar(&o.sandbox, "sandbox", false, "run every rule that runs here in a sandbox of its own, with links to the files it names and nothing else, its outputs moved back after, as a rule that renames files runs (CCTools' --sandbox)")
	f.BoolVar(&o.logVerbose, "log-verbose", false, "on a first run, write the workflow's rules into the log too (# NODE, # PARENTS, # SOURCES, # TARGETS, # COMMAND lines), as CCTools does")
	f.StringVarP(&o.gc, "gc", "g", "none", "delete intermediate files during the run: none, ref_cnt (as soon as no rule needs them), on_demand (when more than --gc-count are on disk or free space is below --gc-size) or all; never a workflow output")
	f.IntVarP(&o.gcCount, "gc-count", "G", 0, "on_demand: collect when more made files than this are on disk (default 16)")
	f.StringVar(&o.gcSize, "gc-size", "", "on_demand: collect when free space falls below this many bytes (e.g. 10G)")
	f.BoolVarP(&o.zeroLength, "zero-length-error", "z", false, "a rule that leaves an output empty fails")
	f.Var(cmdutil.Seconds(&o.waitForFiles), "wait-for-files-upto", "wait up to this long for a rule's outputs to appear (a shared filesystem that shows them late)")
	f.BoolVar(&o.discardFailed, "do-not-save-failed-output", false, "delete a failed rule's partial outputs instead of keeping them in makeflow.failed.N")
	f.StringVarP(&o.summaryLog, "summary-log", "f", "", "write a summary of the run to `FILE` at its end")
	f.StringVarP(&o.debugFile, "debug-file", "o", "", "write the debug messages of -d to `FILE` instead of standard error")
	f.BoolVarP(&o.version, "version", "v", false, "print the version and exit")
	f.BoolVar(&o.sendEnv, "send-environment", false, "give every rule this process's whole environment, on a batch system too (not only exported variables)")
	f.BoolVarP(&o.advertise, "advertise", "a", false, "-T wq: advertise the master to the catalog (CCTools' old flag; needs -N)")
	f.StringArrayVar(&o.wrappers, "wrapper", nil, "wrap every rule's command: {} is the command, [] the command quoted, %% the rule's number; with neither, '/bin/sh -c COMMAND' is appended (repeatable: each wraps the one before)")
	f.StringArrayVar(&o.wrapperIn, "wrapper-input", nil, "a file every rule reads too, for --wrapper (%% is the rule's number; repeatable)")
	f.StringArrayVar(&o.wrapperOut, "wrapper-output", nil, "a file every rule writes too, for --wrapper (%% is the rule's number; repeatable)")
	f.BoolVar(&o.json, "json", false, "the workflow is in CCTools' JSON form (the default for *.json files)")
	o.run.define(f)
	o.container.define(f)
	o.jx.addFlags(f)

	f.IntVarP(&o.port, "port", "p", workQueuePort, "-T wq: port to listen for workers on (0: any free port)")
	f.StringVarP(&o.portFile, "port-file", "Z", "", "-T wq: listen on any free port and write it to `FILE` (ignored with another -T, as CCTools does)")
	f.StringVarP(&o.project, "project-name", "N", "", "-T wq: advertise the master to the catalog under this project name")
	f.StringVarP(&o.project, "manager-name", "M", "", "same as -N")
	f.StringVar(&o.passwordFile, "password", "", "-T wq: workers must know the password in `FILE`")
	f.StringVar(&o.sslCert, "ssl-cert", "", "-T wq: workers connect over TLS; the master's certificate is in `FILE` (PEM; needs --ssl-key)")
	f.StringVar(&o.sslKey, "ssl-key", "", "-T wq: the private key of --ssl-cert, in `FILE` (PEM)")
	f.StringVarP(&o.catalogs, "catalog-server", "C", "", "-T wq: catalog servers HOST:PORT[,HOST:PORT] for -N")
	f.Float64VarP(&o.fastAbort, "fast-abort", "F", 0, "-T wq: abort and re-send a task running longer than `MULT` times its category's mean")
	f.StringArrayVar(&o.sharedFS, "shared-fs", nil, "-T wq: files under the absolute `DIR` are on a filesystem the workers share; they are used in place, not transferred (repeatable)")
	f.StringVarP(&o.batchOptions, "batch-options", "B", "", "-T slurm|sge: extra sbatch/qsub arguments; -T condor: an extra line of the submit file")
	return cmd
}

// workQueuePort is the port a Work Queue master listens on by default, as
// in CCTools.
const workQueuePort = 9123

// run runs the command; changed reports whether a flag (by long name) was
// given.
func run(ctx context.Context, o *options, file string, changed func(string) bool, s cmdutil.Streams) error {
	if o.version {
		fmt.Fprintf(s.Out, "makeflow version %s (Makeflow language and log of CCTools 9.9)\n", cmdutil.Version())
		return nil
	}
	if err := o.container.check(); err != nil {
		return err
	}
	if err := o.run.check(); err != nil {
		return err
	}
	if o.batchType == "" {
		o.batchType = cmp.Or(os.Getenv("MAKEFLOW_BATCH_QUEUE_TYPE"), "local")
	}
	bt, err := lookupBatchType(o.batchType)
	if err != nil {
		return err
	}
	if bt.name != "wq" {
		// -Z is ignored, as CCTools does: scripts pass it whatever -T.
		for _, name := range []string{"port", "project-name", "manager-name", "advertise", "password", "ssl-cert", "ssl-key", "catalog-server", "fast-abort"} {
			if changed(name) {
				return cmdutil.Usagef("--%s is for the Work Queue master of -T wq, not -T %s", name, bt.name)
			}
		}
	}
	if o.local && changed("batch-type") {
		return cmdutil.Usagef("--local runs every rule here and -T elsewhere: give one of them")
	}
	if o.hybrid && !changed("batch-type") {
		return cmdutil.Usagef("--hybrid makes this machine's cores take rules beside those of -T TYPE: give -T (without it, the models decide)")
	}
	if o.advertise && o.project == "" {
		return cmdutil.Usagef("-a advertises the master under a project name: give -N NAME")
	}
	if (o.sslCert == "") != (o.sslKey == "") {
		return cmdutil.Usagef("--ssl-cert and --ssl-key go together")
	}
	if changed("batch-options") && (!bt.remote || bt.name == "wq") {
		return cmdutil.Usagef("-B is for -T slurm, sge or condor, not -T %s", bt.name)
	}
	if o.maxLocal < 0 || o.maxRemote < 0 || o.retries < 0 || o.localCores < 0 || o.localMemory < 0 || o.localDisk < 0 {
		return cmdutil.Usagef("-j, -J, -r and the --local-* limits must not be negative")
	}
	if o.port < 0 || o.port > 65535 {
		return cmdutil.Usagef("-p %d: not a port number", o.port)
	}
	if o.fastAbort != 0 && o.fastAbort < 1 {
		return cmdutil.Usagef("-F %g: the fast-abort multiplier must be at least 1", o.fastAbort)
	}
	for _, d := range o.sharedFS {
		if !filepath.IsAbs(d) {
			return cmdutil.Usagef("--shared-fs %s: must be an absolute path (the workers see the directory under the same name)", d)
		}
	}
	mode, err := cleanMode(o.clean)
	if err != nil {
		return err
	}
	dir := o.changeDir
	if dir == "" {
		dir = "."
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return cmdutil.Usagef("-X %s: not a directory", dir)
	}
	// The files the run writes, checked before anything runs: a mistyped
	// directory would otherwise fail the run at its start (-l), or lose
	// its summary at its end (-f, --report). -L is checked whatever -T,
	// though only some types write it: the path is wrong either way.
	for _, out := range []struct{ flag, path string }{
		{"-l", o.logPath}, {"-L", o.run.batchLog}, {"-f", o.summaryLog}, {"--report", o.reportPath},
	} {
		if out.path == "" {
			continue
		}
		if err := cmdutil.CheckOutputPath(out.flag, inDir(dir, out.path)); err != nil {
			return err
		}
	}
	if o.httpAddr != "" {
		if _, err := status.ListenAddr(o.httpAddr); err != nil {
			return cmdutil.Usagef("--http %v", err)
		}
	}
	path := file
	if path == "" {
		path = "Makeflow"
		if _, err := os.Stat(inDir(dir, path)); err != nil {
			return cmdutil.Usagef("no workflow given, and %s does not exist", inDir(dir, "./Makeflow"))
		}
	}
	path = inDir(dir, path)
	if err := o.run.checkWorkflowArg(file, path); err != nil {
		return err
	}
	wf, err := o.jx.readWorkflow(ctx, path, dir, o.json)
	if err != nil {
		return inputErrors(err, path, s.Err)
	}
	var wrappers []makeflow.Wrapper
	// The container holds the rule's command alone: --wrapper's wrap it.
	if w, ok := o.container.wrapper(); ok {
		wrappers = append(wrappers, w)
	}
	for _, c := range o.wrappers {
		wrappers = append(wrappers, makeflow.Wrapper{Command: c})
	}
	wf.Wrap(append(wrappers, makeflow.Wrapper{Inputs: o.wrapperIn, Outputs: o.wrapperOut})...)
	if o.sendEnv {
		// This process's environment first, so that what the workflow
		// exports wins.
		env := os.Environ()
		for _, r := range wf.Rules {
			r.Env = append(env[:len(env):len(env)], r.Env...)
		}
	}

	logPath := o.logPath
	if logPath != "" {
		logPath = inDir(dir, logPath)
	}
	switch {
	case o.dot:
		return makeflow.WriteDot(s.Out, wf)
	case o.check:
		if err := checkWorkflow(wf, dir, bt, o); err != nil {
			return inputErrors(err, path, s.Err)
		}
		fmt.Fprintf(s.Out, "%s: %d rules, no problems found\n", path, len(wf.Rules))
		return nil
	case o.run.storagePrint != "":
		return o.run.printStorage(wf, dir, s.Out)
	case o.clean != "":
		return makeflow.Clean(wf, makeflow.CleanOptions{Mode: mode, Dir: dir, LogPath: logPath, Out: s.Out})
	}

	limits := makeflow.Limits{Jobs: o.maxLocal, Cores: o.localCores, MemoryMB: o.localMemory, DiskMB: o.localDisk}
	if env, err := strconv.Atoi(os.Getenv("MAKEFLOW_MAX_LOCAL_JOBS")); err == nil && env > 0 && (!changed("max-local") || env < limits.Jobs) {
		limits.Jobs = env
	}
	if !bt.remote && o.maxRemote > 0 && (limits.Jobs == 0 || o.maxRemote < limits.Jobs) {
		// As in CCTools, running locally -J is one more bound on local jobs.
		limits.Jobs = o.maxRemote
	}
	retries := o.retries
	if o.retry && retries == 0 {
		retries = 5
	}

	barOut := s.Err
	if o.quiet {
		barOut = io.Discard
	}
	bar := progress.New(barOut, "rules", int64(len(wf.Rules)))
	defer bar.Stop()
	out, errOut := bar.Writer(s.Out), bar.Writer(s.Err)
	if o.quiet {
		// The commands' own output still goes out; what makeflow says
		// of them does not.
		out = io.Discard
	}
	gc, err := makeflow.ParseGC(o.gc)
	if err != nil {
		return cmdutil.Usagef("-g: %v", err)
	}
	var gcSize int64
	if o.gcSize != "" {
		if gcSize, err = makeflow.ParseSize(o.gcSize); err != nil {
			return cmdutil.Usagef("--gc-size: %v", err)
		}
	}
	runOpts := makeflow.Options{
		Dir:           dir,
		LogPath:       logPath,
		Local:         limits,
		Retries:       lifecycle.Retries(retries),
		SkipFileCheck: o.skipFileCheck,
		LogVerbose:    o.logVerbose,
		GC:            gc,
		GCCount:       o.gcCount,
		GCSize:        gcSize,
		Out:           out,

		ZeroLengthError:     o.zeroLength,
		WaitForFiles:        o.waitForFiles,
		DiscardFailedOutput: o.discardFailed,
	}
	if err := o.run.apply(&runOpts, wf, dir); err != nil {
		return err
	}
	if bar.Active() {
		runOpts.Progress = func(c makeflow.Counts) {
			bar.SetDone(int64(c.Complete))
			bar.SetStatus(fmt.Sprintf("running %d, waiting %d, failed %d", c.Running, c.Waiting, c.Failed+c.Aborted))
		}
	}
	if exe, err := os.Executable(); err == nil {
		runOpts.MakeflowCommand = exe
	}
	if o.debug != "" {
		w := errOut
		if o.debugFile != "" {
			f, err := os.OpenFile(inDir(dir, o.debugFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o666)
			if err != nil {
				return fmt.Errorf("--debug-file: %w", err)
			}
			defer f.Close()
			w = f
		}
		runOpts.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	auto := !changed("batch-type") && os.Getenv("MAKEFLOW_BATCH_QUEUE_TYPE") == "" && !o.local
	pl, placed, err := o.place(ctx, wf, dir, logPath, auto, bt, errOut)
	if err != nil {
		return err
	}
	bt = placed
	runOpts.Cost, runOpts.Here = pl.cost, pl.here
	var remote *makeflow.Batch
	var closeRemote func() error
	switch bt.name {
	case "dryrun":
		script, closeScript, err := o.run.dryRunScript(dir, s.Out)
		if err != nil {
			return err
		}
		defer closeScript()
		d := makeflow.NewDryRun(script)
		runOpts.Executor, runOpts.DryRun = d, true
		runOpts.Out = io.Discard
		defer d.Close()
	default:
		if runsHere(wf, bt, o.hybrid, pl.here) {
			// Better now than as every rule fails.
			if err := o.container.usable(ctx); err != nil {
				return err
			}
		}
		// Commands' standard output goes straight to ours when nothing
		// else draws on the terminal.
		var jobOut io.Writer = s.Out
		if bar.Active() {
			jobOut = out
		}
		l, err := makeflow.NewLocal(makeflow.LocalOptions{Stdout: jobOut, Stderr: errOut, Sandbox: o.sandbox})
		if err != nil {
			return err
		}
		defer l.Close()
		runOpts.Executor = l
		// A workflow whose rules all run here needs no batch system: it
		// runs under -T slurm where sbatch is not installed, as with
		// CCTools.
		if !bt.remote || !wf.Remote() {
			break
		}
		// Report a workflow the batch system cannot run before starting a
		// master for it.
		if err := checkWorkflow(wf, dir, bt, o); err != nil {
			bar.Stop()
			return inputErrors(err, path, s.Err)
		}
		jobs := o.maxRemote
		if jobs == 0 {
			jobs = bt.maxRemote
		}
		if env, err := strconv.Atoi(os.Getenv("MAKEFLOW_MAX_REMOTE_JOBS")); err == nil && env > 0 && env < jobs {
			jobs = env
		}
		remote, closeRemote, err = newBatch(bt, o, dir, changed("port"), out, errOut, runOpts.Logger)
		if err != nil {
			return err
		}
		runOpts.Remote, runOpts.RemoteLimits = remote, makeflow.Limits{Jobs: jobs}
		if o.run.batchLog != "" && o.wqMaster != nil {
			bl, err := startBatchLog(inDir(dir, o.run.batchLog), o.wqMaster)
			if err != nil {
				closeRemote()
				return err
			}
			closeMaster := closeRemote
			closeRemote = func() error { return errors.Join(bl.close(), closeMaster()) }
		}
	}
	page, err := o.startStatus(wf, bt, pl, s.Err)
	if err != nil {
		if closeRemote != nil {
			closeRemote()
		}
		return err
	}
	if page != nil {
		toBar := runOpts.Progress
		runOpts.Progress = func(c makeflow.Counts) {
			if toBar != nil {
				toBar(c)
			}
			page.progress(len(wf.Rules), c)
		}
		runOpts.Failed = page.failed
	}
	rr := o.startReport(inDir(dir, o.reportPath), wf, bt, pl)
	if rr != nil {
		runOpts.Ended = rr.ended
	}
	rep, err := makeflow.Run(ctx, wf, runOpts)
	if remote != nil {
		if cerr := closeRemote(); cerr != nil && err == nil {
			err = fmt.Errorf("closing the %s driver: %w", bt.name, cerr)
		}
	}
	page.finish(rep, err)
	bar.Stop()
	if err == nil {
		pl.finish(wf, rep, o.explain, s.Err)
	}
	if h := o.hybridDriver; h != nil && (o.explain || o.verbose) {
		c := h.Counts()
		fmt.Fprintf(s.Err, "makeflow: hybrid: %d rules done here (%d of them taken from %s's queue), %d on %s\n",
			c.Local, c.Moved, bt.name, c.Remote, bt.name)
	}
	var listErr makeflow.ErrorList
	if o.summaryLog != "" && rep != nil && !errors.As(err, &listErr) {
		if serr := writeSummary(inDir(dir, o.summaryLog), wf, dir, rep, err, time.Now()); serr != nil && err == nil {
			err = serr
		}
	}
	if rr != nil && !errors.As(err, &listErr) {
		if rerr := rr.Write("makeflow", err, errOut); rerr != nil && err == nil {
			err = rerr
		}
	}
	switch {
	case errors.As(err, &listErr):
		return inputErrors(err, path, s.Err)
	case err != nil:
		return err
	}
	if bt.name != "dryrun" && !o.quiet {
		fmt.Fprintf(s.Out, "workflow complete: %s ran, %s already done, in %s\n",
			cmdutil.Plural(rep.Ran, "rule"), cmdutil.Plural(rep.Skipped, "rule"), rep.Elapsed.Round(time.Millisecond))
		o.run.finish(s.Out, rep)
	}
	return nil
}

// checkWorkflow reports, as a makeflow.ErrorList, what would stop the
// workflow from running on the batch type bt: what Workflow.Check finds,
// the files a remote back end could not place, and then what Check finds
// in the nested workflows that exist.
func checkWorkflow(wf *makeflow.Workflow, dir string, bt batchType, o *options) error {
	pathExists := func(path string) bool {
		_, err := os.Stat(path)
		return err == nil
	}
	exists := func(name string) bool { return pathExists(inDir(dir, name)) }
	if o.skipFileCheck {
		exists, pathExists = nil, nil
	}
	var list makeflow.ErrorList
	collect := func(err error) error {
		var l makeflow.ErrorList
		if errors.As(err, &l) {
			list = append(list, l...)
			return nil
		}
		return err
	}
	if err := cmp.Or(collect(wf.Check(exists)), collect(batchOptions(bt, o, nil).Check(wf))); err != nil {
		return err
	}
	list.Sort() // the workflow's own errors come first
	if err := collect(makeflow.CheckNested(wf, dir, nil, pathExists)); err != nil {
		return err
	}
	if len(list) == 0 {
		return nil
	}
	return list
}

// batchOptions configures the makeflow side of a remote run.
func batchOptions(bt batchType, o *options, logger *slog.Logger) makeflow.BatchOptions {
	return makeflow.BatchOptions{ShipFiles: bt.name == "wq", SharedFS: o.sharedFS, Logger: logger}
}

// newBatch starts the batch driver for bt and returns the executor that
// runs rules through it, and the function that closes it: it keeps the
// bandwidth the run's transfers measured, closes the executor and stops
// the worker a hybrid run on Work Queue starts in this process. For Work
// Queue it starts the master and says where it
// listens, as CCTools does; it warns on errOut about a password file or
// key others can read, and reports there the connections it refuses and
// the master's warnings (fast aborts, workers dropped and why), even
// without -d.
func newBatch(bt batchType, o *options, dir string, portSet bool, out, errOut io.Writer, logger *slog.Logger) (*makeflow.Batch, func() error, error) {
	opts := batch.Options{Spool: dir, Logger: logger}
	var wqcfg *workqueue.Config
	var own *distcmd.OwnWorker
	switch bt.name {
	case "condor":
		if o.batchOptions != "" {
			opts.SubmitArgs = []string{o.batchOptions}
		}
	case "wq":
		port := o.port
		if o.portFile != "" && !portSet {
			port = 0
		}
		cfg := &workqueue.Config{Addr: ":" + strconv.Itoa(port), Project: o.project, Priority: o.run.priority, Logger: logger,
			FastAbort: workqueue.FastAbort{Multiplier: o.fastAbort}}
		if logger == nil {
			cfg.Logger = slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
		warn := func(msg string) { fmt.Fprintf(errOut, "makeflow: warning: %s\n", msg) }
		if o.passwordFile != "" {
			pw, err := wire.ReadPasswordFile(inDir(dir, o.passwordFile), warn)
			if err != nil {
				return nil, nil, cmdutil.Usagef("--password: %w", err)
			}
			cfg.Password = pw
		}
		if o.sslCert != "" {
			tc, err := wire.ServerTLS(inDir(dir, o.sslCert), inDir(dir, o.sslKey), warn)
			if err != nil {
				return nil, nil, cmdutil.Usagef("--ssl-cert: %w", err)
			}
			cfg.TLS = tc
		}
		if logger == nil {
			cfg.Notices = workqueue.NoticeLogger(errOut)
		}
		for _, c := range strings.Split(o.catalogs, ",") {
			if c = strings.TrimSpace(c); c != "" {
				cfg.Catalogs = append(cfg.Catalogs, c)
			}
		}
		if o.hybrid {
			// Placement chose hybrid: this machine's cores take rules
			// too, as a worker of the master.
			own = distcmd.NewOwnWorker(cfg, "makeflow", errOut, cfg.Logger)
		}
		wqcfg = cfg
	case "local":
		if c := o.localCluster; c != nil {
			if !c.Hosts.Assumed() {
				opts.Slots = c.Slots()
			}
			opts.DispatchDelay = time.Duration(c.Delay * float64(time.Second))
		}
	default:
		opts.SubmitArgs = strings.Fields(o.batchOptions)
	}
	var d batch.Driver
	var err error
	if wqcfg != nil {
		d, err = wq.Open(*wqcfg)
	} else {
		d, err = batch.New(bt.name, opts)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("-T %s: %w", bt.name, err)
	}
	o.wqMaster = distcmd.MasterOf(d)
	if o.hybrid && wqcfg == nil {
		// Placement chose hybrid: this machine's cores take rules too.
		cores := runtime.NumCPU()
		h := batch.NewHybrid(batch.NewLocal(batch.Options{Slots: cores}), cores, d)
		h.Hold(o.hold)
		d, o.hybridDriver = h, h
		fmt.Fprintf(errOut, "makeflow: this machine's %d cores take rules too, while %s's queue holds them\n", cores, bt.name)
	}
	stopOwn := func() {}
	if l, ok := d.(batch.Listener); ok {
		port := l.Port()
		fmt.Fprintf(out, "listening for workers on port %d.\n", port)
		if o.portFile != "" {
			if err := os.WriteFile(inDir(dir, o.portFile), []byte(strconv.Itoa(port)+"\n"), 0o666); err != nil {
				d.Close(context.Background())
				return nil, nil, fmt.Errorf("-Z: %w", err)
			}
		}
		if own != nil {
			if stopOwn, err = own.Start(port, *wqcfg, nil); err != nil { // rules have no work at hand: they run as commands
				d.Close(context.Background())
				return nil, nil, err
			}
		}
	}
	b := makeflow.NewBatch(d, batchOptions(bt, o, logger))
	return b, func() error {
		distcmd.SaveBandwidth(bt.name, d)
		defer stopOwn()
		return b.Close()
	}, nil
}

// inputErrors prints each problem with the workflow on its own line, as
// compilers do, and returns a one-line summary.
func inputErrors(err error, path string, w io.Writer) error {
	var list makeflow.ErrorList
	if !errors.As(err, &list) {
		return err
	}
	for _, e := range list {
		fmt.Fprintln(w, e)
	}
	noun := "errors"
	if len(list) == 1 {
		noun = "error"
	}
	fmt.Fprintf(w, "%d %s in %s; nothing was run\n", len(list), noun, path)
	return cmdutil.ErrSilent
}

// cleanModeFirst reports whether args are a clean mode and a workflow
// after a bare -c: the mode given as a word of its own.
func cleanModeFirst(cmd *cobra.Command, o *options, args []string) bool {
	if len(args) != 2 || !cmd.Flags().Changed("clean") || o.clean != "all" {
		return false
	}
	_, err := cleanMode(args[0])
	return err == nil
}

func cleanMode(s string) (makeflow.CleanMode, error) {
	switch s {
	case "", "all":
		return makeflow.CleanAll, nil
	case "outputs":
		return makeflow.CleanOutputs, nil
	case "intermediates":
		return makeflow.CleanIntermediates, nil
	}
	return 0, cmdutil.Usagef("--clean=%s: expected all, outputs or intermediates", s)
}

func inDir(dir, name string) string {
	if filepath.IsAbs(name) || dir == "." {
		return name
	}
	return filepath.Join(dir, name)
}
