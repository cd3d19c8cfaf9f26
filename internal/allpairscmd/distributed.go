package allpairscmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/distcmd"
)

// runDistributed runs the problem as blocks on the batch system of -T.
func runDistributed(ctx context.Context, o *options, reg *funcs.Registry, args []string, s cmdutil.Streams) (err error) {
	a, b, fn, err := open(o, reg, args)
	if err != nil {
		return err
	}
	defer fn.Close()
	if o.symmetric && !a.Same(b) {
		return cmdutil.Usagef("--symmetric needs A and B to be the same set")
	}
	jobW, jobH, _ := parseJobSize(o.jobSize) // checked with the flags

	cells := int64(len(a.Items)) * int64(len(b.Items))
	if o.symmetric {
		cells = int64(len(a.Items)) * int64(len(a.Items)+1) / 2
	}
	bar := o.progressBar(s, cells)
	defer bar.Stop()
	msgs := bar.Writer(s.Err)
	ck, err := o.openCheckpoint(msgs, args, a, b, fn.Info(), nil)
	if err != nil {
		return err
	}
	if ck == nil {
		return errors.New("a distributed run needs a checkpoint to collect the blocks: give -o FILE or --matrix FILE")
	}
	complete := false
	defer func() {
		if cerr := ck.finish(complete); cerr != nil && err == nil {
			err = fmt.Errorf("checkpoint: %w", cerr)
		}
	}()
	explain := io.Discard
	if o.verbose || o.explain {
		explain = distcmd.Prefixed(msgs, "allpairs: ")
		fmt.Fprintf(explain, "%s (%d items) × %s (%d items) with %s (%v), checkpoint %s\n",
			a.Source, len(a.Items), b.Source, len(b.Items), args[0], fn.Info().Kind, ck.Path())
	}

	d, closeDriver, err := o.dist.Open("allpairs", filepath.Dir(ck.Path()), msgs)
	if err != nil {
		return err
	}
	defer closeDriver()

	out, err := o.openOutput(s)
	if err != nil {
		return err
	}
	defer out.abort()
	page, err := o.dist.StartStatus("allpairs", a.Source+" × "+b.Source, "cells", cells, msgs)
	if err != nil {
		return err
	}
	defer func() { page.Finish(err) }()
	rep := o.dist.StartReport("allpairs", a.Source+" × "+b.Source, "job")
	defer func() {
		if rerr := rep.Write("allpairs", err, msgs); rerr != nil && err == nil {
			err = rerr
		}
	}()
	cfg := o.dist.Config(d, distmaster.DefaultWorkDir(ck.Path()), explain)
	cfg.InFlight = page.SetRunning
	res, err := distmaster.RunAllPairs(ctx, cfg, &distmaster.AllPairs{
		A: a, B: b,
		Func:           distmaster.FunctionOf(fn.Info(), o.extraArgs, o.timeout),
		Pair:           fn,
		Symmetric:      o.symmetric,
		CellTime:       o.cellTime,
		PlacedJobCells: o.jobCells,
		Checkpoint:     ck.Checkpoint,
		JobW:           jobW, JobH: jobH,
		Out: out.w,
		Progress: func(n int64) {
			bar.SetDone(n)
			page.SetDone(n)
		},
	})
	bar.Stop()
	o.resumed = res.Resumed
	if o.cellTime != nil && err == nil && res.MeanJobCells > 0 {
		// Not a whole block's cells: the blocks at the matrix's edges are
		// smaller (a 12×12 in blocks of 5×4 has 16 cells a block, not 20).
		o.dist.SaveJobCost(res.MeanJob, res.MeanJobCells, o.cellTime.V)
	}
	if err == nil {
		o.dist.SaveDispatch(res.Dispatch)
	}
	fe, failed := distcmd.IsFailed(err)
	if err == nil || failed {
		if cerr := out.commit(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if o.verbose || o.explain {
		rate := float64(res.Computed) / max(res.Elapsed.Seconds(), 1e-9)
		fmt.Fprintf(explain, "%d cells computed in %v (%.0f cells/s), %d were already in the checkpoint; %s\n",
			res.Computed, res.Elapsed.Round(time.Millisecond), rate, res.Resumed, distcmd.Summary(d, res.TrackerCounts, res.MeanJob, res.HereJobs))
		if res.Predicted > 0 && err == nil && o.dist.Cluster == nil {
			fmt.Fprintf(explain, "the cluster model predicted %v for the whole problem on its hosts; this run took %v\n",
				res.Predicted.Round(time.Second), res.Elapsed.Round(time.Second))
		}
	}
	n := res.Resumed + res.Computed
	kept := fmt.Sprintf("the %d finished cells are kept in %s", n, ck.Path())
	written := " and were written"
	switch n {
	case 0:
		kept, written = "no cell finished", ""
	case 1:
		kept, written = "the 1 finished cell is kept in "+ck.Path(), " and was written"
	}
	switch {
	case failed:
		return distcmd.ReportFailures(msgs, "allpairs", fe, kept+written)
	case err != nil:
		return distcmd.Stopped(err, kept)
	}
	complete = true
	return nil
}
