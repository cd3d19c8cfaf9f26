package distmaster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
)

// A block job carries, besides its command, the same work done in the
// master's process (batch.Job.Do), with the function the master opened:
// a local driver opened with batch.Options.InProcess, or the master's own
// Work Queue worker (batch/wq's Driver.InProcess) — this machine's share
// of a hybrid run — then computes the block without starting this
// program, loading the function and reading the inputs again, which can
// cost as much as the block's cells. Either way the cells end up in the
// job directory's cells.matrix, relative to the block, for absorb.
//
// The blocks done here share this machine's cores at the grain of calls,
// as a multicore run does: each may call the function on every core, and
// a gate lets no more calls run at once than there are cores. A block
// left alone at the end of a run so finishes on all of them, not on one.

// coreGate bounds the function calls in flight across the blocks done in
// this process.
type coreGate chan struct{}

func newCoreGate() coreGate { return make(coreGate, runtime.NumCPU()) }

// call runs f once a core is free, unless ctx ends first.
func (g coreGate) call(ctx context.Context, f func() ([]byte, error)) ([]byte, error) {
	select {
	case g <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-g }()
	return f()
}

// gatedPair is an All-Pairs function whose calls pass a coreGate.
type gatedPair struct {
	funcs.Pair
	gate coreGate
}

func (p gatedPair) Call(ctx context.Context, a, b funcs.Input) ([]byte, error) {
	return p.gate.call(ctx, func() ([]byte, error) { return p.Pair.Call(ctx, a, b) })
}

// gatedBlockPair is a gatedPair that keeps its function's block form
// (funcs.BlockPair): a block call takes one core, as a cell's does.
type gatedBlockPair struct {
	gatedPair
	block funcs.BlockPair
}

func (p gatedBlockPair) CallBlock(ctx context.Context, a, b []funcs.Input, out [][]byte) error {
	_, err := p.gate.call(ctx, func() ([]byte, error) { return nil, p.block.CallBlock(ctx, a, b, out) })
	return err
}

// pair returns p with its calls passing g, and its block calls if it
// has them.
func (g coreGate) pair(p funcs.Pair) funcs.Pair {
	if bp, ok := p.(funcs.BlockPair); ok {
		return gatedBlockPair{gatedPair{p, g}, bp}
	}
	return gatedPair{p, g}
}

// gatedCell is a Wavefront function whose calls pass a coreGate.
type gatedCell struct {
	funcs.Cell
	gate coreGate
}

func (c gatedCell) Call(ctx context.Context, x, y, d funcs.Input) ([]byte, error) {
	return c.gate.call(ctx, func() ([]byte, error) { return c.Cell.Call(ctx, x, y, d) })
}

// cellsFile creates dir's cells.matrix and calls fill with a writer on
// it, returning fill's error, or the file's. The writes are buffered: the
// file is read only once the job has ended, and a crash loses the job.
func cellsFile(dir string, fill func(w *sparsematrix.Writer) error) error {
	f, err := os.Create(filepath.Join(dir, "cells.matrix"))
	if err != nil {
		return err
	}
	buf := bufio.NewWriterSize(f, 1<<16)
	err = fill(sparsematrix.NewWriter(buf))
	if ferr := buf.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// here returns the in-process work of block bl's job in dir, or nil when
// the master has not opened the function.
func (r *apRun) here(bl apBlock, dir string) func(context.Context) error {
	if r.p.Pair == nil {
		return nil
	}
	return func(ctx context.Context) error {
		return cellsFile(dir, func(w *sparsematrix.Writer) error {
			var failed error
			ap := multicore.AllPairs{
				A: r.aPaths, B: r.bPaths, BSizes: r.p.B.Sizes(),
				Func:      r.gate.pair(r.p.Pair),
				Cores:     cap(r.gate),
				Region:    multicore.Region{X: bl.x, Y: bl.y, W: bl.w, H: bl.h},
				Symmetric: r.p.Symmetric,
				Results: func(cells []multicore.CellResult) {
					for _, c := range cells {
						err := c.Err
						if err == nil {
							err = w.Append(c.I-bl.x, c.J-bl.y, c.Value)
						}
						if err != nil && failed == nil {
							// As the job's command: the other cells are
							// kept, and the job fails.
							failed = fmt.Errorf("cell (%d,%d): %w", c.I, c.J, err)
						}
					}
				},
			}
			return errors.Join(ap.Run(ctx), failed)
		})
	}
}

// here returns the in-process work of the job for block rect, whose
// inputs job wrote in dir, or nil when the master has not opened the
// function.
func (r *wfRun) here(rect wavefront.Rect, dir string) func(context.Context) error {
	if r.w.Cell == nil {
		return nil
	}
	return func(ctx context.Context) error {
		// The inputs as the job's command reads them: not r.value, which
		// the run loop's goroutine changes meanwhile.
		bound, err := sparsematrix.Load(filepath.Join(dir, "R", wavefront.MatrixFile))
		if err != nil {
			return err
		}
		return cellsFile(dir, func(w *sparsematrix.Writer) error {
			_, err := multicore.RunWavefront(ctx, multicore.Wavefront{
				Cell:   gatedCell{r.w.Cell, r.gate},
				Region: rect,
				Value: func(x, y int) (funcs.Input, error) {
					v, ok := bound[sparsematrix.Key{X: x, Y: y}]
					if !ok {
						return funcs.Input{}, fmt.Errorf("input cell (%d,%d) is not among the block's inputs", x, y)
					}
					return funcs.Input{Data: v}, nil
				},
				Out:      w,
				Cores:    cap(r.gate),
				SpillDir: dir,
			})
			return err
		})
	}
}
