// Package wavefront is the Wavefront abstraction of seed 000: a matrix R
// whose boundary row R[i,0] and column R[0,j] are given and whose other cells
// are R[i,j] = F(R[i-1,j], R[i,j-1], R[i-1,j-1]).
//
// It holds what every Wavefront engine shares, without running anything:
//
//   - [Rect], the cells a run computes (the whole problem, or one
//     sub-problem of it);
//   - [Scheduler], the dependency-driven block scheduler: an event-driven
//     state machine with no I/O, no clock and no goroutines, that releases a
//     block the moment the blocks it reads from are done. The multicore
//     engine drives it with goroutines; the distributed master drives it with
//     tasks on workers;
//   - [Dir], the R directory of boundary files R.i.0 and R.0.j (and R.x.y
//     result files), and how the problem's size follows from it;
//   - [StateGrid], the state of every cell, and its progress picture
//     (seed 000, Fig. 3.8);
//   - [Checkpoint], the sparse-matrix file a run keeps its cells in: what a
//     resumed run already has, checked against the function and the inputs
//     it was computed from (the file format is package sparsematrix's).
//
// It does not call functions: the engines do, the multicore one in package
// multicore and the distributed master in package distmaster, each given a
// Checkpoint's Value, Done and Append (see the Checkpoint example).
package wavefront

import (
	"fmt"

	"github.com/rightsize/rightsize/wavefront/blocks"
)

// Rect is a rectangle of cells: x in X … X+W-1, y in Y … Y+H-1. Cells are
// numbered from 1; row 0 and column 0 are the boundary. It is package
// blocks' Rect, where the block scheduler lives.
type Rect = blocks.Rect

// CellError is the failure of the function on one cell.
type CellError struct {
	X, Y int
	Err  error
}

func (e *CellError) Error() string { return fmt.Sprintf("cell (%d,%d): %v", e.X, e.Y, e.Err) }
func (e *CellError) Unwrap() error { return e.Err }

// FailedError reports a run that went on to the end but could not compute
// some cells. The cells that did not depend on them were computed and
// written. It has the name and the meaning of allpairs.FailedError,
// distmaster.FailedError and makeflow.FailedError.
type FailedError struct {
	Failed []*CellError // in the order they failed
	NotRun int          // cells never run because they depend on a failed one
}

func (e *FailedError) Error() string {
	s := "1 cell failed"
	if len(e.Failed) != 1 {
		s = fmt.Sprintf("%d cells failed", len(e.Failed))
	}
	them := "them"
	if len(e.Failed) == 1 {
		them = "it"
	}
	switch {
	case e.NotRun == 1:
		s += " and 1 cell that depends on " + them + " was not run"
	case e.NotRun > 1:
		s += fmt.Sprintf(" and %d cells that depend on %s were not run", e.NotRun, them)
	}
	if len(e.Failed) > 0 {
		s += "; first " + e.Failed[0].Error()
	}
	return s
}

// Unwrap returns the first failure, or nil.
func (e *FailedError) Unwrap() error {
	if len(e.Failed) == 0 {
		return nil
	}
	return e.Failed[0]
}
