// Package wavefrontcmd is the wavefront command: it reads an R directory,
// resumes from its sparse-matrix checkpoint (checking what its cells were
// computed from), decides where the cells run (auto.go: this machine, the
// cluster the user has, or both, by package model/place), runs the
// multicore engine or the distributed master, and reports progress (on
// the terminal, and with --http on a live page), failures and the result
// (and with --report in an HTML report). `wavefront export` turns the
// result into TSV, CSV or a grid.
package wavefrontcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/distcmd"
	"github.com/rightsize/rightsize/internal/progress"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
)

// Main runs the wavefront command with args (without the program name).
func Main(ctx context.Context, args []string, s cmdutil.Streams) int {
	return cmdutil.Execute(ctx, Command(s), args, s)
}

// Command returns the wavefront command, for Main and for its manual page.
func Command(s cmdutil.Streams) *cobra.Command { return newCommand(s) }

type options struct {
	streams cmdutil.Streams

	fn, rdir   string
	n          int
	multicore  bool
	x, y, w, h int
	cores      int
	block      int
	extraArgs  string
	timeout    time.Duration
	output     string
	files      bool
	trust      bool
	bitmap     string
	interval   time.Duration
	// set records which of -X -Y -W -H were given.
	set map[string]bool

	jobSize int
	verbose bool
	quiet   bool
	local   bool
	explain bool
	dist    distcmd.Flags
	// cellTime and placedBlock are the function's time per cell and the
	// block side, if placement measured and chose them.
	cellTime    *place.Value
	placedBlock int
}

func newCommand(s cmdutil.Streams) *cobra.Command {
	o := &options{streams: s}
	o.dist.Tool = "wavefront"
	cmd := &cobra.Command{
		Use:   "wavefront [flags] FUNC Rdir",
		Short: "Compute a two-dimensional recurrence R[i,j] = F(R[i-1,j], R[i,j-1], R[i-1,j-1])",
		Long: `wavefront computes every cell of R from the boundary files R.i.0 and R.0.j in
Rdir, each cell the moment its three neighbours exist, on all of this
machine's cores. FUNC is a program run as 'FUNC [-e args] LEFT BELOW DIAG'
(paths of the three cells; the result is its standard output), a .so
exporting

    void *wavefront_function(const void *x, int xlength,
                             const void *y, int ylength,
                             const void *d, int dlength);

(left, below, diagonal; it returns a malloc'd NUL-terminated string, which
wavefront frees), or builtin:NAME (sum, swcell, rdgame). A .so
that crashes (SIGSEGV, SIGABRT, ...) stops the run at once with status 1,
naming the cell; the cells finished before are kept.

Every finished cell is appended at once to Rdir/R.matrix (or -o FILE), which
is also the checkpoint: run the same command again after a crash or Ctrl-C
and it continues where it stopped. 'wavefront export Rdir' prints the result.
The checkpoint records what its cells were computed from: the function (a
program's or library's content, its -e arguments) and a digest of every
boundary file (every cell read from outside it). When a boundary file has
changed, the cells that depend on it are computed again, with a message;
another function is refused with a message saying how to start over
(--trust-checkpoint keeps the cells, when you know the change does not alter
them). Every record carries a checksum: a damaged file is refused with the
byte where the damage starts and the 'truncate -s' command that keeps the
intact records before it.

Sub-problem mode computes one rectangle: -X and -Y give its first cell
(1-based), -W and -H its size. The cells it reads — the column left of it and
the row below it, corner included — must be in the checkpoint, in
Rdir/R.matrix or in files Rdir/R.x.y. With -o FILE only the rectangle's cells
go to FILE, which is what a distributed master ships back.

Where it runs: without -T, -M, --local or a sub-problem, wavefront decides.
It times the function on the first cell, looks for the cluster you have
(named in RIGHTSIZE_CLUSTER or ~/.config/rightsize/cluster, or detected:
SLURM's sinfo, Grid Engine's qstat, HTCondor's condor_status, a Work Queue
project's workers in the catalog), and predicts the run on this machine's
cores, in blocks on the cluster, and hybrid (this machine's cores take cells
from the start, the cluster the blocks that become ready while they are
busy). It runs
where it predicts fastest, staying here unless the cluster is predicted
more than 5% and half a second faster (hybrid: only 5% when the cluster's
width and dispatch are measured or given, not assumed, since this
machine's cores work from the start). --explain prints what it measured
and where each input came from, each prediction, the choice and its
reason, and after the run the prediction against the time taken; -v says
the choice in one line. Each run's
prediction and time are kept in ~/.cache/rightsize/runs.jsonl and correct the
next run's predictions for the same function. RIGHTSIZE_CLUSTER=none stays here.

Distributed mode (-T wq|local|slurm|sge|condor) cuts the problem into square
blocks and runs each as a job — this same program in sub-problem mode, with
the function and the block's left column and bottom row shipped to Work Queue
workers, or in a directory on the shared filesystem for batch jobs — the
moment the blocks it reads are done. The block size comes from a brief
benchmark of the function and the Wavefront model (-v explains it;
--job-size sets it) and is kept in R.matrix.plan, so that a re-run after a
crash resumes with the same blocks. Failing blocks are submitted again
(--retries), then reported with the end of their standard error; stragglers
are removed and resubmitted (--fast-abort; Work Queue's own with -T wq).
--hybrid makes this machine's cores take part: they take cells, as without
-T, while the cluster takes the blocks that become ready while they are
busy, and a block still in the queue when they run out of cells is taken
back. With -T wq the cluster is the workers connected at each moment: no
more blocks go out at a time than they have cores, and with none connected
the cores take every cell.`,
		Example: `  wavefront builtin:sum R                      # R holds R.0.0 … R.9.0 and R.0.1 … R.0.9
  wavefront --explain ./align R                 # where it runs, and why
  wavefront --bitmap progress.png ./align R     # a program, with a progress picture
  wavefront -M -X 15 -Y 20 -W 5 -H 5 -o block.matrix ./f R
  wavefront -T wq -p 9123 -v ./f R                # then: workqueue worker HOST 9123
  wavefront -T slurm --job-size 50 ./f R
  wavefront export --format grid R`,
		Args: cmdutil.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.fn, o.rdir = args[0], args[1]
			o.set = map[string]bool{}
			for name, flag := range map[string]string{"X": "xstart", "Y": "ystart", "W": "width", "H": "height"} {
				o.set[name] = cmd.Flags().Changed(flag)
			}
			if err := o.checkDistributed(cmd.Flags()); err != nil {
				return err
			}
			return run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.IntVarP(&o.n, "size", "n", 0, "compute an N×N problem (default: as far as the boundary files reach)")
	f.BoolVarP(&o.multicore, "multicore", "M", false, "run on this machine's cores, whatever the models predict")
	f.BoolVar(&o.local, "local", false, "run on this machine's cores, whatever the models predict (as -M)")
	f.BoolVar(&o.explain, "explain", false, "say what the placement measured and predicted, why it chose where to run, and how the prediction compared")
	f.IntVarP(&o.x, "xstart", "X", 1, "sub-problem: first x (1-based)")
	f.IntVarP(&o.y, "ystart", "Y", 1, "sub-problem: first y (1-based)")
	f.IntVarP(&o.w, "width", "W", 0, "sub-problem: width (default: to the end of the boundary)")
	f.IntVarP(&o.h, "height", "H", 0, "sub-problem: height (default: to the end of the boundary)")
	f.IntVarP(&o.cores, "cores", "c", 0, "function calls at once (default: all cores)")
	f.IntVarP(&o.block, "block-size", "b", 1, "cells per side of the blocks a core takes at a time; raise it for functions of a few microseconds")
	f.StringVarP(&o.extraArgs, "extra-args", "e", "", "extra arguments for a program, before its three inputs")
	f.DurationVar(&o.timeout, "timeout", 0, "fail a cell whose function runs longer than this (e.g. 10m; default none)")
	f.StringVarP(&o.output, "output", "o", "", "the sparse-matrix result and checkpoint (default Rdir/R.matrix; - for standard output, without resume)")
	f.BoolVar(&o.files, "files", false, "also write every computed cell as Rdir/R.x.y")
	f.BoolVar(&o.trust, "trust-checkpoint", false, "keep the checkpoint's cells although the function (or its -e arguments) changed since they were computed: you vouch that the change does not alter them")
	f.StringVarP(&o.bitmap, "bitmap", "B", "", "keep a PNG picture of the progress in `FILE`")
	f.DurationVar(&o.interval, "bitmap-interval", 5*time.Second, "how often the --bitmap picture is rewritten")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress bar")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "say where the run goes and why in a line; with -T, how it is set up (the function's measured time, the model, the block size) and every retry and fast abort")
	f.IntVar(&o.jobSize, "job-size", 0, "-T: cells per side of each job's block (default: chosen by the model)")
	o.dist.Add(f)
	o.dist.CellsHere = true
	cmd.AddCommand(newExportCommand(s))
	// A subcommand's name shadows a FUNC of that name: keep to "export"
	// (cmdutil.Execute makes completion a flag).
	return cmd
}

func (o *options) validate() error {
	switch {
	case o.n < 0:
		return cmdutil.Usagef("-n %d: the size must be positive", o.n)
	case o.x < 1 || o.y < 1:
		return cmdutil.Usagef("-X %d -Y %d: cells start at (1,1); row 0 and column 0 are the boundary", o.x, o.y)
	case o.set["W"] && o.w < 1, o.set["H"] && o.h < 1:
		return cmdutil.Usagef("-W %d -H %d: a sub-problem needs at least one cell", o.w, o.h)
	case o.cores < 0:
		return cmdutil.Usagef("-c %d: the number of cores must be positive", o.cores)
	case o.block < 1:
		return cmdutil.Usagef("-b %d: blocks need at least one cell", o.block)
	case o.timeout < 0:
		return cmdutil.Usagef("--timeout %v: must be positive", o.timeout)
	case o.bitmap != "" && o.interval <= 0:
		return cmdutil.Usagef("--bitmap-interval %v: must be positive", o.interval)
	}
	// The arguments the wrong way round (allpairs_multicore's A B FUNC
	// order carried over) would otherwise read as a missing directory.
	if strings.HasPrefix(o.rdir, "builtin:") {
		return cmdutil.Usagef("%s is a function: wavefront takes FUNC Rdir, in that order", o.rdir)
	}
	if st, err := os.Stat(o.fn); err == nil && st.IsDir() {
		return cmdutil.Usagef("%s is a directory, not a function: wavefront takes FUNC Rdir, in that order", o.fn)
	}
	if o.output != "-" {
		if err := cmdutil.CheckOutputPath("-o", o.output); err != nil {
			return err
		}
	}
	if err := o.checkNotInput("-o", o.output); err != nil {
		return err
	}
	if err := o.checkNotInput("--bitmap", o.bitmap); err != nil {
		return err
	}
	return cmdutil.CheckOutputPath("--bitmap", o.bitmap)
}

// checkNotInput refuses an output file (flag's) that is an input — the
// function or a cell file of Rdir — which the run would overwrite, or
// (-o) read as a corrupt checkpoint and offer to remove.
func (o *options) checkNotInput(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	is, _ := cmdutil.SameFile(path)
	if is == nil {
		return nil
	}
	base := filepath.Base(path)
	switch {
	case is(o.fn):
		return cmdutil.Usagef("%s %s is the function: the results would overwrite it", flag, path)
	case strings.HasPrefix(base, "R.") && base != wavefront.MatrixFile && is(filepath.Join(o.rdir, base)):
		return cmdutil.Usagef("%s %s is the cell file %s of %s: the results would overwrite it", flag, path, base, o.rdir)
	}
	return nil
}

// region works out the rectangle to compute from the flags and the boundary.
func (o *options) region(ck *wavefront.Checkpoint) (wavefront.Rect, error) {
	r := wavefront.Rect{X: o.x, Y: o.y, W: o.w, H: o.h}
	if o.set["W"] && o.set["H"] && o.n == 0 {
		return r, nil
	}
	sx, sy, err := ck.Size(o.n)
	if err != nil {
		return r, fmt.Errorf("%s: %w", o.rdir, err)
	}
	if !o.set["W"] {
		r.W = sx - o.x + 1
	}
	if !o.set["H"] {
		r.H = sy - o.y + 1
	}
	if r.W < 1 || r.H < 1 {
		return r, fmt.Errorf("-X %d -Y %d is outside the %d×%d problem that the boundary of %s defines", o.x, o.y, sx, sy, o.rdir)
	}
	return r, nil
}

func run(ctx context.Context, o *options) error {
	if err := o.validate(); err != nil {
		return err
	}
	started := time.Now()
	dir, err := wavefront.OpenDir(o.rdir)
	if err != nil {
		return err
	}
	// The function first, so that a wrong name creates nothing in Rdir.
	args, err := funcs.SplitArgs(o.extraArgs)
	if err != nil {
		return cmdutil.Usagef("-e: %v", err)
	}
	cell, err := funcs.NewRegistry().OpenCell(o.fn, funcs.Options{Args: args, Timeout: o.timeout, TempDir: multicore.FastTempDir()})
	if err != nil {
		return err
	}
	defer cell.Close()
	if len(args) > 0 && cell.Info().Kind != funcs.Program {
		return cmdutil.Usagef("--extra-args applies only to program functions; %s is a %v", o.fn, cell.Info().Kind)
	}
	// A checkpoint file this run creates is removed if the run stops on
	// its inputs (no boundary, a sub-problem outside it, a changed
	// function) before computing anything: it would hold no cell, and
	// 'wavefront export' would take it for an empty result.
	ckFile := cmp.Or(o.output, dir.MatrixPath())
	_, statErr := os.Lstat(ckFile)
	fresh := o.output != "-" && errors.Is(statErr, fs.ErrNotExist)
	inputsChecked := false
	defer func() {
		if fresh && !inputsChecked {
			os.Remove(ckFile)
		}
	}()
	// The checkpoint: loaded (a torn last record cut off), then appended to.
	var ck *wavefront.Checkpoint
	if o.output == "-" {
		ck, err = wavefront.StreamCheckpoint(dir, o.streams.Out)
	} else {
		ck, err = wavefront.OpenCheckpoint(dir, o.output)
	}
	if err != nil {
		return err
	}
	defer ck.Close()
	region, err := o.region(ck)
	if err != nil {
		return err
	}
	notes, err := ck.Reconcile(cell.Info(), o.extraArgs, o.trust, region)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	for _, n := range notes {
		fmt.Fprintf(o.streams.Err, "wavefront: %s\n", n)
	}
	if err := ck.CheckInputs(region); err != nil {
		return err
	}
	var files *wavefront.Dir
	if o.files {
		files = dir
		if err := ck.WriteMissingFiles(region); err != nil {
			return err
		}
	}
	inputsChecked = true
	ckPath := ck.Path()
	done := ck.Count(region)
	states := wavefront.NewStateGrid(region)
	barOut := o.streams.Err
	if o.quiet {
		barOut = io.Discard
	}
	bar := progress.New(barOut, "cells", int64(region.Cells()-done))
	msgs := bar.Writer(o.streams.Err)
	if torn := ck.Torn(); torn > 0 {
		fmt.Fprintf(msgs, "wavefront: ignored a torn last record of %d bytes in %s (cut short by a crash)\n", torn, ckPath)
	}
	if done > 0 {
		fmt.Fprintf(msgs, "wavefront: resuming: %d of %d cells are already in %s\n", done, region.Cells(), ckPath)
	}
	lx, ly := region.Last()
	last, _ := ck.Cell(lx, ly)
	sink := &countingWriter{w: ck, bar: bar, lastX: lx, lastY: ly, last: last}

	stopPictures := func() error { return nil }
	if o.bitmap != "" {
		stopPictures = keepPicture(o.bitmap, o.interval, states, msgs)
	}
	var decision *place.Decision
	seeded := false // the sample computed the region's first cell
	if o.placed() {
		var first []byte
		if decision, first, err = o.place(ctx, cell, region, ck.Value, region.Cells()-done, msgs); err != nil {
			bar.Stop()
			return err
		}
		// Kept, so that timing the function costs the run nothing; a
		// distributed run computes whole blocks, but a hybrid one by
		// cells starts from the cells here.
		if first != nil && (!o.dist.Distributed() || o.dist.HybridByCells()) && !ck.Done(region)(region.X, region.Y) {
			if err := ck.Put(region.X, region.Y, first); err != nil {
				bar.Stop()
				return fmt.Errorf("checkpoint %s: %w", ckPath, err)
			}
			seeded = true
			bar.Add(1)
			if region.X == lx && region.Y == ly {
				sink.last = first
			}
		}
	}
	page, err := o.dist.StartStatus("wavefront", fmt.Sprintf("%s, %d×%d cells", o.rdir, region.W, region.H), "cells", int64(region.Cells()), msgs)
	if err != nil {
		bar.Stop()
		return err
	}
	page.SetPicture(func() image.Image { return states.Image() })
	rep := o.dist.StartReport("wavefront", fmt.Sprintf("%s, %d×%d cells", o.rdir, region.W, region.H), o.reportUnit())
	before := int64(done)
	if seeded {
		before++
	}
	page.SetDone(before)
	sink.page, sink.done = page, before
	ranFrom := time.Now()
	var res multicore.WavefrontResult
	var runErr error
	if o.dist.Distributed() {
		res, runErr = runDistributed(ctx, o, distributed{
			cell: cell, region: region, value: ck.Value, done: ck.Done(region), sink: sink,
			files: files, states: states, checkpoint: ckPath, msgs: msgs,
		})
	} else {
		res, runErr = multicore.RunWavefront(ctx, multicore.Wavefront{
			Cell:   cell,
			Region: region,
			Value:  ck.Value,
			Done:   ck.Done(region),
			Out:    sink,
			Cores:  o.cores,
			Block:  o.block,
			Files:  files,
			States: states,
			Timed:  rep.WavefrontBlocks(region),
		})
	}
	bar.Stop()
	if seeded {
		res.Computed, res.Skipped = res.Computed+1, res.Skipped-1
	}
	page.Finish(runErr)
	pictureErr := stopPictures()
	if err := ck.Sync(); err != nil && runErr == nil {
		runErr = fmt.Errorf("checkpoint %s: %w", ckPath, err)
	}
	if decision != nil && runErr == nil {
		distcmd.RecordRun(o.streams.Err, "wavefront", o.verbose || o.explain, place.DefaultHistory(),
			o.historyKey(cell), decision, time.Since(ranFrom), done > 0)
	}
	if err := rep.Write("wavefront", runErr, o.streams.Err); err != nil && runErr == nil {
		runErr = err
	}
	return report(o, runErr, pictureErr, res, sink, region, ckPath, time.Since(started))
}

// report prints the outcome on standard error and returns the error that
// decides the exit code.
func report(o *options, runErr, pictureErr error, res multicore.WavefrontResult, sink *countingWriter, region wavefront.Rect, ckPath string, elapsed time.Duration) error {
	w := o.streams.Err
	where := ckPath
	if ckPath == "-" {
		where = "standard output"
	}
	var fe *wavefront.FailedError
	if errors.As(runErr, &fe) {
		const show = 10
		for i, ce := range fe.Failed {
			if i == show {
				fmt.Fprintf(w, "wavefront: … and %d more\n", len(fe.Failed)-show)
				break
			}
			fmt.Fprintf(w, "wavefront: %v\n", ce)
		}
	}
	fmt.Fprintf(w, "wavefront: %v: %s\n", region, computed(res.Computed, res.Skipped, elapsed, where))
	if pictureErr != nil {
		fmt.Fprintf(w, "wavefront: progress picture: %v\n", pictureErr)
	}
	kept := keptIn(res.Computed+res.Skipped, where)
	var be *blocksFailed
	switch {
	case errors.As(runErr, &be):
		return distcmd.ReportFailures(w, "wavefront", be.FailedError,
			join("; ", notRun(be.notRun, len(be.Blocks)), kept))
	case fe != nil:
		return errors.New(cellsFailed(len(fe.Failed), fe.NotRun, kept))
	case runErr != nil:
		return distcmd.Stopped(runErr, kept)
	}
	// The answer is the run's result: standard output, unless that
	// carries the cells (-o -).
	answer := o.streams.Out
	if o.output == "-" {
		answer = w
	}
	lx, ly := region.Last()
	fmt.Fprintf(answer, "R[%d,%d] = %s\n", lx, ly, preview(sink.lastValue()))
	return nil
}

// computed says what a run computed, how fast, and where the results
// are: "computed 24 cells (1 was already done) in 1.2s, 20 cells/s;
// results in R.matrix".
func computed(n, skipped int, elapsed time.Duration, where string) string {
	s := "computed " + cmdutil.Plural(n, "cell")
	switch {
	case skipped == 1:
		s += " (1 was already done)"
	case skipped > 1:
		s += fmt.Sprintf(" (%d were already done)", skipped)
	}
	rate := float64(n) / max(elapsed.Seconds(), 1e-9)
	return fmt.Sprintf("%s in %v, %.0f cells/s; results in %s", s, elapsed.Round(time.Millisecond), rate, where)
}

// cellsFailed says that failed cells failed, and that notRun cells were
// not run for depending on them, then kept: "1 cell failed and 3 cells
// that depend on it were not run; the 5 finished cells are kept in R.matrix".
func cellsFailed(failed, notRunCells int, kept string) string {
	s := cmdutil.Plural(failed, "cell") + " failed"
	if d := notRun(notRunCells, failed); d != "" {
		s += " and " + d
	}
	return join("; ", s, kept)
}

// notRun says that n cells were not run for depending on the failed
// ones (cells or blocks), or "" when n is 0.
func notRun(n, failed int) string {
	them := "them"
	if failed == 1 {
		them = "it"
	}
	switch n {
	case 0:
		return ""
	case 1:
		return "1 cell that depends on " + them + " was not run"
	}
	return fmt.Sprintf("%d cells that depend on %s were not run", n, them)
}

// keptIn says that n finished cells are kept in where.
func keptIn(n int, where string) string {
	switch n {
	case 0:
		return "no cell finished"
	case 1:
		return "the 1 finished cell is kept in " + where
	}
	return fmt.Sprintf("the %d finished cells are kept in %s", n, where)
}

// join joins the parts that are not empty with sep.
func join(sep string, parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), sep)
}

// preview shortens a value to its first line for the summary.
func preview(v []byte) string {
	const max = 120
	s := string(v)
	if line, _, more := strings.Cut(s, "\n"); more {
		s = line + " …"
	}
	if len(s) > max {
		s = s[:max] + "…"
	}
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}

// countingWriter passes cells on to the checkpoint, counting them for the
// progress bar and keeping the last cell of the region for the summary.
type countingWriter struct {
	w            *wavefront.Checkpoint
	bar          *progress.Bar
	page         *distcmd.StatusPage // nil without --http
	done         int64               // cells of the region done before the run
	count        atomic.Int64        // cells appended
	lastX, lastY int
	last         []byte
}

func (c *countingWriter) Append(x, y int, v []byte) error {
	if err := c.w.Append(x, y, v); err != nil {
		return err
	}
	c.bar.Add(1)
	c.page.SetDone(c.done + c.count.Add(1))
	if x == c.lastX && y == c.lastY {
		c.last = v // written once, by the goroutine of the region's last cell
	}
	return nil
}

// AppendRecords passes a distributed block's cells on in one write.
func (c *countingWriter) AppendRecords(recs []sparsematrix.Record) error {
	if err := c.w.AppendRecords(recs); err != nil {
		return err
	}
	c.bar.Add(int64(len(recs)))
	c.page.SetDone(c.done + c.count.Add(int64(len(recs))))
	for _, r := range recs {
		if r.X == c.lastX && r.Y == c.lastY {
			c.last = r.Value
		}
	}
	return nil
}

// lastValue may be called after the run, when no Append is in flight.
func (c *countingWriter) lastValue() []byte { return c.last }

// keepPicture rewrites the progress picture every interval until the
// returned function is called, which draws it a last time.
func keepPicture(path string, interval time.Duration, states *wavefront.StateGrid, msgs io.Writer) func() error {
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		reported := false
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := wavefront.WritePNG(path, states.Image()); err != nil && !reported {
					fmt.Fprintf(msgs, "wavefront: progress picture: %v\n", err)
					reported = true
				}
			}
		}
	}()
	if err := wavefront.WritePNG(path, states.Image()); err != nil {
		fmt.Fprintf(msgs, "wavefront: progress picture: %v\n", err)
	}
	return func() error {
		close(stop)
		<-finished
		return wavefront.WritePNG(path, states.Image())
	}
}

// reportUnit names what a report of this run draws: the distributed
// master's jobs, or the multicore engine's cells or blocks.
func (o *options) reportUnit() string {
	switch {
	case o.dist.Distributed():
		return "job"
	case o.block > 1:
		return "block"
	}
	return "cell"
}
