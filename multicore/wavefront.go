package multicore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/proc"
	"github.com/rightsize/rightsize/wavefront"
	"github.com/rightsize/rightsize/wavefront/blocks"
)

// CellWriter receives the cells a Wavefront run computes. The sparse-matrix
// checkpoint (sparsematrix.Writer) is one. Append is called from many
// goroutines at once and must be safe for that; an error stops the run.
type CellWriter interface {
	Append(x, y int, value []byte) error
}

// Wavefront describes a run of the Wavefront engine on this machine's cores:
// R[x,y] = Cell(R[x-1,y], R[x,y-1], R[x-1,y-1]) for every cell of Region.
type Wavefront struct {
	Cell   funcs.Cell
	Region wavefront.Rect

	// Value returns a cell the run reads but does not compute: one of the
	// column left of Region or the row below it (corner included), or a
	// cell of Region that Done reports. It is called before any cell runs,
	// from one goroutine, once for each such cell that is still needed.
	Value func(x, y int) (funcs.Input, error)
	// Done reports the cells of Region that an earlier run computed (a
	// checkpoint); they are skipped. Nil means none.
	Done func(x, y int) bool
	// Out receives each computed cell once it is stored (after its R.x.y
	// file, if Files is set).
	Out CellWriter

	// Cores bounds the function calls in flight — goroutines for in-process
	// functions, child processes for programs. Zero means runtime.NumCPU().
	Cores int
	// Block is the side of the square blocks a core takes at a time. Zero
	// means 1: every cell is scheduled on its own, the most parallel choice,
	// and the right one unless a cell costs only microseconds.
	Block int
	// Files, if not nil, is the R directory in which every computed cell is
	// also written as R.x.y; programs are then given those files.
	Files *wavefront.Dir
	// TempDir is where a program's input files are kept when Files is nil;
	// "" means FastTempDir(). Each value is written once, shared by the three
	// cells that read it, and removed when they are done. They live in a
	// directory rightsize-wavefront-* there, removed at the end of the run
	// or, should the process die (kill -9 included), by a keeper process;
	// a run also removes those that dead runs left behind.
	TempDir string
	// SpillDir, if set, is a directory of the caller's, which the caller
	// removes, in which a program's input files are written instead: the
	// run then makes no directory of its own and starts no keeper, which
	// for a small region (a distributed master's block, done in its own
	// process) can cost more than the cells.
	SpillDir string
	// States, if not nil, follows every cell of Region (running, complete,
	// failed) for progress bars and pictures.
	States *wavefront.StateGrid
	// Timed, if set, is called as each block ends (a cell, unless Block
	// is larger), with when it started and ended and whether a cell of it
	// failed, for a report of the run. It is called from many goroutines
	// at once.
	Timed func(b wavefront.Rect, started, ended time.Time, failed bool)
}

// WavefrontResult counts what a run did.
type WavefrontResult struct {
	Computed int // cells computed by this run
	Skipped  int // cells of Region that were already done
}

// FastTempDir returns where to keep the small temporary files of program
// calls: $TMPDIR if it is set, otherwise /dev/shm when it is a writable
// directory (memory-backed on Linux), otherwise os.TempDir(). Creating and
// removing a small file per call on a busy disk can cost as much as the
// fork and exec themselves.
func FastTempDir() string {
	if os.Getenv("TMPDIR") != "" {
		return os.TempDir()
	}
	const shm = "/dev/shm"
	if st, err := os.Stat(shm); err == nil && st.IsDir() && unix.Access(shm, unix.W_OK) == nil {
		return shm
	}
	return os.TempDir()
}

// RunWavefront computes the cells of w.Region that are not done yet,
// each the moment its three inputs exist, keeping w.Cores calls in flight
// whenever that many cells are ready. It holds in memory only the values
// that cells still to run will read.
//
// A cell whose function fails is reported, with everything that depends on
// it, in a *wavefront.FailedError once every other cell has run. Cancelling
// ctx, or an error from w.Out, stops the run early with that error; the
// cells already given to w.Out are finished and kept.
func RunWavefront(ctx context.Context, w Wavefront) (WavefrontResult, error) {
	e, err := newEngine(w)
	if err != nil {
		return WavefrontResult{}, err
	}
	defer e.cleanup()
	if err := e.load(); err != nil {
		return WavefrontResult{}, err
	}
	return e.run(ctx)
}

// engine is one run. Values live in vals, indexed over the region plus its
// left column and bottom row; refs counts, for each, the cells still to run
// that read it, and the last of them drops it.
type engine struct {
	w        Wavefront
	ext      wavefront.Rect
	vals     []funcs.Input
	spilled  []bool // vals[i].Path is a temporary file to remove
	refs     []atomic.Int32
	done     []bool // over ext: done before the run (boundary included)
	inMemory bool
	spillMu  sync.Mutex
	spillDir string
	keeper   proc.Keeper // removes spillDir if the process dies
	skipped  int
	computed atomic.Int64
}

func newEngine(w Wavefront) (*engine, error) {
	if err := w.Region.Validate(); err != nil {
		return nil, err
	}
	if w.Cell == nil || w.Out == nil || w.Value == nil {
		return nil, errors.New("multicore: Wavefront needs Cell, Value and Out")
	}
	if w.Cores <= 0 {
		w.Cores = runtime.NumCPU()
	}
	if w.Block <= 0 {
		w.Block = 1
	}
	r := w.Region
	e := &engine{
		w:        w,
		ext:      wavefront.Rect{X: r.X - 1, Y: r.Y - 1, W: r.W + 1, H: r.H + 1},
		inMemory: w.Cell.Info().Kind.InMemory(),
	}
	n := e.ext.Cells()
	e.vals = make([]funcs.Input, n)
	e.spilled = make([]bool, n)
	e.refs = make([]atomic.Int32, n)
	e.done = make([]bool, n)
	return e, nil
}

func (e *engine) index(x, y int) int { return (y-e.ext.Y)*e.ext.W + (x - e.ext.X) }

// load marks the cells that are done, counts the readers of every cell and
// fetches the values that cells still to run will read.
func (e *engine) load() error {
	r := e.w.Region
	for y := e.ext.Y; y < e.ext.Y+e.ext.H; y++ {
		for x := e.ext.X; x < e.ext.X+e.ext.W; x++ {
			if !r.Contains(x, y) || (e.w.Done != nil && e.w.Done(x, y)) {
				e.done[e.index(x, y)] = true
			}
		}
	}
	for y := e.ext.Y; y < e.ext.Y+e.ext.H; y++ {
		for x := e.ext.X; x < e.ext.X+e.ext.W; x++ {
			i := e.index(x, y)
			var n int32
			for _, c := range [3][2]int{{x + 1, y}, {x, y + 1}, {x + 1, y + 1}} {
				if r.Contains(c[0], c[1]) && !e.done[e.index(c[0], c[1])] {
					n++
				}
			}
			e.refs[i].Store(n)
			if r.Contains(x, y) && e.done[i] {
				e.skipped++
				if e.w.States != nil {
					e.w.States.Set(x, y, wavefront.Complete)
				}
			}
			if n == 0 || !e.done[i] {
				continue
			}
			v, err := e.w.Value(x, y)
			if err != nil {
				return err
			}
			if err := e.store(x, y, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// store keeps cell (x, y)'s value in the form the function reads: bytes for
// an in-process function, a file for a program.
func (e *engine) store(x, y int, v funcs.Input) error {
	i := e.index(x, y)
	switch {
	case e.inMemory && v.Data == nil && v.Path != "":
		data, err := os.ReadFile(v.Path)
		if err != nil {
			return fmt.Errorf("cell (%d,%d): %w", x, y, err)
		}
		v = funcs.Input{Data: data}
	case !e.inMemory && v.Path == "":
		dir, err := e.spill()
		if err != nil {
			return err
		}
		path := filepath.Join(dir, strconv.Itoa(x)+"."+strconv.Itoa(y))
		if err := os.WriteFile(path, v.Data, 0o600); err != nil {
			return fmt.Errorf("cell (%d,%d): %w", x, y, err)
		}
		v = funcs.Input{Path: path}
		e.spilled[i] = true
	}
	e.vals[i] = v
	return nil
}

// release records that one reader of cell i has run, and drops the value
// after the last.
func (e *engine) release(i int) {
	if e.refs[i].Add(-1) != 0 {
		return
	}
	if e.spilled[i] {
		os.Remove(e.vals[i].Path)
	}
	e.vals[i] = funcs.Input{}
}

// spill returns the directory for the values given to a program as files,
// creating it at the first call. It is registered with a keeper, which
// removes it should this process die before cleanup; and the directories
// that dead runs left in the same place are removed first.
func (e *engine) spill() (string, error) {
	if e.w.SpillDir != "" {
		return e.w.SpillDir, nil
	}
	e.spillMu.Lock()
	defer e.spillMu.Unlock()
	if e.spillDir == "" {
		root := e.w.TempDir
		if root == "" {
			root = FastTempDir()
		}
		dir, err := e.keeper.MkdirTemp(root, "rightsize-wavefront-")
		if err != nil {
			return "", err
		}
		e.spillDir = dir
	}
	return e.spillDir, nil
}

func (e *engine) cleanup() {
	if e.spillDir != "" {
		e.keeper.RemoveDir(e.spillDir)
	}
	e.keeper.Close()
}

// run drives the scheduler with w.Cores goroutines. Each takes a ready
// block, computes its cells in order, and reports it; the scheduler sits
// behind a mutex, so that a core that finishes a block takes the next one
// itself without a hop through another goroutine.
func (e *engine) run(ctx context.Context) (WavefrontResult, error) {
	sched, err := blocks.NewScheduler(e.w.Region, e.w.Block, e.w.Block, func(x, y int) bool {
		return e.done[e.index(x, y)]
	})
	if err != nil {
		return WavefrontResult{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		stopped  bool
		fatal    error
		failures []*wavefront.CellError
	)
	stopWaiting := context.AfterFunc(ctx, func() {
		mu.Lock()
		stopped = true
		cond.Broadcast()
		mu.Unlock()
	})
	defer stopWaiting()

	var wg sync.WaitGroup
	for range e.w.Cores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			for !stopped {
				b, ok := sched.Next()
				if !ok {
					if sched.Finished() {
						cond.Broadcast()
						return
					}
					cond.Wait()
					continue
				}
				mu.Unlock()
				started := time.Now()
				cellErr, err := e.runBlock(ctx, b)
				if e.w.Timed != nil && err == nil {
					e.w.Timed(b, started, time.Now(), cellErr != nil)
				}
				mu.Lock()
				switch {
				case err != nil:
					if fatal == nil && ctx.Err() == nil {
						fatal = err
					}
					stopped = true
					cancel()
				case cellErr != nil:
					failures = append(failures, cellErr)
					sched.Failed(b)
				default:
					sched.Done(b)
				}
				cond.Broadcast()
			}
		}()
	}
	wg.Wait()

	res := WavefrontResult{Computed: int(e.computed.Load()), Skipped: e.skipped}
	switch {
	case fatal != nil:
		return res, fatal
	case ctx.Err() != nil:
		return res, context.Cause(ctx)
	case len(failures) > 0:
		notRun := e.w.Region.Cells() - res.Computed - res.Skipped - len(failures)
		return res, &wavefront.FailedError{Failed: failures, NotRun: notRun}
	}
	return res, nil
}

// runBlock computes the cells of block b that are not done, row by row. A
// function failure ends the block and comes back as the first result; the
// second is an error that stops the run (cancellation, a failed write).
func (e *engine) runBlock(ctx context.Context, b wavefront.Rect) (*wavefront.CellError, error) {
	st := e.w.States
	if st != nil {
		e.setStates(b, wavefront.Running)
	}
	// An in-process function cannot be stopped once called, and a context
	// that can be cancelled costs it a goroutine per call; the check before
	// each cell is what cancellation needs.
	callCtx := ctx
	if e.inMemory {
		callCtx = context.WithoutCancel(ctx)
	}
	// A shared library that crashes the process names the cell it computed.
	var label *funcs.Label
	if e.w.Cell.Info().Kind == funcs.SharedLibrary {
		label = new(funcs.Label)
		callCtx = funcs.WithLabel(callCtx, label)
	}
	for y := b.Y; y < b.Y+b.H; y++ {
		for x := b.X; x < b.X+b.W; x++ {
			i := e.index(x, y)
			if e.done[i] {
				continue
			}
			if err := ctx.Err(); err != nil {
				e.resetStates(b)
				return nil, err
			}
			left, below, diag := e.index(x-1, y), e.index(x, y-1), e.index(x-1, y-1)
			if label != nil {
				label.SetCell(x, y)
			}
			out, err := e.w.Cell.Call(callCtx, e.vals[left], e.vals[below], e.vals[diag])
			if err != nil {
				e.resetStates(b)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if st != nil {
					st.Set(x, y, wavefront.Failed)
				}
				return &wavefront.CellError{X: x, Y: y, Err: err}, nil
			}
			if err := e.finish(x, y, out); err != nil {
				e.resetStates(b)
				return nil, err
			}
			e.release(left)
			e.release(below)
			e.release(diag)
		}
	}
	return nil, nil
}

// finish stores a computed cell: its R.x.y file if asked for, the value the
// cells above and to the right will read, then the record in w.Out.
func (e *engine) finish(x, y int, out []byte) error {
	v := funcs.Input{Data: out}
	if e.w.Files != nil {
		path, err := e.w.Files.WriteCell(x, y, out)
		if err != nil {
			return fmt.Errorf("cell (%d,%d): %w", x, y, err)
		}
		v.Path = path
		if !e.inMemory {
			v.Data = nil
		}
	}
	if e.refs[e.index(x, y)].Load() > 0 {
		if err := e.store(x, y, v); err != nil {
			return err
		}
	}
	if err := e.w.Out.Append(x, y, out); err != nil {
		return err
	}
	e.done[e.index(x, y)] = true
	e.computed.Add(1)
	if e.w.States != nil {
		e.w.States.Set(x, y, wavefront.Complete)
	}
	return nil
}

func (e *engine) setStates(b wavefront.Rect, s wavefront.CellState) {
	for y := b.Y; y < b.Y+b.H; y++ {
		for x := b.X; x < b.X+b.W; x++ {
			if !e.done[e.index(x, y)] {
				e.w.States.Set(x, y, s)
			}
		}
	}
}

// resetStates marks the cells of a block that stopped part-way as not
// running any more.
func (e *engine) resetStates(b wavefront.Rect) {
	if e.w.States != nil {
		e.setStates(b, wavefront.Incomplete)
	}
}
