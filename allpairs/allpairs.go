// Package allpairs is the All-Pairs abstraction: given two sets A and B and a
// function F, compute the matrix M[i,j] = F(A[i], B[j]).
//
// It reads the sets (directories or set lists), chooses how to run the
// problem, runs it, and writes one line per cell, "Aname<TAB>Bname<TAB>result",
// in no particular order, with backslash, tab, newline and carriage return
// in names and results escaped as \\, \t, \n and \r. It runs on this
// machine's cores with the blocked engine of package multicore, keeping
// every finished cell in a Checkpoint (a sparse-matrix file that records
// what its cells were computed from) so that a run stopped part way resumes.
// The distributed master (package distmaster) builds on the same sets and
// checkpoint: it cuts the matrix into blocks, runs each as a sub-problem
// (Problem.Region, its cells going to a checkpoint of its own) on a worker,
// gathers the cells in its checkpoint and turns that into lines with
// Checkpoint.WriteLines.
//
// Problem.Decide chooses the cores and how many items of A a block holds;
// the order the cells are then computed in (blocks of A, tiles of B that
// fit in the cache) is package multicore's Plan.
//
// It does not parse command lines, decide where a checkpoint file lives or
// choose between running here and distributing: the allpairs command does
// (package internal/allpairscmd; cmd/allpairs is only its main). It does not
// define functions (see package funcs).
package allpairs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/model"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/sparsematrix"
)

// Problem is one All-Pairs run. A, B and Func are required; the zero value of
// every other field means "choose for me".
type Problem struct {
	A, B *Set
	Func funcs.Pair

	// Cores is how many calls run at once; zero means all of this machine's.
	Cores int
	// BlockSize is how many items of A are taken together, kept in memory
	// (the page cache) while B's items pass them; zero means as many as fit
	// in half of the available memory.
	BlockSize int
	// Symmetric computes only M[i,j] with i <= j; A and B must be the same
	// set.
	Symmetric bool
	// Region restricts the run to a rectangle of the matrix (sub-problem
	// mode); nil means the whole matrix.
	Region *multicore.Region

	// Checkpoint, if set, keeps the finished cells (see OpenCheckpoint; it
	// must have been opened for this problem's A, B and function): the
	// cells of the region already in it are not computed again (their
	// lines are written first), and every cell computed is appended to it
	// the moment it is done, so that a crash loses only the cells being
	// computed.
	Checkpoint *Checkpoint

	// OnFailure, if set, is called for each cell whose function failed, as
	// soon as it fails. Calls are serialised.
	OnFailure func(*CellError)
	// OnProgress, if set, is called as cells finish with the number of cells
	// done so far (including failures). Calls are serialised.
	OnProgress func(done int64)
	// Timed, if set, hears of each unit of work as it ends (see
	// multicore.AllPairs.Timed).
	Timed func(u multicore.Unit, started, ended time.Time)
}

// CellError is a cell whose function failed.
type CellError struct {
	A, B Item
	Err  error // usually a *funcs.CallError
}

func (e *CellError) Error() string {
	return fmt.Sprintf("cell %s × %s: %v", e.A.Name, e.B.Name, e.Err)
}

func (e *CellError) Unwrap() error { return e.Err }

// FailedError is returned by Run when the run finished but some cells failed.
// Every cell that succeeded was written.
type FailedError struct {
	Failed, Cells int64
	First         *CellError // the first failure
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%d of %d cells failed; first: %v", e.Failed, e.Cells, e.First)
}

func (e *FailedError) Unwrap() error { return e.First }

// Plan is what Run decided: the size of the problem and how it runs.
type Plan struct {
	Region    multicore.Region
	Cells     int64
	Cores     int
	BlockSize int   // items of A per block
	Memory    int64 // bytes available when the block size was chosen, or 0
}

func (p Plan) String() string {
	cores := "cores"
	if p.Cores == 1 {
		cores = "core"
	}
	s := fmt.Sprintf("%d×%d region at (%d,%d), %d cells, on %d %s, blocks of %d items of A",
		p.Region.W, p.Region.H, p.Region.X, p.Region.Y, p.Cells, p.Cores, cores, p.BlockSize)
	if p.Memory > 0 {
		s += fmt.Sprintf(" (fit in half of %.1f GiB available)", float64(p.Memory)/(1<<30))
	}
	return s
}

// Summary reports a finished run.
type Summary struct {
	Plan
	Resumed      int64 // cells of the region found in the checkpoint
	Done, Failed int64 // cells computed by this run (the failed ones included)
	Elapsed      time.Duration
}

// Decide fills in everything the caller left for Run to choose, and checks
// the problem.
func (p *Problem) Decide() (Plan, error) {
	if p.A == nil || p.B == nil || p.Func == nil {
		return Plan{}, errors.New("allpairs: a problem needs A, B and a function")
	}
	if p.Symmetric && !p.A.Same(p.B) {
		return Plan{}, errors.New("--symmetric needs A and B to be the same set")
	}
	region := multicore.Region{W: len(p.A.Items), H: len(p.B.Items)}
	if p.Region != nil {
		region = *p.Region
		if region.X < 0 || region.Y < 0 || region.W <= 0 || region.H <= 0 ||
			region.X+region.W > len(p.A.Items) || region.Y+region.H > len(p.B.Items) {
			return Plan{}, fmt.Errorf("sub-problem x=%d y=%d w=%d h=%d is not inside the %d×%d matrix",
				region.X, region.Y, region.W, region.H, len(p.A.Items), len(p.B.Items))
		}
	}
	plan := Plan{Region: region, Cells: region.Cells(p.Symmetric), Cores: p.Cores, BlockSize: p.BlockSize}
	if plan.Cores <= 0 {
		plan.Cores = runtime.NumCPU()
	}
	if plan.BlockSize <= 0 {
		rows := p.A.Sizes()[region.X : region.X+region.W]
		mem, err := model.MemAvailable()
		if err != nil {
			mem = 1 << 30 // a conservative guess where /proc/meminfo is missing
		}
		plan.Memory = mem
		plan.BlockSize = model.AllPairsBlockSize(mem, rows)
	}
	return plan, nil
}

// Run computes the problem and writes one line per successful cell to out
// (nothing if out is nil: the cells then only go to the checkpoint). It
// keeps going when cells fail, and then returns a *FailedError; output is
// flushed before Run returns, whatever happens. If ctx is cancelled it stops
// early and returns ctx's error, having written every cell finished so far.
// A failure to write a result or to the checkpoint stops the run with that
// error.
func Run(ctx context.Context, p *Problem, out io.Writer) (Summary, error) {
	plan, err := p.Decide()
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Plan: plan}
	var w *lineWriter
	if out != nil {
		w = newLineWriter(out)
	}
	ck := p.Checkpoint
	var done func(i, j int) bool
	if ck != nil {
		done = ck.done()
		sum.Resumed = countDone(plan.Region, p.Symmetric, done)
		if w != nil && sum.Resumed > 0 {
			if _, err := ck.writeLines(w, &plan.Region); err != nil {
				return sum, err
			}
		}
	}
	if p.OnProgress != nil {
		p.OnProgress(sum.Resumed)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var firstFailure *CellError
	var writeErr error
	var recs []sparsematrix.Record
	start := time.Now()
	engine := &multicore.AllPairs{
		A: p.A.Paths(), B: p.B.Paths(), Func: p.Func,
		Cores: plan.Cores, BlockSize: plan.BlockSize, Region: plan.Region, Symmetric: p.Symmetric,
		BSizes: p.B.Sizes(),
		Done:   done,
		Timed:  p.Timed,
		Results: func(rs []multicore.CellResult) {
			if writeErr != nil {
				return
			}
			recs = recs[:0]
			for _, r := range rs {
				if r.Err == nil {
					recs = append(recs, sparsematrix.Record{X: r.I, Y: r.J, Value: r.Value})
					continue
				}
				sum.Failed++
				ce := &CellError{A: p.A.Items[r.I], B: p.B.Items[r.J], Err: r.Err}
				if firstFailure == nil {
					firstFailure = ce
				}
				if p.OnFailure != nil {
					p.OnFailure(ce)
				}
			}
			// The checkpoint first: it is what a crash leaves.
			if ck != nil {
				if writeErr = ck.addNew(recs); writeErr != nil {
					cancel()
					return
				}
			}
			if w != nil {
				for _, r := range recs {
					w.cell(p.A.Items[r.X].Name, p.B.Items[r.Y].Name, r.Value)
				}
				if w.err != nil {
					writeErr = fmt.Errorf("write results: %w", w.err)
					cancel()
					return
				}
			}
			sum.Done += int64(len(rs))
			if p.OnProgress != nil {
				p.OnProgress(sum.Resumed + sum.Done)
			}
		},
	}
	runErr := engine.Run(ctx)
	sum.Elapsed = time.Since(start)
	if w != nil {
		if err := w.flush(); err != nil && writeErr == nil {
			writeErr = fmt.Errorf("write results: %w", err)
		}
	}
	if ck != nil {
		if err := ck.Sync(); err != nil && writeErr == nil {
			writeErr = fmt.Errorf("checkpoint %s: %w", ck.Path(), err)
		}
	}
	switch {
	case writeErr != nil:
		return sum, writeErr
	case runErr != nil:
		return sum, runErr
	case sum.Failed > 0:
		return sum, &FailedError{Failed: sum.Failed, Cells: plan.Cells, First: firstFailure}
	}
	return sum, nil
}

// countDone counts the cells of r that done reports.
func countDone(r multicore.Region, symmetric bool, done func(i, j int) bool) int64 {
	var n int64
	for i := r.X; i < r.X+r.W; i++ {
		for j := r.Y; j < r.Y+r.H; j++ {
			if (!symmetric || i <= j) && done(i, j) {
				n++
			}
		}
	}
	return n
}

// lineWriter writes result lines, flushing at least once a second so that a
// killed run loses little.
type lineWriter struct {
	w         *bufio.Writer
	lastFlush time.Time
	err       error
}

func newLineWriter(out io.Writer) *lineWriter {
	return &lineWriter{w: bufio.NewWriterSize(out, 256<<10), lastFlush: time.Now()}
}

// cell writes the line "a<TAB>b<TAB>v", each field escaped (see escape).
func (lw *lineWriter) cell(a, b string, v []byte) {
	if lw.err != nil {
		return
	}
	lw.name(a)
	lw.w.WriteByte('\t')
	lw.name(b)
	lw.w.WriteByte('\t')
	escape(lw.w, v)
	if err := lw.w.WriteByte('\n'); err != nil {
		lw.err = err
		return
	}
	if now := time.Now(); now.Sub(lw.lastFlush) > time.Second {
		lw.err = lw.flush()
	}
}

func (lw *lineWriter) name(s string) {
	if strings.ContainsAny(s, specials) {
		escape(lw.w, []byte(s))
		return
	}
	lw.w.WriteString(s)
}

func (lw *lineWriter) flush() error {
	lw.lastFlush = time.Now()
	return lw.w.Flush()
}

// specials are the bytes escape escapes.
const specials = "\\\t\n\r"

// escape writes s with backslash, tab, newline and carriage return written
// as \\, \t, \n and \r, as wavefront export writes TSV: a result of several
// lines, or a name holding a tab, then stays one line of three fields.
func escape(w *bufio.Writer, s []byte) {
	for {
		i := bytes.IndexAny(s, specials)
		if i < 0 {
			w.Write(s)
			return
		}
		w.Write(s[:i])
		w.WriteByte('\\')
		w.WriteByte("\\tnr"[strings.IndexByte(specials, s[i])])
		s = s[i+1:]
	}
}
