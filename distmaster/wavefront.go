package distmaster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/model"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
	"github.com/rightsize/rightsize/wavefront/blocks"
)

// Wavefront is a Wavefront problem to run as blocks on a batch system, in
// the shape of multicore.Wavefront. Func, Region, Value, Out and
// Checkpoint are required.
type Wavefront struct {
	Func Function
	// Cell is Func opened on this machine, for the brief benchmark that
	// sizes the blocks; nil assumes 0.1 s per cell.
	Cell   funcs.Cell
	Region wavefront.Rect

	// Value returns a cell the run reads but does not compute: one of the
	// column left of Region or the row below it, or a cell of Region that
	// Done reports.
	Value func(x, y int) (funcs.Input, error)
	// Done reports the cells of Region that an earlier run computed; nil
	// means none. A block whose cells are all done is not run.
	Done func(x, y int) bool
	// Out receives each cell of each block that comes back, once: a
	// block's cells in one AppendRecords call, so that a master killed
	// meanwhile leaves whole blocks in the checkpoint.
	Out CellsWriter
	// Checkpoint is the path of the sparse-matrix file Out writes to; the
	// plan (the block size, so that a re-run resumes with the same blocks)
	// is kept beside it, in Checkpoint+PlanSuffix.
	Checkpoint string
	// JobSize is the side of each job's square block; zero means the size
	// of an earlier run on this checkpoint, otherwise what the model
	// chooses from a benchmark of the function.
	JobSize int
	// CellTime, if set, is the function's time per cell as the caller
	// measured it, so that the run does not sample it again.
	CellTime *place.Value
	// PlacedJobSize, if set, is the block side that automatic placement's
	// models chose; the run uses it unless JobSize or an earlier run's
	// plan says otherwise.
	PlacedJobSize int
	// HereCores, if positive, makes the run hybrid by cells: that many of
	// this machine's cores compute cells with Cell, one at a time as soon
	// as their inputs are done, while the batch system takes the whole
	// blocks that become ready while the cores are busy (see runHybrid).
	// Cell is then required, and the driver should not itself run jobs on
	// this machine (no batch.Hybrid, no Work Queue worker of the master's
	// own).
	HereCores int

	// States, if set, follows every cell: running while its block's job is
	// out, complete, or failed.
	States *wavefront.StateGrid
	// Progress, if set, is called with the number of cells computed by
	// this run so far.
	Progress func(computed int)
}

// WavefrontResult reports a run.
type WavefrontResult struct {
	Computed int // cells computed by this run
	Skipped  int // cells of Region that were already done
	NotRun   int // cells not run because they depend on a failed block
	JobSize  int
	Blocks   int // blocks of the region
	TrackerCounts
	MeanJob      time.Duration
	MeanJobCells float64 // mean cells of the jobs MeanJob counts
	HereJobs     int     // jobs done in the master's process
	HereCells    int     // cells computed by this machine's cores (HereCores)
	TakenBack    int     // blocks taken back from the batch system's queue (HereCores)
	// Dispatch is the least time from a block job's submission to its
	// start, as the driver reported them (0 if it did not).
	Dispatch  time.Duration
	Predicted time.Duration // what the model predicted, if it chose the block size
	Elapsed   time.Duration
}

// RunWavefront computes w's region on cfg's batch system: a block is
// submitted the moment the blocks it reads from are done (wavefront's
// Scheduler), as a job running this program in sub-problem mode with the
// block's left column and bottom row shipped to it; each block's cells go
// to w.Out as it comes back. With w.HereCores, the run is hybrid by cells
// instead (see Wavefront.HereCores).
//
// Failing blocks are retried up to cfg.Retries times and then given up,
// with every block that depends on them; the run returns a *FailedError
// once nothing else can run. When ctx ends, running jobs are removed and
// ctx's error is returned.
func RunWavefront(ctx context.Context, cfg Config, w *Wavefront) (WavefrontResult, error) {
	start := time.Now()
	if err := cfg.fill(); err != nil {
		return WavefrontResult{}, err
	}
	cfg.chooseShape(ctx)
	if err := w.Region.Validate(); err != nil {
		return WavefrontResult{}, err
	}
	if w.Value == nil || w.Out == nil || w.Checkpoint == "" {
		return WavefrontResult{}, errors.New("distmaster: a Wavefront problem needs Value, Out and a checkpoint")
	}
	files, err := newJobFiles(cfg.Driver, cfg.Program)
	if err != nil {
		return WavefrontResult{}, err
	}
	rg := w.Region
	r := &wfRun{w: w, cfg: &cfg, files: files, have: newBitset(rg.Cells()), edges: map[sparsematrix.Key][]byte{}, gate: newCoreGate()}
	var res WavefrontResult
	if w.Done != nil {
		for y := rg.Y; y < rg.Y+rg.H; y++ {
			for x := rg.X; x < rg.X+rg.W; x++ {
				if w.Done(x, y) {
					r.have.set(r.index(x, y))
					res.Skipped++
				}
			}
		}
	}

	r.problem = fmt.Sprintf("wavefront %v", rg)
	old, err := readPlan(w.Checkpoint, r.problem, cfg.Explain)
	if err != nil {
		return res, err
	}
	switch {
	case w.JobSize > 0:
		r.b = w.JobSize
	case old != nil:
		r.b = old.JobW
		fmt.Fprintf(cfg.Explain, "blocks of %d×%d cells, as in the run that started %s\n", r.b, r.b, w.Checkpoint)
	case w.PlacedJobSize > 0:
		r.b = w.PlacedJobSize
		fmt.Fprintf(cfg.Explain, "blocks of %d×%d cells, as placement chose\n", r.b, r.b)
		if w.CellTime != nil {
			r.tau = *w.CellTime
			r.refit = unknownWidth(cfg.Cluster)
		}
	default:
		res.Predicted = r.chooseBlock(ctx)
	}
	res.JobSize = r.b
	if err := writePlan(w.Checkpoint, plan{Problem: r.problem, JobW: r.b, JobH: r.b}); err != nil {
		return res, fmt.Errorf("checkpoint plan: %w", err)
	}

	r.nx = (rg.W + r.b - 1) / r.b
	var runErr error
	if w.HereCores > 0 {
		if w.Cell == nil {
			return res, errors.New("distmaster: a hybrid Wavefront by cells needs the function opened here")
		}
		runErr = r.runHybrid(ctx, w.HereCores, &res)
	} else {
		runErr = r.runBlocks(ctx, &res)
	}
	res.Computed = r.computed
	var fe *FailedError
	if errors.As(runErr, &fe) {
		res.NotRun = rg.Cells() - res.Skipped - r.computed - r.failedCells
	}
	res.Elapsed = time.Since(start)
	return res, runErr
}

// runBlocks runs the Wavefront by blocks, each a job of the batch system's
// submitted as the Scheduler finds it ready.
func (r *wfRun) runBlocks(ctx context.Context, res *WavefrontResult) error {
	var err error
	r.sched, err = blocks.NewScheduler(r.w.Region, r.b, r.b, func(x, y int) bool { return r.have.has(r.index(x, y)) })
	if err != nil {
		return err
	}
	res.Blocks = r.sched.Blocks()
	ready := r.released()
	if err := startWork(r.cfg, res.Blocks-r.sched.Counts().Done, res.Blocks); err != nil {
		return err
	}
	defer os.RemoveAll(r.cfg.WorkDir)
	st, err := runLoop(ctx, r.cfg, r, ready, res.Blocks)
	res.TrackerCounts, res.MeanJob, res.MeanJobCells, res.HereJobs, res.Dispatch = st.TrackerCounts, st.MeanJob, st.MeanJobCells, st.HereJobs, st.Dispatch
	return err
}

// wfRun is one distributed Wavefront run: the blockSource of runLoop.
type wfRun struct {
	w     *Wavefront
	cfg   *Config
	files jobFiles
	b     int // block side
	nx    int // blocks per row
	sched *blocks.Scheduler
	// have marks the cells of the region that are done.
	have bitset
	// edges holds the top row and right column of each block computed by
	// this run: the only cells later blocks read.
	edges       map[sparsematrix.Key][]byte
	computed    int
	failedCells int
	gate        coreGate // for blocks done in process
	// vals holds the cells a hybrid run by cells (runHybrid) has and
	// still needs for the cells it computes here; nil otherwise.
	vals map[sparsematrix.Key][]byte
	// problem names the run in its plan.
	problem string
	// tau is the function's time per cell the block side was chosen for
	// (zero if the caller fixed the side); refit says that side was
	// chosen for a cluster of no known width, so that a hybrid run on
	// Work Queue chooses it again for the workers that join (runHybrid).
	tau   place.Value
	refit bool
}

// unknownWidth reports whether cluster c, for which a block side is
// chosen, has no width measured or named: no hosts, or hosts assumed.
func unknownWidth(c *place.Cluster) bool {
	return c == nil || c.Hosts.Assumed() || c.Slots() == 0
}

func (r *wfRun) index(x, y int) int {
	rg := r.w.Region
	return (y-rg.Y)*rg.W + (x - rg.X)
}

// block returns the rectangle of block number b.
func (r *wfRun) block(b int) wavefront.Rect {
	rg := r.w.Region
	x, y := rg.X+(b%r.nx)*r.b, rg.Y+(b/r.nx)*r.b
	return wavefront.Rect{X: x, Y: y, W: min(r.b, rg.X+rg.W-x), H: min(r.b, rg.Y+rg.H-y)}
}

// released takes the blocks the scheduler has made ready.
func (r *wfRun) released() []int {
	var ready []int
	rg := r.w.Region
	for {
		rect, ok := r.sched.Next()
		if !ok {
			return ready
		}
		ready = append(ready, (rect.Y-rg.Y)/r.b*r.nx+(rect.X-rg.X)/r.b)
	}
}

func (r *wfRun) size(b int) int64 {
	rect := r.block(b)
	return int64(rect.W) * int64(rect.H)
}

func (r *wfRun) name(b int) string {
	rect := r.block(b)
	return fmt.Sprintf("x%d-y%d", rect.X, rect.Y)
}

// value returns the bytes of a cell that a block reads.
func (r *wfRun) value(x, y int) ([]byte, error) {
	if v, ok := r.edges[sparsematrix.Key{X: x, Y: y}]; ok {
		return v, nil
	}
	in, err := r.w.Value(x, y)
	if err != nil {
		return nil, err
	}
	if in.Data != nil || in.Path == "" {
		return in.Data, nil
	}
	return os.ReadFile(in.Path)
}

// job writes the block's inputs — the column left of it and the row below
// it, corner included — as the sparse matrix R/R.matrix in dir, and
// returns its job: this program in sub-problem mode on that R directory.
func (r *wfRun) job(b int, dir string) (*batch.Job, error) {
	rect := r.block(b)
	if err := os.MkdirAll(filepath.Join(dir, "R"), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "R", wavefront.MatrixFile))
	if err != nil {
		return nil, err
	}
	m := sparsematrix.NewWriter(f)
	write := func(x, y int) error {
		v, err := r.input(x, y)
		if err != nil {
			return fmt.Errorf("input cell (%d,%d): %w", x, y, err)
		}
		return m.Append(x, y, v)
	}
	for y := rect.Y - 1; y < rect.Y+rect.H && err == nil; y++ {
		err = write(rect.X-1, y)
	}
	for x := rect.X; x < rect.X+rect.W && err == nil; x++ {
		err = write(x, rect.Y-1)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	inputs, words, fn, err := r.files.base(r.w.Func)
	if err != nil {
		return nil, err
	}
	inputs = append(inputs, batch.File{Path: filepath.Join("R", wavefront.MatrixFile)})
	words = append(words, "-M",
		"-X", strconv.Itoa(rect.X), "-Y", strconv.Itoa(rect.Y), "-W", strconv.Itoa(rect.W), "-H", strconv.Itoa(rect.H),
		"-c", strconv.Itoa(r.cfg.JobCores), "-o", "cells.matrix", fn, "R")
	r.setStates(rect, wavefront.Running)
	return &batch.Job{
		Name:      "wavefront-" + r.name(b),
		Command:   commandLine(words...),
		Dir:       dir,
		Inputs:    inputs,
		Outputs:   []batch.File{{Path: "cells.matrix"}},
		Resources: batch.Resources{Cores: r.cfg.JobCores, WallTime: r.cfg.wallTime},
		Category:  "wavefront",
		Do:        r.here(rect, dir),
	}, nil
}

// setStates marks the cells of rect that are not done yet.
func (r *wfRun) setStates(rect wavefront.Rect, s wavefront.CellState) {
	if r.w.States == nil {
		return
	}
	for y := rect.Y; y < rect.Y+rect.H; y++ {
		for x := rect.X; x < rect.X+rect.W; x++ {
			if !r.have.has(r.index(x, y)) {
				r.w.States.Set(x, y, s)
			}
		}
	}
}

// A CellsWriter takes cells one at a time or many in one call.
type CellsWriter interface {
	multicore.CellWriter
	AppendRecords([]sparsematrix.Record) error
}

// absorb passes the cells the block's job returned to Out, in one call,
// keeping the block's top row and right column for the blocks that read
// them.
func (r *wfRun) absorb(b int, dir string) (bool, error) {
	rect := r.block(b)
	lastX, lastY := rect.Last()
	var fresh []sparsematrix.Record
	err := scanCells(dir, func(rec sparsematrix.Record) error {
		if !rect.Contains(rec.X, rec.Y) {
			return fmt.Errorf("cell (%d,%d) is outside the block %v", rec.X, rec.Y, rect)
		}
		if rec.X == lastX || rec.Y == lastY {
			r.edges[sparsematrix.Key{X: rec.X, Y: rec.Y}] = rec.Value
		}
		if i := r.index(rec.X, rec.Y); !r.have.has(i) { // else kept by an earlier run or attempt
			r.have.set(i) // a cell twice in the file is kept once
			fresh = append(fresh, rec)
			if r.vals != nil {
				r.vals[sparsematrix.Key{X: rec.X, Y: rec.Y}] = rec.Value
			}
		}
		return nil
	})
	if werr := r.w.Out.AppendRecords(fresh); werr != nil {
		for _, rec := range fresh {
			r.have.clear(r.index(rec.X, rec.Y))
		}
		return false, &writeError{werr}
	}
	r.computed += len(fresh)
	if r.w.States != nil {
		for _, rec := range fresh {
			r.w.States.Set(rec.X, rec.Y, wavefront.Complete)
		}
	}
	if r.w.Progress != nil {
		r.w.Progress(r.computed)
	}
	return err == nil && r.missing(rect) == 0, err
}

func (r *wfRun) done(b int) []int {
	r.sched.Done(r.block(b))
	return r.released()
}

func (r *wfRun) failed(b int, _ *BlockError) {
	rect := r.block(b)
	r.sched.Failed(rect)
	r.setStates(rect, wavefront.Failed)
	r.failedCells += r.missing(rect)
}

// parents returns the blocks left of and below block b: the diagonal one
// comes before both.
func (r *wfRun) parents(b int) []int {
	var ps []int
	if b%r.nx > 0 {
		ps = append(ps, b-1)
	}
	if b >= r.nx {
		ps = append(ps, b-r.nx)
	}
	return ps
}

// missing counts the cells of rect that are not done.
func (r *wfRun) missing(rect wavefront.Rect) int {
	n := 0
	for y := rect.Y; y < rect.Y+rect.H; y++ {
		for x := rect.X; x < rect.X+rect.W; x++ {
			if !r.have.has(r.index(x, y)) {
				n++
			}
		}
	}
	return n
}

// chooseBlock picks the block side with the Wavefront model, from the
// function's measured cell time (or a sample of its own, on the region's
// first cell) and the cluster's inputs, explaining the choice. It returns
// the model's prediction.
func (r *wfRun) chooseBlock(ctx context.Context) time.Duration {
	w, cfg := r.w, r.cfg
	rg := w.Region
	tau := place.Value{V: 0.1}
	switch {
	case w.CellTime != nil:
		tau = *w.CellTime
	case w.Cell != nil:
		if s, _, err := SampleWavefront(ctx, time.Second, int64(rg.Cells()), runtime.NumCPU(), w.Cell, rg.X, rg.Y, w.Value); err == nil {
			tau = s.Value(s.MeanBytes)
		}
	}
	fmt.Fprintf(cfg.Explain, "the function takes %s per cell (%s)\n", place.Seconds(tau.V), tau.Describe(time.Now()))
	r.tau = tau
	d := dispatchLatency(cfg)
	nodes := hostBound(cfg)
	n := max(rg.W, rg.H)
	if w.HereCores > 0 {
		return r.chooseHybridBlock(n, tau, d, nodes-cfg.LocalCores)
	}
	choice := model.ChooseWavefront(n, runtime.NumCPU(), nodes, cfg.JobCores, tau.V, d.V)
	fmt.Fprintf(cfg.Explain, "models (%d×%d cells, dispatch %s for %s: %s; up to %d jobs at once, %d cores each): %v\n",
		rg.W, rg.H, place.Seconds(d.V), cfg.Kind, d.Describe(time.Now()), nodes, cfg.JobCores, choice)
	if !choice.Distribute && cfg.Cluster == nil {
		fmt.Fprintf(cfg.Explain, "  (running distributed all the same, as -T asks)\n")
	}
	r.b = choice.Block
	if limit := int(math.Sqrt(cfg.jobTimeLimit().Seconds() / tau.V)); r.b > limit {
		r.b = max(limit, 1)
	}
	fmt.Fprintf(cfg.Explain, "blocks of %d×%d cells (about %v per job, none longer than %v)\n",
		r.b, r.b, time.Duration(float64(r.b*r.b)*tau.V*float64(time.Second)).Round(time.Millisecond), cfg.jobTimeLimit())
	return time.Duration(choice.Cluster * float64(time.Second))
}

// chooseHybridBlock picks the block side of a hybrid run by cells with
// the model that simulates it (place.HybridWavefront), for n cells on a
// side of tau each, a dispatch d and jobs at once on the cluster,
// explaining the choice. It returns the model's prediction.
func (r *wfRun) chooseHybridBlock(n int, tau, d place.Value, jobs int) time.Duration {
	cfg := r.cfg
	c := cfg.Cluster
	if c == nil {
		k := max(cfg.JobCores, 1)
		c = &place.Cluster{Kind: cfg.Kind, Hosts: place.Value{V: float64(max(jobs, 1))},
			CoresPerHost: place.Value{V: float64(k)}, Dispatch: d}
	}
	r.refit = unknownWidth(cfg.Cluster)
	secs, b, detail := place.HybridWavefront(n, r.w.HereCores, tau.V, c)
	fmt.Fprintf(cfg.Explain, "hybrid model (%d×%d cells, dispatch %s for %s: %s): predicted %s, %s\n",
		r.w.Region.W, r.w.Region.H, place.Seconds(d.V), cfg.Kind, d.Describe(time.Now()), place.Seconds(secs), detail)
	r.b = b
	if limit := int(math.Sqrt(cfg.jobTimeLimit().Seconds() / tau.V)); r.b > limit {
		r.b = max(limit, 1)
	}
	fmt.Fprintf(cfg.Explain, "blocks of %d×%d cells for the cluster (about %v per job, none longer than %v)\n",
		r.b, r.b, time.Duration(float64(r.b*r.b)*tau.V*float64(time.Second)).Round(time.Millisecond), cfg.jobTimeLimit())
	if math.IsInf(secs, 0) {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

// SampleWavefront times cell on the cell (x, y), whose three neighbours
// value returns, for about budget, parallel calls at a time
// (place.SampleCalls). It also returns
// the cell's value from the last call that succeeded (nil if none did),
// so that the run need not compute it again.
func SampleWavefront(ctx context.Context, budget time.Duration, cells int64, parallel int, cell funcs.Cell, x, y int, value func(x, y int) (funcs.Input, error)) (place.Sample, []byte, error) {
	var in [3]funcs.Input
	var bytes float64
	for i, c := range [][2]int{{x - 1, y}, {x, y - 1}, {x - 1, y - 1}} {
		var err error
		if in[i], err = value(c[0], c[1]); err != nil {
			return place.Sample{}, nil, err
		}
		bytes += float64(len(in[i].Data))
	}
	var label funcs.Label // for a .so that crashes
	label.SetCell(x, y)
	var mu sync.Mutex
	var last []byte
	s := place.SampleCalls(ctx, budget, cells, parallel, func(ctx context.Context, _ int) (float64, error) {
		out, err := cell.Call(funcs.WithLabel(ctx, &label), in[0], in[1], in[2])
		if err == nil {
			mu.Lock()
			last = out
			mu.Unlock()
		}
		return bytes, err
	})
	return s, last, nil
}
