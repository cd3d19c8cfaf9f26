// Package allpairscmd is the allpairs command: it parses the command line,
// opens the function, the sets and the checkpoint (deciding where it lives
// and removing a default one once the result is whole), decides where the
// problem runs (auto.go: this machine, the cluster the user has, or both,
// by package model/place), and runs package allpairs or the distributed
// master, with a progress bar and error reports suited to a terminal (and
// with --http a live status page, with --report an HTML report).
package allpairscmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/allpairs"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/distcmd"
	"github.com/rightsize/rightsize/internal/progress"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/multicore"
)

// maxShownFailures is how many failing cells are described in full; the
// rest are only counted.
const maxShownFailures = 10

type options struct {
	output    string
	cores     int
	blockSize int
	extraArgs string
	symmetric bool
	timeout   time.Duration
	quiet     bool
	verbose   bool

	multicore  bool
	local      bool
	explain    bool
	x, y, w, h int

	// resumed is how many cells the checkpoint held when the run started.
	resumed int64
	// cellTime and jobCells are the function's time per cell and the job
	// size, if placement measured and chose them.
	cellTime *place.Value
	jobCells int

	matrix  string
	trust   bool
	jobSize string
	dist    distcmd.Flags
}

// Main runs the allpairs command with args (without the program name).
func Main(ctx context.Context, args []string, s cmdutil.Streams) int {
	return cmdutil.Execute(ctx, Command(s), args, s)
}

// Command returns the allpairs command, for Main and for its manual page.
func Command(s cmdutil.Streams) *cobra.Command { return newCommand(s, funcs.NewRegistry()) }

func newCommand(s cmdutil.Streams, reg *funcs.Registry) *cobra.Command {
	var o options
	o.dist.Tool = "allpairs"
	cmd := &cobra.Command{
		Use:   "allpairs [flags] FUNC A B",
		Short: "Compare every item of set A with every item of set B",
		Long: `allpairs computes the All-Pairs matrix M[i,j] = FUNC(A[i], B[j]) on this
machine's cores and prints one line per cell, in no particular order:

    Aname<TAB>Bname<TAB>result

A backslash, tab, newline or carriage return in a name or a result is written
\\, \t, \n or \r (as 'wavefront export' writes TSV), so that every line has
three fields, whatever the function prints.

A and B are directories (their regular files, sorted by name; names starting
with "." are skipped) or set-list files (one file path per line, relative to
the current directory). In directories the name is the file name; in set lists
it is the line as written.

FUNC is one of:
    path/to/program    run as "program [-e args] Afile Bfile"; its standard
                       output, without trailing newlines, is the result. It is
                       executed directly, not through a shell. A name without a
                       slash is looked up in the current directory, then $PATH.
    path/to/lib.so     a C shared library exporting
                         void *allpairs_function(const void *a, int alength,
                                                 const void *b, int blength);
                       returning a malloc'd NUL-terminated string (freed by
                       allpairs). It is called from many threads at once. If
                       it crashes (SIGSEGV, SIGABRT, ...), allpairs stops at
                       once with status 1, naming the two items.
    builtin:NAME       a built-in: bytediff (number of differing bytes) or
                       swalign (Smith-Waterman local-alignment score; +3 match,
                       -3 mismatch, -2 per gap). CCTools' BITWISE and SWALIGN
                       also work.

allpairs holds a block of A in memory (-b items; by default as many as fit in
half of the available memory), keeps all cores (-c) on it while B streams past,
then moves to the next block.

Every finished cell is appended at once to a checkpoint: --matrix FILE; else
FILE.matrix beside -o FILE; else (standard output) a file in the cache
directory ($XDG_CACHE_HOME or ~/.cache, under rightsize/allpairs/) named after
the command's arguments. After a crash, kill or Ctrl-C (exit 130), run the same
command again: only the missing cells are computed, and the lines of the
others are written first. The checkpoint records what its cells were computed
from — the function (a program's or library's content, its -e arguments) and
every item's name, size and modification time: an item that changed has its
row (or column) computed again, with a message; another function, or items
added, removed or renamed, are refused with a message saying how to start over
(--trust-checkpoint keeps the cells despite a changed function, when you know
the change does not alter them). A default checkpoint is removed once the
result is written whole; --matrix FILE is kept. -o FILE is written beside FILE
and renamed over it at the end (also when cells failed), so that a refused or
interrupted run leaves the previous FILE as it was.

A cell whose function fails (non-zero exit, signal, --timeout) is reported on
standard error with its exit status and the end of its standard error; the
run goes on, every cell that succeeded is written, the checkpoint is kept so
that running the same command again retries only the failed cells, and
allpairs exits with status 1. Exit status 2 means bad flags or arguments, 130
an interrupt.

Sub-problem mode (-M -X x -Y y -W w -H h) computes only rows x..x+w-1 of A
and columns y..y+h-1 of B, counted from 1 as wavefront's -X and -Y are; the
union of sub-problems is the whole matrix. With --matrix FILE and no -o the
cells go only to FILE, as sparse-matrix records (x = index in A, y = index in
B, both from 0 there; values may hold any bytes). This is what a distributed
master runs on a worker.

Where it runs: without -T, -M or --local, allpairs decides. It times the
function on a few pairs, looks for the cluster you have (named in
RIGHTSIZE_CLUSTER or ~/.config/rightsize/cluster, or detected: SLURM's sinfo,
Grid Engine's qstat, HTCondor's condor_status, a Work Queue project's workers
in the catalog), and predicts the run on this machine, distributed on the
cluster, and hybrid (this machine's cores take jobs as one more worker from
the start while the cluster's arrive). It runs where it predicts fastest,
staying here unless the cluster is predicted more than 5% and half a second
faster (hybrid: only 5% when the cluster's width and dispatch are measured or
given, not assumed, since this machine's cores work from the start).
--explain prints what it measured and where each input came from,
each prediction, the choice and its reason, and after the run the prediction
against the time taken; -v says the choice in one line. Each run's prediction and time are
kept in ~/.cache/rightsize/runs.jsonl, and the next run of the same function
corrects its predictions by them. RIGHTSIZE_CLUSTER=none stays here.

Distributed mode (-T wq|local|slurm|sge|condor) cuts the matrix into blocks
and runs each as a job: this same program in sub-problem mode, with the
function and the block's items shipped to Work Queue workers (and cached there,
since a row of blocks shares them) or read from the shared filesystem by batch
jobs. The job size comes from a brief benchmark of the function and the
All-Pairs model (-v explains it; --job-size sets it). Every finished cell is
appended to the checkpoint, as above (its jobs' work directory is beside it,
so put it on a filesystem the jobs share: -o FILE or --matrix FILE); the job
size is kept beside it in CHECKPOINT.plan. Run the same command again after a
crash or Ctrl-C and only the missing blocks are computed, with the same job
size. The result lines are written from the checkpoint at the end.
A failing block is submitted again (--retries) and then reported with the end
of its standard error; a straggler is removed and resubmitted (--fast-abort;
Work Queue's own fast abort with -T wq). --hybrid makes this machine's cores
take jobs too. With -T wq, start workers with
'workqueue worker HOST PORT' (or -M NAME with -N NAME).`,
		Example: `  allpairs builtin:bytediff irises/ irises/ --symmetric > scores.txt
  allpairs ./compare.exe -e "-t 0.5" A.list B.list -o matrix.txt
  allpairs -M -X 1 -Y 101 -W 50 -H 50 ./libmatch.so A/ B/
  allpairs --explain ./compare.exe A/ B/ -o matrix.txt
  allpairs -T wq -p 9123 -v ./compare.exe A/ B/ -o matrix.txt
  allpairs -T slurm --job-size 50x50 ./compare.exe A/ B/ -o matrix.txt`,
		Args: cmdutil.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			if err := checkOrder(args); err != nil {
				return err
			}
			return runCommand(cmd.Context(), &o, reg, args, s)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVarP(&o.output, "output", "o", "", "write the results to `FILE` instead of standard output")
	f.IntVarP(&o.cores, "cores", "c", 0, "run `N` functions at once (default: all cores)")
	f.IntVarP(&o.blockSize, "block-size", "b", 0, "hold `N` items of A in memory at once (default: as many as fit in half of free memory)")
	f.StringVarP(&o.extraArgs, "extra-args", "e", "", "extra `ARGS` for a program function, before the two files (split like a shell would, without one)")
	f.BoolVar(&o.symmetric, "symmetric", false, "compute only M[i,j] with i <= j (A and B must be the same set)")
	f.DurationVar(&o.timeout, "timeout", 0, "fail a cell whose function runs longer than `DURATION` (e.g. 30s; default: no limit)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress bar")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "say how the run is set up and how long it took")
	f.BoolVarP(&o.multicore, "multicore", "M", false, "run on this machine; with -X -Y -W -H, only that sub-problem")
	f.BoolVar(&o.local, "local", false, "run on this machine, whatever the models predict (as -M)")
	f.BoolVar(&o.explain, "explain", false, "say what the placement measured and predicted, why it chose where to run, and how the prediction compared")
	f.IntVarP(&o.x, "xstart", "X", 1, "sub-problem: first row (item of A), counted from 1 as wavefront's -X")
	f.IntVarP(&o.y, "ystart", "Y", 1, "sub-problem: first column (item of B), counted from 1")
	f.IntVarP(&o.w, "width", "W", -1, "sub-problem: number of rows (default: to the end of A)")
	f.IntVarP(&o.h, "height", "H", -1, "sub-problem: number of columns (default: to the end of B)")
	// -1 stands for "to the end", which the usage says: pflag's "(default -1)" would say it again, less clearly.
	f.Lookup("width").DefValue, f.Lookup("height").DefValue = "0", "0"
	f.StringVar(&o.matrix, "matrix", "", "keep the checkpoint in `FILE` (sparse-matrix records), not to be removed after the run; on this machine, without -o, write no lines")
	f.BoolVar(&o.trust, "trust-checkpoint", false, "keep the checkpoint's cells although the function (or its -e arguments) changed since they were computed: you vouch that the change does not alter them")
	f.StringVar(&o.jobSize, "job-size", "", "-T: items of A × items of B in each job, as `WxH` or N for N×N (default: chosen by the model)")
	o.dist.Add(f)
	return cmd
}

func (o *options) check(cmd *cobra.Command) error {
	fs := cmd.Flags()
	sub := fs.Changed("xstart") || fs.Changed("ystart") || fs.Changed("width") || fs.Changed("height")
	if err := o.dist.Check(fs, "job-size"); err != nil {
		return err
	}
	if o.dist.Distributed() {
		switch {
		case o.multicore, o.local:
			return cmdutil.Usagef("-M and --local run on this machine and -T on a batch system: give one of them")
		case fs.Changed("cores"), fs.Changed("block-size"):
			return cmdutil.Usagef("-c and -b set how this machine runs the problem; with -T every job runs on one core of its worker")
		}
		if _, _, err := parseJobSize(o.jobSize); err != nil {
			return err
		}
	}
	switch {
	case sub && !o.multicore:
		return cmdutil.Usagef("-X, -Y, -W and -H select a sub-problem and need -M")
	case o.cores < 0:
		return cmdutil.Usagef("--cores must be at least 1")
	case o.blockSize < 0:
		return cmdutil.Usagef("--block-size must be at least 1")
	case o.timeout < 0:
		return cmdutil.Usagef("--timeout must be positive")
	}
	switch {
	case o.x < 1 || o.y < 1:
		return cmdutil.Usagef("-X %d -Y %d: rows and columns are counted from 1", o.x, o.y)
	case fs.Changed("width") && o.w < 1, fs.Changed("height") && o.h < 1:
		return cmdutil.Usagef("-W %d -H %d: a sub-problem needs at least one cell", o.w, o.h)
	}
	// Before anything runs: -o's directory also holds the checkpoint.
	if err := cmdutil.CheckOutputPath("-o", o.output); err != nil {
		return err
	}
	return cmdutil.CheckOutputPath("--matrix", o.matrix)
}

// checkOrder reports arguments given in allpairs_multicore's order, A B
// FUNC, which would otherwise read as a set that does not exist.
func checkOrder(args []string) error {
	if strings.HasPrefix(args[2], "builtin:") {
		return cmdutil.Usagef("%s is a function: allpairs takes FUNC A B, in that order", args[2])
	}
	if st, err := os.Stat(args[0]); err == nil && st.IsDir() {
		return cmdutil.Usagef("%s is a directory, not a function: allpairs takes FUNC A B, in that order", args[0])
	}
	return nil
}

// region returns the sub-problem the flags select, or nil; an error if
// it does not fit in the nA×nB matrix.
func (o *options) region(nA, nB int) (*multicore.Region, error) {
	if !o.multicore || (o.x == 1 && o.y == 1 && o.w < 0 && o.h < 0) {
		return nil, nil
	}
	// -X and -Y count from 1, as wavefront's do; a Region from 0.
	r := multicore.Region{X: o.x - 1, Y: o.y - 1, W: o.w, H: o.h}
	if r.W < 0 {
		r.W = nA - r.X
	}
	if r.H < 0 {
		r.H = nB - r.Y
	}
	switch {
	case r.W < 1: // -X past the last row; -W, given, is at least 1
		return nil, cmdutil.Usagef("-X %d: the %d×%d matrix has rows 1…%d", o.x, nA, nB, nA)
	case r.H < 1:
		return nil, cmdutil.Usagef("-Y %d: the %d×%d matrix has columns 1…%d", o.y, nA, nB, nB)
	case r.X+r.W > nA || r.Y+r.H > nB:
		return nil, cmdutil.Usagef("%s: rows %s and columns %s are not inside the %d×%d matrix",
			o.subFlags(), span(o.x, r.W), span(o.y, r.H), nA, nB)
	}
	return &r, nil
}

// subFlags is the sub-problem flags as given: "-X 3 -W 5".
func (o *options) subFlags() string {
	var given []string
	for _, f := range []struct {
		name string
		v    int
		set  bool
	}{{"-X", o.x, o.x != 1}, {"-Y", o.y, o.y != 1}, {"-W", o.w, o.w >= 0}, {"-H", o.h, o.h >= 0}} {
		if f.set {
			given = append(given, f.name+" "+strconv.Itoa(f.v))
		}
	}
	return strings.Join(given, " ")
}

// span says which of the rows (or columns) counted from 1 n of them from
// first are: "3…7", or "3" for one.
func span(first, n int) string {
	if n <= 1 {
		return strconv.Itoa(first)
	}
	return fmt.Sprintf("%d…%d", first, first+n-1)
}

// progressBar returns the progress bar of a run of cells, drawn on
// standard error unless -q (and only on a terminal).
func (o *options) progressBar(s cmdutil.Streams, cells int64) *progress.Bar {
	out := s.Err
	if o.quiet {
		out = io.Discard
	}
	return progress.New(out, "cells", cells)
}

// parseJobSize parses --job-size: "WxH", "N" for N×N, or "" for the
// model's choice (0, 0).
func parseJobSize(s string) (w, h int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	ws, hs, found := strings.Cut(strings.ToLower(s), "x")
	if !found {
		hs = ws
	}
	w, errW := strconv.Atoi(ws)
	h, errH := strconv.Atoi(hs)
	if errW != nil || errH != nil || w < 1 || h < 1 {
		return 0, 0, cmdutil.Usagef("--job-size %q: want WxH or N, positive numbers of items", s)
	}
	return w, h, nil
}

// open reads the two sets (once when they are the same argument) and opens
// the function with the command line's options.
func open(o *options, reg *funcs.Registry, args []string) (a, b *allpairs.Set, fn funcs.Pair, err error) {
	extra, err := funcs.SplitArgs(o.extraArgs)
	if err != nil {
		return nil, nil, nil, cmdutil.Usagef("--extra-args: %v", err)
	}
	if a, err = allpairs.ReadSet(args[1]); err != nil {
		return nil, nil, nil, err
	}
	b = a
	if args[2] != args[1] {
		if b, err = allpairs.ReadSet(args[2]); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, out := range []struct{ flag, path string }{{"-o", o.output}, {"--matrix", o.matrix}} {
		if err := checkNotInput(out.flag, out.path, args[0], a, b); err != nil {
			return nil, nil, nil, err
		}
	}
	if fn, err = reg.OpenPair(args[0], funcs.Options{Args: extra, Timeout: o.timeout}); err != nil {
		return nil, nil, nil, err
	}
	if len(extra) > 0 && fn.Info().Kind != funcs.Program {
		fn.Close()
		return nil, nil, nil, cmdutil.Usagef("--extra-args applies only to program functions; %s is a %v", args[0], fn.Info().Kind)
	}
	return a, b, fn, nil
}

// checkNotInput refuses an output file (flag's) that is one of the run's
// inputs — the function, a set list or an item — which the results would
// overwrite. Only items of the output's size are looked at.
func checkNotInput(flag, path, fn string, sets ...*allpairs.Set) error {
	if path == "" {
		return nil
	}
	is, out := cmdutil.SameFile(path)
	if is == nil {
		return nil
	}
	if is(fn) {
		return cmdutil.Usagef("%s %s is the function: the results would overwrite it", flag, path)
	}
	for _, s := range sets {
		if is(s.Source) {
			return cmdutil.Usagef("%s %s is the set list %s: the results would overwrite it", flag, path, s.Source)
		}
		for _, it := range s.Items {
			if it.Size == out.Size() && is(it.Path) {
				return cmdutil.Usagef("%s %s is item %s of %s: the results would overwrite it", flag, path, it.Name, s.Source)
			}
		}
	}
	return nil
}

// runCommand runs the command in the mode the flags ask for, or the models
// choose.
func runCommand(ctx context.Context, o *options, reg *funcs.Registry, args []string, s cmdutil.Streams) error {
	if o.multicore || o.local {
		return run(ctx, o, reg, args, s)
	}
	return runPlaced(ctx, o, reg, args, s)
}

// run runs the problem on this machine.
func run(ctx context.Context, o *options, reg *funcs.Registry, args []string, s cmdutil.Streams) (err error) {
	a, b, fn, err := open(o, reg, args)
	if err != nil {
		return err
	}
	defer fn.Close()

	region, err := o.region(len(a.Items), len(b.Items))
	if err != nil {
		return err
	}
	p := &allpairs.Problem{
		A: a, B: b, Func: fn,
		Cores: o.cores, BlockSize: o.blockSize, Symmetric: o.symmetric,
		Region: region,
	}
	plan, err := p.Decide()
	if err != nil {
		return cmdutil.Usagef("%v", err)
	}

	bar := o.progressBar(s, plan.Cells)
	defer bar.Stop()
	errOut := bar.Writer(s.Err)
	ck, err := o.openCheckpoint(errOut, args, a, b, fn.Info(), p.Region)
	if err != nil {
		return err
	}
	if ck != nil {
		p.Checkpoint = ck.Checkpoint
	}
	complete := false
	defer func() {
		if cerr := ck.finish(complete); cerr != nil && err == nil {
			err = fmt.Errorf("checkpoint: %w", cerr)
		}
	}()
	var out *output
	var lines io.Writer // nil with --matrix and no -o: the cells are in the checkpoint
	if o.matrix == "" || o.output != "" {
		if out, err = o.openOutput(s); err != nil {
			return err
		}
		defer out.abort()
		lines = out.w
		if o.output == "" && cmdutil.IsTerminal(s.Out) {
			lines = bar.Writer(lines)
		}
	}
	if o.verbose {
		where := "no checkpoint"
		if ck != nil {
			where = "checkpoint " + ck.Path()
		}
		fmt.Fprintf(errOut, "allpairs: %s (%d items) × %s (%d items) with %s (%v), %s: %v\n",
			a.Source, len(a.Items), b.Source, len(b.Items), args[0], fn.Info().Kind, where, plan)
	}
	page, err := o.dist.StartStatus("allpairs", a.Source+" × "+b.Source, "cells", plan.Cells, errOut)
	if err != nil {
		return err
	}
	defer func() { page.Finish(err) }()
	rep := o.dist.StartReport("allpairs", a.Source+" × "+b.Source, "unit")
	defer func() {
		if rerr := rep.Write("allpairs", err, errOut); rerr != nil && err == nil {
			err = rerr
		}
	}()
	p.Timed = rep.AllPairsUnits()
	var shown atomic.Int64
	p.OnFailure = func(ce *allpairs.CellError) {
		if shown.Add(1) <= maxShownFailures {
			fmt.Fprintf(errOut, "allpairs: %v\n", ce)
		}
		var stderr []byte
		if call, ok := errors.AsType[*funcs.CallError](ce.Err); ok {
			stderr = call.Stderr
		}
		page.Fail(ce.A.Name+" × "+ce.B.Name, ce.Err.Error(), string(stderr))
		rep.Failed("cell "+ce.A.Name+" × "+ce.B.Name, ce.Err.Error(), string(stderr))
	}
	p.OnProgress = func(n int64) {
		bar.SetDone(n)
		page.SetDone(n)
	}

	sum, err := allpairs.Run(ctx, p, lines)
	bar.Stop()
	o.resumed = sum.Resumed
	if o.verbose {
		rate := float64(sum.Done) / max(sum.Elapsed.Seconds(), 1e-9)
		fmt.Fprintf(s.Err, "allpairs: %d cells in %v (%.0f cells/s), %d failed, %d were already in the checkpoint\n",
			sum.Done, sum.Elapsed.Round(time.Millisecond), rate, sum.Failed, sum.Resumed)
	}
	var failed *allpairs.FailedError
	if (err == nil || errors.As(err, &failed)) && out != nil {
		if cerr := out.commit(); cerr != nil {
			return cerr
		}
	}
	finished := sum.Resumed + sum.Done - sum.Failed
	switch {
	case err == nil:
		complete = true
		return nil
	case failed != nil:
		more := ""
		if failed.Failed > maxShownFailures {
			more = fmt.Sprintf(" (the first %d are shown above)", maxShownFailures)
		}
		succeeded := fmt.Sprintf("the %d that succeeded were written, and", finished)
		switch finished {
		case 0:
			succeeded = "none succeeded;"
		case 1:
			succeeded = "the 1 that succeeded was written, and"
		}
		return fmt.Errorf("%d of %d cells failed%s; %s %s",
			failed.Failed, failed.Cells, more, succeeded, ck.kept(finished, true, "retry the failed cells"))
	case errors.Is(err, context.Canceled):
		written := "those were written"
		if o.output != "" {
			written = o.output + " was left as it was"
		}
		return fmt.Errorf("interrupted after %d of %d cells (%s); %s: %w",
			finished, sum.Plan.Cells, written, ck.kept(finished, false, "resume"), err)
	}
	return fmt.Errorf("%w (%s)", err, ck.kept(finished, false, "resume"))
}
