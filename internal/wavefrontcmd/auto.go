package wavefrontcmd

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/distcmd"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/wavefront"
)

// placed reports whether the run is placed by the models, or with -T
// measures its cluster for them: not with -M or --local, nor for a
// sub-problem (-X -Y -W -H, which is what a distributed master's jobs run),
// nor without a checkpoint that distributed blocks can be collected in.
func (o *options) placed() bool {
	sub := o.set["X"] || o.set["Y"] || o.set["W"] || o.set["H"]
	return !o.multicore && !o.local && !sub && o.output != "-"
}

// place decides where the region's cells (todo of them still to compute)
// run — this machine, the cluster the user has, or both; or, with -T,
// measures that cluster — explains it on msgs, and sets the flags for it.
// It returns nil when there was nothing to decide, and the value of the
// region's first cell if timing the function computed it.
func (o *options) place(ctx context.Context, cell funcs.Cell, region wavefront.Rect, value func(x, y int) (funcs.Input, error), todo int, msgs io.Writer) (*place.Decision, []byte, error) {
	cl, err := o.dist.FindCluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A decision, and the sample of the function it takes, serves to
	// choose where to run (with a cluster to weigh against this
	// machine), to size -T's blocks (unless --job-size or, on a re-run,
	// the plan fixes them), or to say (--explain, -v).
	switch {
	case o.explain, o.verbose && !o.dist.Distributed():
	case !o.dist.Distributed() && cl == nil, o.dist.Distributed() && (o.jobSize > 0 || todo < region.Cells()):
		return nil, nil, nil
	}
	cores := o.cores
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	var tau place.Value
	var first []byte
	if todo > 0 {
		s, v, err := distmaster.SampleWavefront(ctx, distcmd.SampleBudget(cl), int64(todo), cores, cell, region.X, region.Y, value)
		if err != nil {
			return nil, nil, err
		}
		tau, first = s.Value(s.MeanBytes), v
	}
	if cl, err = o.dist.Probe(ctx, cl, float64(todo)*tau.V/float64(cores)); err != nil {
		return nil, nil, err
	}
	cs, err := place.DefaultHistory().Corrections("wavefront", o.historyKey(cell))
	if err != nil {
		fmt.Fprintf(msgs, "wavefront: warning: %v\n", err)
	}
	d := place.DecideWavefront(place.WavefrontWork{N: max(region.W, region.H), CellTime: tau},
		place.Machine{Cores: place.Value{V: float64(cores), Source: distcmd.CoresSource(o.cores)}}, cl, cs, time.Now())
	o.dist.Place(&d)
	distcmd.ExplainDecision(msgs, "wavefront", o.explain, o.verbose, &d)
	if d.Mode != place.Multicore {
		o.cellTime, o.placedBlock = &tau, d.Block
	}
	return &d, first, nil
}

// historyKey names this run's function in the run history.
func (o *options) historyKey(cell funcs.Cell) string {
	return distcmd.FunctionKey(cell.Info(), o.extraArgs)
}
