package allpairscmd

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/distcmd"
	"github.com/rightsize/rightsize/model/place"
)

// worthPlacing reports whether a decision (and the sample of the function
// it takes) serves a purpose: to choose where to run, with a cluster to
// weigh against this machine; to size the jobs of -T, unless --job-size
// or an earlier run's plan fixes them; or to say, with --explain or -v.
func (o *options) worthPlacing(cl *place.Cluster, args []string, info funcs.Info) bool {
	switch {
	case o.explain, o.verbose && !o.dist.Distributed():
		return true
	case !o.dist.Distributed():
		return cl != nil
	case o.jobSize != "":
		return false
	}
	path, _ := o.checkpointPath(args, info, nil)
	_, err := os.Stat(path + distmaster.PlanSuffix)
	return path == "" || err != nil
}

// runPlaced decides where the problem runs — this machine, the cluster the
// user has, or both; or, with -T, measures that cluster and runs there —
// runs it, and records the prediction against the time it took.
func runPlaced(ctx context.Context, o *options, reg *funcs.Registry, args []string, s cmdutil.Streams) error {
	a, b, fn, err := open(o, reg, args)
	if err != nil {
		return err
	}
	info := fn.Info()
	if o.symmetric && !a.Same(b) {
		fn.Close()
		return cmdutil.Usagef("--symmetric needs A and B to be the same set")
	}
	cl, err := o.dist.FindCluster(ctx)
	if err != nil {
		fn.Close()
		return err
	}
	if !o.worthPlacing(cl, args, info) {
		fn.Close()
		if o.dist.Distributed() {
			return runDistributed(ctx, o, reg, args, s)
		}
		return run(ctx, o, reg, args, s)
	}
	cells := int64(len(a.Items)) * int64(len(b.Items))
	if o.symmetric {
		cells = int64(len(a.Items)) * int64(len(a.Items)+1) / 2
	}
	itemBytes := float64(a.Bytes()+b.Bytes()) / float64(max(len(a.Items)+len(b.Items), 1))
	cores := o.cores
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	var cellTime place.Value
	if cells > 0 {
		cellTime = distmaster.SampleAllPairs(ctx, distcmd.SampleBudget(cl), cells, cores, a, b, fn).Value(2 * itemBytes)
	}
	fn.Close()
	if cl, err = o.dist.Probe(ctx, cl, float64(cells)*cellTime.V/float64(cores)); err != nil {
		return err
	}

	hist := place.DefaultHistory()
	key := distcmd.FunctionKey(info, o.extraArgs)
	cs, err := hist.Corrections("allpairs", key)
	if err != nil {
		fmt.Fprintf(s.Err, "allpairs: warning: %v\n", err)
	}
	d := place.DecideAllPairs(place.AllPairsWork{
		N: len(a.Items), M: len(b.Items), Cells: cells, CellTime: cellTime, ItemBytes: itemBytes,
	}, place.Machine{Cores: place.Value{V: float64(cores), Source: distcmd.CoresSource(o.cores)}}, cl, cs, time.Now())
	o.dist.Place(&d)
	distcmd.ExplainDecision(s.Err, "allpairs", o.explain, o.verbose, &d)

	start := time.Now()
	if d.Mode == place.Multicore {
		err = run(ctx, o, reg, args, s)
	} else {
		o.cellTime, o.jobCells = &cellTime, d.JobCells
		err = runDistributed(ctx, o, reg, args, s)
	}
	if err == nil {
		distcmd.RecordRun(s.Err, "allpairs", o.verbose || o.explain, hist, key, &d, time.Since(start), o.resumed > 0)
	}
	return err
}
