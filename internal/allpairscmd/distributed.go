package allpairscmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/distcmd"
)

// checkpointPath is where a distributed run keeps its cells: --matrix, or
// beside -o, or allpairs.matrix in the current directory.
func (o *options) checkpointPath() string {
	switch {
	case o.matrix != "":
		return o.matrix
	case o.output != "":
		return o.output + ".matrix"
	}
	return "allpairs.matrix"
}

// runDistributed runs the problem as blocks on the batch system of -T.
func runDistributed(ctx context.Context, o *options, reg *funcs.Registry, args []string, s cmdutil.Streams) error {
	a, b, fn, err := open(o, reg, args)
	if err != nil {
		return err
	}
	defer fn.Close()
	if o.symmetric && !a.Same(b) {
		return cmdutil.Usagef("--symmetric needs A and B to be the same set")
	}
	jobW, jobH, _ := parseJobSize(o.jobSize) // checked with the flags
	checkpoint := o.checkpointPath()

	cells := int64(len(a.Items)) * int64(len(b.Items))
	if o.symmetric {
		cells = int64(len(a.Items)) * int64(len(a.Items)+1) / 2
	}
	bar := o.progressBar(s, cells)
	defer bar.Stop()
	msgs := bar.Writer(s.Err)
	explain := io.Discard
	if o.verbose {
		explain = distcmd.Prefixed(msgs, "allpairs: ")
		fmt.Fprintf(explain, "%s (%d items) × %s (%d items) with %s (%v), checkpoint %s\n",
			a.Source, len(a.Items), b.Source, len(b.Items), args[0], fn.Info().Kind, checkpoint)
	}

	d, closeDriver, err := o.dist.Open("allpairs", "allpairs", filepath.Dir(checkpoint), msgs)
	if err != nil {
		return err
	}
	defer closeDriver()

	out, file, err := o.openOutput(s)
	if err != nil {
		return err
	}
	if file != nil {
		defer file.Close()
	}
	cfg := o.dist.Config(d, distmaster.DefaultWorkDir(checkpoint), explain)
	res, err := distmaster.RunAllPairs(ctx, cfg, &distmaster.AllPairs{
		A: a, B: b,
		Func:       distmaster.FunctionOf(fn.Info(), o.extraArgs, o.timeout),
		Pair:       fn,
		Symmetric:  o.symmetric,
		Checkpoint: checkpoint,
		JobW:       jobW, JobH: jobH,
		Out:      out,
		Progress: bar.SetDone,
	})
	bar.Stop()
	if file != nil {
		if cerr := file.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("write %s: %w", o.output, cerr)
		}
	}
	if o.verbose {
		rate := float64(res.Computed) / max(res.Elapsed.Seconds(), 1e-9)
		fmt.Fprintf(explain, "%d cells computed in %v (%.0f cells/s), %d were already in the checkpoint; %s\n",
			res.Computed, res.Elapsed.Round(time.Millisecond), rate, res.Resumed, distcmd.Summary(d, res.TrackerCounts, res.MeanJob))
		if res.Predicted > 0 && err == nil {
			fmt.Fprintf(explain, "the cluster model predicted %v for the whole problem on its hosts; this run took %v\n",
				res.Predicted.Round(time.Second), res.Elapsed.Round(time.Second))
		}
	}
	kept := fmt.Sprintf("the %d finished cells are kept in %s", res.Resumed+res.Computed, checkpoint)
	if fe, ok := distcmd.IsFailed(err); ok {
		return distcmd.ReportFailures(msgs, "allpairs", fe, kept+" and were written")
	}
	if err != nil {
		return distcmd.Stopped(err, kept)
	}
	return nil
}
