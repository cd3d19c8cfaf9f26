package wavefrontcmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/pflag"

	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/distcmd"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
)

// checkDistributed reports flags that do not fit -T, or need it.
func (o *options) checkDistributed(fs *pflag.FlagSet) error {
	if err := o.dist.Check(fs, "job-size"); err != nil {
		return err
	}
	if !o.dist.Distributed() {
		return nil
	}
	switch {
	case o.multicore, o.local:
		return cmdutil.Usagef("-M and --local run on this machine and -T on a batch system: give one of them")
	case fs.Changed("cores"), fs.Changed("block-size"):
		return cmdutil.Usagef("-c and -b set how this machine runs the problem; with -T every job runs on one core of its worker")
	case o.output == "-":
		return cmdutil.Usagef("-o - (standard output) keeps no checkpoint, which -T needs to collect the blocks: name a file")
	case o.jobSize < 0:
		return cmdutil.Usagef("--job-size %d: a block needs at least one cell", o.jobSize)
	}
	return nil
}

// distributed is what run hands to the distributed master: the problem as
// run has read it.
type distributed struct {
	cell       funcs.Cell
	region     wavefront.Rect
	value      func(x, y int) (funcs.Input, error)
	done       func(x, y int) bool
	sink       *countingWriter
	files      *wavefront.Dir // --files: also write R.x.y
	states     *wavefront.StateGrid
	checkpoint string
	msgs       io.Writer
}

// blocksFailed carries a distributed run's failed blocks to report.
type blocksFailed struct {
	*distmaster.FailedError
	notRun int
}

// runDistributed runs the region as blocks on the batch system of -T.
func runDistributed(ctx context.Context, o *options, p distributed) (multicore.WavefrontResult, error) {
	explain := io.Discard
	if o.verbose || o.explain {
		explain = distcmd.Prefixed(p.msgs, "wavefront: ")
	}
	d, closeDriver, err := o.dist.Open("wavefront", filepath.Dir(p.checkpoint), p.msgs)
	if err != nil {
		return multicore.WavefrontResult{}, err
	}
	defer closeDriver()
	var out distmaster.CellsWriter = p.sink
	if p.files != nil {
		out = fileWriter{p.files, p.sink}
	}
	cfg := o.dist.Config(d, distmaster.DefaultWorkDir(p.checkpoint), explain)
	cfg.InFlight = p.sink.page.SetRunning
	here := 0
	if o.dist.HybridByCells() {
		here = runtime.NumCPU()
	}
	res, err := distmaster.RunWavefront(ctx, cfg, &distmaster.Wavefront{
		Func:          distmaster.FunctionOf(p.cell.Info(), o.extraArgs, o.timeout),
		Cell:          p.cell,
		Region:        p.region,
		Value:         p.value,
		Done:          p.done,
		Out:           out,
		Checkpoint:    p.checkpoint,
		JobSize:       o.jobSize,
		CellTime:      o.cellTime,
		PlacedJobSize: o.placedBlock,
		States:        p.states,
		HereCores:     here,
	})
	if here > 0 {
		fmt.Fprintf(explain, "blocks of %d×%d: %d cells computed here, %d blocks sent to the cluster (%d of them taken back from its queue)\n",
			res.JobSize, res.JobSize, res.HereCells, res.Jobs, res.TakenBack)
	} else {
		fmt.Fprintf(explain, "blocks of %d×%d: %s\n", res.JobSize, res.JobSize, distcmd.Summary(d, res.TrackerCounts, res.MeanJob, res.HereJobs))
	}
	if res.Predicted > 0 && err == nil && o.dist.Cluster == nil {
		fmt.Fprintf(explain, "the model predicted %v; this run took %v\n", res.Predicted.Round(100*time.Millisecond), res.Elapsed.Round(100*time.Millisecond))
	}
	if o.cellTime != nil && err == nil && res.MeanJobCells > 0 {
		o.dist.SaveJobCost(res.MeanJob, res.MeanJobCells, o.cellTime.V)
	}
	if err == nil {
		o.dist.SaveDispatch(res.Dispatch)
	}
	if fe, ok := distcmd.IsFailed(err); ok {
		err = &blocksFailed{fe, res.NotRun}
	}
	return multicore.WavefrontResult{Computed: res.Computed, Skipped: res.Skipped}, err
}

// fileWriter also writes every cell as R.x.y (--files), before passing it
// on, as the multicore engine does.
type fileWriter struct {
	dir  *wavefront.Dir
	next *countingWriter
}

func (f fileWriter) Append(x, y int, v []byte) error {
	if _, err := f.dir.WriteCell(x, y, v); err != nil {
		return err
	}
	return f.next.Append(x, y, v)
}

func (f fileWriter) AppendRecords(recs []sparsematrix.Record) error {
	for _, r := range recs {
		if _, err := f.dir.WriteCell(r.X, r.Y, r.Value); err != nil {
			return err
		}
	}
	return f.next.AppendRecords(recs)
}
