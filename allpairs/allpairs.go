// Package allpairs is the All-Pairs abstraction: given two sets A and B and a
// function F, compute the matrix M[i,j] = F(A[i], B[j]).
//
// It reads the sets (directories or set lists), chooses how to run the
// problem, runs it, and writes one line per cell, "Aname<TAB>Bname<TAB>result",
// in no particular order. It runs on this machine's cores with the blocked
// engine of package multicore. The distributed master (package distmaster)
// builds on the same sets: it cuts the matrix into blocks, runs each as a
// sub-problem (Problem.Region with Problem.Matrix) on a worker, keeps the
// cells in a sparse-matrix checkpoint and turns that into lines with
// WriteLines.
//
// It does not parse command lines (see cmd/allpairs) or define functions
// (see package funcs).
package allpairs

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/model"
	"github.com/rightsize/rightsize/multicore"
)

// Problem is one All-Pairs run. A, B and Func are required; the zero value of
// every other field means "choose for me".
type Problem struct {
	A, B *Set
	Func funcs.Pair

	// Cores is how many calls run at once; zero means all of this machine's.
	Cores int
	// BlockSize is how many items of A are held in memory at once; zero
	// means as many as fit in half of the available memory.
	BlockSize int
	// Symmetric computes only M[i,j] with i <= j; A and B must be the same
	// set.
	Symmetric bool
	// Region restricts the run to a rectangle of the matrix (sub-problem
	// mode); nil means the whole matrix.
	Region *multicore.Region

	// Matrix, if set, receives the cells as sparse-matrix records (x the
	// index in A, y the index in B) instead of lines on Run's writer: the
	// form a distributed master reads back from a worker, where a result
	// holding a newline or a tab must not be cut apart.
	Matrix multicore.CellWriter

	// OnFailure, if set, is called for each cell whose function failed, as
	// soon as it fails. Calls are serialised.
	OnFailure func(*CellError)
	// OnProgress, if set, is called as cells finish with the number of cells
	// done so far (including failures). Calls are serialised.
	OnProgress func(done int64)
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
	s := fmt.Sprintf("%d×%d region at (%d,%d), %d cells, on %d cores, blocks of %d items of A",
		p.Region.W, p.Region.H, p.Region.X, p.Region.Y, p.Cells, p.Cores, p.BlockSize)
	if p.Memory > 0 {
		s += fmt.Sprintf(" (fit in half of %.1f GiB available)", float64(p.Memory)/(1<<30))
	}
	return s
}

// Summary reports a finished run.
type Summary struct {
	Plan
	Done, Failed int64
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

// Run computes the problem and writes one line per successful cell to out.
// It keeps going when cells fail, and then returns a *FailedError; output is
// flushed before Run returns, whatever happens. If ctx is cancelled it stops
// early and returns ctx's error, having written every cell finished so far.
func Run(ctx context.Context, p *Problem, out io.Writer) (Summary, error) {
	plan, err := p.Decide()
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Plan: plan}
	w := newLineWriter(out)
	var firstFailure *CellError
	var matrixErr error
	start := time.Now()
	engine := &multicore.AllPairs{
		A: p.A.Paths(), B: p.B.Paths(), Func: p.Func,
		Cores: plan.Cores, BlockSize: plan.BlockSize, Region: plan.Region, Symmetric: p.Symmetric,
		BSizes: p.B.Sizes(),
		Results: func(rs []multicore.CellResult) {
			for _, r := range rs {
				a, b := p.A.Items[r.I], p.B.Items[r.J]
				if r.Err != nil {
					sum.Failed++
					ce := &CellError{A: a, B: b, Err: r.Err}
					if firstFailure == nil {
						firstFailure = ce
					}
					if p.OnFailure != nil {
						p.OnFailure(ce)
					}
					continue
				}
				if p.Matrix != nil {
					if matrixErr == nil {
						matrixErr = p.Matrix.Append(r.I, r.J, r.Value)
					}
					continue
				}
				w.cell(a.Name, b.Name, r.Value)
			}
			sum.Done += int64(len(rs))
			if p.OnProgress != nil {
				p.OnProgress(sum.Done)
			}
		},
	}
	runErr := engine.Run(ctx)
	sum.Elapsed = time.Since(start)
	if err := w.flush(); err != nil {
		return sum, fmt.Errorf("write results: %w", err)
	}
	if err := cmp.Or(w.err, matrixErr); err != nil {
		return sum, fmt.Errorf("write results: %w", err)
	}
	if runErr != nil {
		return sum, runErr
	}
	if sum.Failed > 0 {
		return sum, &FailedError{Failed: sum.Failed, Cells: plan.Cells, First: firstFailure}
	}
	return sum, nil
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

func (lw *lineWriter) cell(a, b string, v []byte) {
	if lw.err != nil {
		return
	}
	lw.w.WriteString(a)
	lw.w.WriteByte('\t')
	lw.w.WriteString(b)
	lw.w.WriteByte('\t')
	lw.w.Write(v)
	if err := lw.w.WriteByte('\n'); err != nil {
		lw.err = err
		return
	}
	if now := time.Now(); now.Sub(lw.lastFlush) > time.Second {
		lw.err = lw.flush()
	}
}

func (lw *lineWriter) flush() error {
	lw.lastFlush = time.Now()
	return lw.w.Flush()
}
