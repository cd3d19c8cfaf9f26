package distmaster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/rightsize/rightsize/allpairs"
	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/model"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/sparsematrix"
)

// maxJobTime bounds a job's predicted running time when the models size
// jobs: a job lost with its worker, or a straggler, costs at most this
// much, and batch systems' wall-time limits are rarely shorter.
const maxJobTime = 5 * time.Minute

// AllPairs is an All-Pairs problem to run as blocks on a batch system. A,
// B, Func and Checkpoint are required.
type AllPairs struct {
	A, B *allpairs.Set
	Func Function
	// Pair is Func opened on this machine, for the brief benchmark that
	// sizes the jobs; nil assumes 0.1 s per cell, as CCTools does for
	// functions it cannot time.
	Pair funcs.Pair
	// CellTime, if set, is the function's time per cell as the caller
	// measured it (SampleAllPairs), so that the run does not sample it
	// again.
	CellTime *place.Value
	// PlacedJobCells, if set, is the job size (in cells) that automatic
	// placement's models chose; the run uses it unless JobW×JobH or an
	// earlier run's plan says otherwise.
	PlacedJobCells int
	// Symmetric computes only cells (i, j) with i <= j; A and B must be the
	// same set.
	Symmetric bool

	// Checkpoint holds every finished cell (x the index in A, y in B, from
	// 0), opened by the caller for this problem (allpairs.OpenCheckpoint,
	// which refuses or drops what another function or changed items
	// computed). Cells are appended as blocks come back; a re-run with the
	// same file computes only the blocks it lacks. Beside it,
	// Checkpoint.Path()+PlanSuffix records the job size.
	Checkpoint *allpairs.Checkpoint
	// JobW×JobH are the items of A × items of B in each job; zero means the
	// size of an earlier run on this checkpoint, otherwise what the models
	// choose from a benchmark of the function.
	JobW, JobH int

	// Out, if set, receives the result lines, "Aname<TAB>Bname<TAB>result",
	// assembled from the checkpoint at the end, also when blocks failed
	// (the cells of the blocks that finished), but not when ctx ended.
	Out io.Writer
	// Progress, if set, is called with the number of cells in the
	// checkpoint, once at the start and as blocks come back.
	Progress func(cells int64)
}

// AllPairsResult reports a run.
type AllPairsResult struct {
	Cells    int64 // cells of the problem
	Resumed  int64 // cells found in the checkpoint at the start
	Computed int64 // cells added by this run
	Written  int64 // result lines written to Out
	JobW     int   // job size used
	JobH     int
	Blocks   int // blocks of the problem
	Skipped  int // blocks already complete at the start
	TrackerCounts
	MeanJob      time.Duration // mean running time of the jobs that finished
	MeanJobCells float64       // mean cells of the jobs MeanJob counts
	HereJobs     int           // jobs done in the master's process
	// Dispatch is the least time from a job's submission to its start,
	// as the driver reported them (0 if it did not).
	Dispatch  time.Duration
	Predicted time.Duration // what the cluster model predicted, if it chose the job size
	Elapsed   time.Duration
}

// apBlock is a rectangle of the matrix: rows x..x+w-1 of A, columns
// y..y+h-1 of B.
type apBlock struct{ x, y, w, h int }

// RunAllPairs computes p on cfg's batch system: it loads the checkpoint,
// sizes the jobs, submits one job per block not yet complete — this program
// in sub-problem mode, with the block's items shipped and cached where the
// driver ships files — appends each block's cells to the checkpoint as it
// comes back, and finally writes the result lines to p.Out.
//
// A block whose job fails is submitted again up to cfg.Retries times, and
// then given up: the run goes on with the other blocks and returns a
// *FailedError, every finished cell kept. When ctx ends, running jobs are
// removed and ctx's error is returned; the checkpoint keeps what finished.
func RunAllPairs(ctx context.Context, cfg Config, p *AllPairs) (AllPairsResult, error) {
	start := time.Now()
	if err := cfg.fill(); err != nil {
		return AllPairsResult{}, err
	}
	cfg.chooseShape(ctx)
	if p.A == nil || p.B == nil || p.Checkpoint == nil {
		return AllPairsResult{}, errors.New("distmaster: an All-Pairs problem needs A, B and a checkpoint")
	}
	if p.Symmetric && !p.A.Same(p.B) {
		return AllPairsResult{}, errors.New("--symmetric needs A and B to be the same set")
	}
	files, err := newJobFiles(cfg.Driver, cfg.Program)
	if err != nil {
		return AllPairsResult{}, err
	}
	ck := p.Checkpoint
	r := &apRun{p: p, cfg: &cfg, files: files, n: len(p.A.Items), m: len(p.B.Items), ck: ck, gate: newCoreGate()}
	for _, it := range p.A.Items {
		r.aPaths = append(r.aPaths, it.Path)
	}
	for _, it := range p.B.Items {
		r.bPaths = append(r.bPaths, it.Path)
	}
	res := AllPairsResult{Cells: r.cells(), Resumed: ck.Cells()}
	if ck.Torn() > 0 {
		fmt.Fprintf(cfg.Explain, "ignored a torn last record of %d bytes in %s (cut short by a crash)\n", ck.Torn(), ck.Path())
	}
	if res.Resumed > 0 {
		fmt.Fprintf(cfg.Explain, "resuming: %d of %d cells are already in %s\n", res.Resumed, res.Cells, ck.Path())
	}
	if p.Progress != nil {
		p.Progress(res.Resumed)
	}

	problem := fmt.Sprintf("allpairs %d×%d symmetric=%v", r.n, r.m, p.Symmetric)
	old, err := readPlan(ck.Path(), problem, cfg.Explain)
	if err != nil {
		return res, err
	}
	switch {
	case p.JobW > 0 && p.JobH > 0:
		r.bw, r.bh = min(p.JobW, r.n), min(p.JobH, r.m)
	case old != nil:
		r.bw, r.bh = old.JobW, old.JobH
		fmt.Fprintf(cfg.Explain, "jobs of %d×%d items, as in the run that started %s\n", r.bw, r.bh, ck.Path())
	case p.PlacedJobCells > 0:
		r.bw, r.bh = r.jobShape(float64(p.PlacedJobCells))
		fmt.Fprintf(cfg.Explain, "jobs of %d×%d items, as placement chose\n", r.bw, r.bh)
	default:
		res.Predicted = r.chooseJobSize(ctx)
	}
	if p.Symmetric {
		// Square blocks on one grid: each is then on the diagonal, above
		// it or below it (and skipped).
		r.bw = min(r.bw, r.bh)
		r.bh = r.bw
	}
	res.JobW, res.JobH = r.bw, r.bh
	if err := writePlan(ck.Path(), plan{Problem: problem, JobW: r.bw, JobH: r.bh}); err != nil {
		return res, fmt.Errorf("checkpoint plan: %w", err)
	}

	var ready []int
	for y := 0; y < r.m; y += r.bh {
		for x := 0; x < r.n; x += r.bw {
			b := apBlock{x, y, min(r.bw, r.n-x), min(r.bh, r.m-y)}
			if p.Symmetric && b.x > b.y {
				continue // below the diagonal
			}
			res.Blocks++
			if r.missing(b) == 0 {
				res.Skipped++
				continue
			}
			r.blocks = append(r.blocks, b)
			ready = append(ready, len(r.blocks)-1)
		}
	}
	if err := startWork(&cfg, len(ready), res.Blocks); err != nil {
		return res, err
	}
	defer os.RemoveAll(cfg.WorkDir)
	st, runErr := runLoop(ctx, &cfg, r, ready, res.Blocks)
	res.TrackerCounts, res.MeanJob, res.MeanJobCells, res.HereJobs, res.Dispatch = st.TrackerCounts, st.MeanJob, st.MeanJobCells, st.HereJobs, st.Dispatch
	res.Computed = ck.Cells() - res.Resumed
	if err := ck.Sync(); err != nil && runErr == nil {
		runErr = fmt.Errorf("checkpoint %s: %w", ck.Path(), err)
	}
	if p.Out != nil && ctx.Err() == nil {
		var fe *FailedError
		if runErr == nil || errors.As(runErr, &fe) {
			res.Written, err = ck.WriteLines(p.Out, nil)
			if err != nil && runErr == nil {
				runErr = err
			}
		}
	}
	res.Elapsed = time.Since(start)
	return res, runErr
}

// apRun is one distributed All-Pairs run: the blockSource of runLoop.
type apRun struct {
	p      *AllPairs
	cfg    *Config
	files  jobFiles
	n, m   int
	bw, bh int
	blocks []apBlock
	ck     *allpairs.Checkpoint
	// The items' paths, and the cores' gate, for blocks done in process.
	aPaths, bPaths []string
	gate           coreGate
}

func (r *apRun) cells() int64 {
	if !r.p.Symmetric {
		return int64(r.n) * int64(r.m)
	}
	return int64(r.n) * int64(r.n+1) / 2
}

// missing counts the cells of b not in the checkpoint.
func (r *apRun) missing(b apBlock) int {
	n := 0
	for x := b.x; x < b.x+b.w; x++ {
		for y := b.y; y < b.y+b.h; y++ {
			if (!r.p.Symmetric || x <= y) && !r.ck.Has(x, y) {
				n++
			}
		}
	}
	return n
}

func (r *apRun) size(b int) int64 {
	bl := r.blocks[b]
	if !r.p.Symmetric {
		return int64(bl.w) * int64(bl.h)
	}
	n := int64(0) // the cells with x <= y
	for x := bl.x; x < bl.x+bl.w; x++ {
		n += int64(max(0, bl.y+bl.h-max(bl.y, x)))
	}
	return n
}

func (r *apRun) name(b int) string {
	bl := r.blocks[b]
	return fmt.Sprintf("x%d-y%d", bl.x, bl.y)
}

// job writes the block's set lists into dir and returns its job: this
// program in sub-problem mode on the block's items, the cells coming back
// as sparse-matrix records relative to the block.
func (r *apRun) job(b int, dir string) (*batch.Job, error) {
	bl := r.blocks[b]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	inputs, words, fn, err := r.files.base(r.p.Func)
	if err != nil {
		return nil, err
	}
	diagonal := r.p.Symmetric && bl.x == bl.y
	list := func(name, prefix string, items []allpairs.Item, first int) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		for k, it := range items {
			abs, err := filepath.Abs(it.Path)
			if err != nil {
				f.Close()
				return err
			}
			in := batch.File{Path: abs}
			if r.files.ship {
				// Items are cached on the worker under their local path,
				// so the row and column of blocks that share one send it
				// once; the remote name keeps the file's extension.
				in.Remote = prefix + "/" + strconv.Itoa(first+k) + "_" + plainName(filepath.Base(abs))
				in.Cache = true
			}
			inputs = append(inputs, in)
			if in.Remote != "" {
				w.WriteString(in.Remote)
			} else {
				w.WriteString(abs)
			}
			w.WriteByte('\n')
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		inputs = append(inputs, batch.File{Path: name})
		return f.Close()
	}
	if err := list("a.list", "A", r.p.A.Items[bl.x:bl.x+bl.w], bl.x); err != nil {
		return nil, err
	}
	bList := "b.list"
	if diagonal {
		bList = "a.list" // the same list twice: the sub-problem sees A = B
	} else if err := list(bList, "B", r.p.B.Items[bl.y:bl.y+bl.h], bl.y); err != nil {
		return nil, err
	}
	// The set lists hold only the block's items, so the sub-problem is
	// the whole of them: its cells come back relative to the block.
	words = append(words, "-M", "-W", strconv.Itoa(bl.w), "-H", strconv.Itoa(bl.h),
		"-c", strconv.Itoa(r.cfg.JobCores), "-q", "--matrix", "cells.matrix")
	if diagonal {
		words = append(words, "--symmetric")
	}
	words = append(words, fn, "a.list", bList)
	return &batch.Job{
		Name:      "allpairs-" + r.name(b),
		Command:   commandLine(words...),
		Dir:       dir,
		Inputs:    inputs,
		Outputs:   []batch.File{{Path: "cells.matrix"}},
		Resources: batch.Resources{Cores: r.cfg.JobCores, WallTime: r.cfg.wallTime},
		Category:  "allpairs",
		Do:        r.here(bl, dir),
	}, nil
}

// absorb appends the cells the block's job returned to the checkpoint,
// turning their block-relative coordinates into the matrix's; those before
// a bad record are kept.
func (r *apRun) absorb(b int, dir string) (bool, error) {
	bl := r.blocks[b]
	diagonal := r.p.Symmetric && bl.x == bl.y
	var cells []sparsematrix.Record
	err := scanCells(dir, func(rec sparsematrix.Record) error {
		if rec.X >= bl.w || rec.Y >= bl.h || diagonal && rec.X > rec.Y {
			return fmt.Errorf("cell (%d,%d) is outside the %d×%d block", rec.X, rec.Y, bl.w, bl.h)
		}
		cells = append(cells, sparsematrix.Record{X: bl.x + rec.X, Y: bl.y + rec.Y, Value: rec.Value})
		return nil
	})
	// The cells that came back reach the checkpoint in one write, as a
	// block's cells come back (a cell kept by an earlier run or attempt is
	// not added again), so that a master killed meanwhile leaves whole
	// blocks.
	_, werr := r.ck.AddRecords(cells)
	err = errors.Join(err, werr)
	if r.p.Progress != nil {
		r.p.Progress(r.ck.Cells())
	}
	return err == nil && r.missing(bl) == 0, err
}

// jobShape returns the items of A and of B of a job of about jobCells
// cells, as model.AllPairsJobShape (and so the placement's predictions)
// has it, no more than the problem's cells (half the matrix's when
// symmetric).
func (r *apRun) jobShape(jobCells float64) (w, h int) {
	return model.AllPairsJobShape(r.n, r.m, math.Min(jobCells, float64(r.cells())))
}

func (r *apRun) done(int) []int { return nil }

func (r *apRun) failed(int, *BlockError) {}

func (r *apRun) parents(int) []int { return nil }

// SampleAllPairs times fn on pairs of items spread over the matrix, for
// about budget, parallel calls at a time (place.SampleCalls): the pairs of
// a few items of A and of B, as a block of a run pairs them. A function
// that takes its inputs in memory gets them read before the calls are
// timed, as a run reads an item once for many cells: reading it at each
// call cost more than the call of a fast function.
func SampleAllPairs(ctx context.Context, budget time.Duration, cells int64, parallel int, a, b *allpairs.Set, fn funcs.Pair) place.Sample {
	inMemory := fn.Info().Kind.InMemory()
	// Up to 8 items of each set, spread over it, fewer when they are big.
	k := 8
	if inMemory {
		if perItem := float64(a.Bytes()+b.Bytes()) / float64(len(a.Items)+len(b.Items)); perItem > 0 {
			k = min(k, max(1, int(sampleMemory/2/perItem)))
		}
	}
	inputs := func(s *allpairs.Set) []funcs.Input {
		ins := make([]funcs.Input, min(len(s.Items), k))
		for i := range ins {
			it := s.Items[i*len(s.Items)/len(ins)]
			ins[i].Path = it.Path
			if inMemory {
				// A file that cannot be read gets the call's error.
				ins[i].Data, _ = os.ReadFile(it.Path)
			}
		}
		return ins
	}
	size := func(in funcs.Input) float64 {
		if inMemory {
			return float64(len(in.Data))
		}
		if fi, err := os.Stat(in.Path); err == nil {
			return float64(fi.Size())
		}
		return 0
	}
	as, bs := inputs(a), inputs(b)
	return place.SampleCalls(ctx, budget, cells, parallel, func(ctx context.Context, i int) (float64, error) {
		x, y := as[i%len(as)], bs[i/len(as)%len(bs)]
		_, err := fn.Call(ctx, x, y)
		return size(x) + size(y), err
	})
}

// sampleMemory bounds the bytes of the items SampleAllPairs holds.
const sampleMemory = 512 << 20

// chooseJobSize sizes the jobs with the models, from the function's
// measured cell time (or a sample of its own) and the cluster's inputs,
// explaining the choice. It returns the cluster model's prediction.
func (r *apRun) chooseJobSize(ctx context.Context) time.Duration {
	p, cfg := r.p, r.cfg
	itemBytes := float64(p.A.Bytes()+p.B.Bytes()) / float64(r.n+r.m)
	cellTime := place.Value{V: 0.1}
	switch {
	case p.CellTime != nil:
		cellTime = *p.CellTime
	case p.Pair != nil && r.n > 0 && r.m > 0:
		cellTime = SampleAllPairs(ctx, time.Second, r.cells(), runtime.NumCPU(), p.A, p.B, p.Pair).Value(2 * itemBytes)
	}
	fmt.Fprintf(cfg.Explain, "the function takes %s per cell (%s)\n", place.Seconds(cellTime.V), cellTime.Describe(time.Now()))
	d := dispatchLatency(cfg)
	hosts := hostBound(cfg)
	cells := r.cells()
	// The model's matrix has the problem's cells: for a symmetric problem,
	// a square of the same area.
	side := int(math.Sqrt(float64(cells)))
	nm, mm := r.n, r.m
	if p.Symmetric {
		nm, mm = side, max(int(cells)/max(side, 1), 1)
	}
	in := model.AllPairsInputs{
		N: nm, M: mm,
		CellTime:   cellTime.V / float64(cfg.JobCores), // a job's cells share its cores
		ItemBytes:  itemBytes,
		Dispatch:   d.V,
		MaxHosts:   hosts,
		MaxJobTime: cfg.jobTimeLimit().Seconds(),
		LocalCores: runtime.NumCPU(),
	}
	if cfg.Cluster != nil {
		in.Bandwidth = cfg.Cluster.Bandwidth.V
	}
	choice := model.ChooseAllPairs(in)
	fmt.Fprintf(cfg.Explain, "models (%d cells, dispatch %s for %s: %s; up to %d jobs at once): %v\n",
		cells, place.Seconds(d.V), cfg.Kind, d.Describe(time.Now()), hosts, choice)
	if !choice.Distribute && cfg.Cluster == nil {
		fmt.Fprintf(cfg.Explain, "  (running distributed all the same, as -T asks)\n")
	}
	// The model wants jobs as long as its limit allows, one per host: it
	// does not see that the last round, a lost worker and a straggler each
	// cost up to a job. So: at least four jobs per host, unless that would
	// make dispatch more than 2% of a job.
	jobCells := float64(choice.JobCells)
	why := "the model's size"
	if split := float64(cells) / float64(4*max(choice.Hosts, 1)); split < jobCells {
		jobCells, why = split, fmt.Sprintf("the model's %d cells cut so that each of its %d hosts gets at least 4 jobs", choice.JobCells, choice.Hosts)
	}
	if floor := 50 * d.V / cellTime.V; floor > jobCells {
		jobCells, why = floor, fmt.Sprintf("long enough that the %s dispatch is at most 2%% of a job", place.Seconds(d.V))
	}
	r.bw, r.bh = r.jobShape(jobCells)
	jobTime := time.Duration(float64(r.bw*r.bh) * cellTime.V * float64(time.Second))
	fmt.Fprintf(cfg.Explain, "jobs of %d×%d items, about %v each: %s\n", r.bw, r.bh, jobTime.Round(time.Millisecond), why)
	return time.Duration(choice.Cluster * float64(time.Second))
}
