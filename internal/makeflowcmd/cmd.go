// Package makeflowcmd is the makeflow command: it parses a Makeflow and
// checks, draws, cleans or runs it with the makeflow package.
//
// It holds only flag handling and what the command prints; everything a
// program embedding Makeflow would need is in package makeflow.
package makeflowcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/progress"
	"github.com/rightsize/rightsize/makeflow"
	"github.com/spf13/cobra"
)

// Main runs the makeflow command with args and returns its exit code.
func Main(ctx context.Context, args []string, s cmdutil.Streams) int {
	return cmdutil.Execute(ctx, newCommand(s), args, s)
}

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
	json          bool
}

// A batchType is a value of -T: where the rules run.
type batchType struct {
	name   string
	remote bool // runs rules elsewhere; -J applies
	// ready says whether this build can run it; the others are accepted
	// names that are not implemented yet.
	ready bool
}

func batchTypes() []batchType {
	return []batchType{
		{name: "local", ready: true},
		{name: "dryrun", ready: true},
		{name: "wq", remote: true},
		{name: "slurm", remote: true},
		{name: "sge", remote: true},
		{name: "condor", remote: true},
	}
}

func lookupBatchType(name string) (batchType, error) {
	var names []string
	for _, bt := range batchTypes() {
		if bt.name == name {
			if !bt.ready {
				return bt, cmdutil.Usagef("-T %s: running rules on %s is not available in this version yet; use -T local", name, name)
			}
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
		Args:  cmdutil.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			return run(cmd.Context(), o, file, cmd.Flags().Changed("max-local"), s)
		},
	}
	f := cmd.Flags()
	defaultType := os.Getenv("MAKEFLOW_BATCH_QUEUE_TYPE")
	if defaultType == "" {
		defaultType = "local"
	}
	f.StringVarP(&o.batchType, "batch-type", "T", defaultType, "where rules run: local or dryrun")
	f.IntVarP(&o.maxLocal, "max-local", "j", 0, "most rules running at once on this machine (default: number of CPUs)")
	f.IntVarP(&o.maxRemote, "max-remote", "J", 0, "most rules running at once on a batch system")
	f.StringVarP(&o.clean, "clean", "c", "", "remove what the workflow made: all (default), outputs or intermediates; runs nothing")
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
	f.BoolVar(&o.json, "json", false, "the workflow is in CCTools' JSON form (the default for *.json files)")
	return cmd
}

func run(ctx context.Context, o *options, file string, maxLocalSet bool, s cmdutil.Streams) error {
	bt, err := lookupBatchType(o.batchType)
	if err != nil {
		return err
	}
	if o.maxLocal < 0 || o.maxRemote < 0 || o.retries < 0 || o.localCores < 0 || o.localMemory < 0 || o.localDisk < 0 {
		return cmdutil.Usagef("-j, -J, -r and the --local-* limits must not be negative")
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
	path := file
	if path == "" {
		path = "Makeflow"
		if _, err := os.Stat(inDir(dir, path)); err != nil {
			return cmdutil.Usagef("no workflow given, and %s does not exist", inDir(dir, "./Makeflow"))
		}
	}
	path = inDir(dir, path)
	var wf *makeflow.Workflow
	if o.json || strings.HasSuffix(path, ".json") {
		wf, err = makeflow.ParseJSONFile(path)
	} else {
		wf, err = makeflow.ParseFile(path, nil)
	}
	if err != nil {
		return inputErrors(err, path, s.Err)
	}

	logPath := o.logPath
	if logPath != "" {
		logPath = inDir(dir, logPath)
	}
	switch {
	case o.dot:
		return makeflow.WriteDot(s.Out, wf)
	case o.check:
		exists := func(name string) bool {
			_, err := os.Stat(inDir(dir, name))
			return err == nil
		}
		if err := wf.Check(exists); err != nil {
			return inputErrors(err, path, s.Err)
		}
		fmt.Fprintf(s.Out, "%s: %d rules, no problems found\n", path, len(wf.Rules))
		return nil
	case o.clean != "":
		return makeflow.Clean(wf, makeflow.CleanOptions{Mode: mode, Dir: dir, LogPath: logPath, Out: s.Out})
	}

	limits := makeflow.Limits{Jobs: o.maxLocal, Cores: o.localCores, MemoryMB: o.localMemory, DiskMB: o.localDisk}
	if env, err := strconv.Atoi(os.Getenv("MAKEFLOW_MAX_LOCAL_JOBS")); err == nil && env > 0 && (!maxLocalSet || env < limits.Jobs) {
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

	bar := progress.New(s.Err, "rules", int64(len(wf.Rules)))
	defer bar.Stop()
	out, errOut := bar.Writer(s.Out), bar.Writer(s.Err)
	runOpts := makeflow.Options{
		Dir:           dir,
		LogPath:       logPath,
		Local:         limits,
		Retries:       retries,
		SkipFileCheck: o.skipFileCheck,
		Out:           out,
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
		runOpts.Logger = slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	switch bt.name {
	case "dryrun":
		d := makeflow.NewDryRun(s.Out)
		runOpts.Executor, runOpts.DryRun = d, true
		runOpts.Out = io.Discard
		defer d.Close()
	default:
		// Commands' standard output goes straight to ours when nothing
		// else draws on the terminal.
		var jobOut io.Writer = s.Out
		if bar.Active() {
			jobOut = out
		}
		l, err := makeflow.NewLocal(makeflow.LocalOptions{Stdout: jobOut, Stderr: errOut})
		if err != nil {
			return err
		}
		defer l.Close()
		runOpts.Executor = l
	}
	rep, err := makeflow.Run(ctx, wf, runOpts)
	bar.Stop()
	var listErr makeflow.ErrorList
	switch {
	case errors.As(err, &listErr):
		return inputErrors(err, path, s.Err)
	case err != nil:
		return err
	}
	if bt.name != "dryrun" {
		fmt.Fprintf(s.Out, "workflow complete: %s ran, %s already done, in %s\n",
			plural(rep.Ran, "rule"), plural(rep.Skipped, "rule"), rep.Elapsed.Round(time.Millisecond))
	}
	return nil
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

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
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
