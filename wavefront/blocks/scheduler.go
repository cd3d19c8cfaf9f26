// Package blocks releases the blocks of a Wavefront in dependency order: a
// state machine without I/O, clock or functions, shared by the multicore
// engine (package multicore), the distributed master (package distmaster)
// and the simulator (model/sim). Rect is the Wavefront's rectangle of
// cells (package wavefront's Rect is this one).
package blocks

import (
	"container/heap"
	"fmt"
)

// Scheduler releases the blocks of a Wavefront in dependency order. The
// region is cut into blocks of BW×BH cells (smaller at the top and right
// edges); a block is ready once the blocks to its left, below and
// diagonally left-below — the ones holding its input cells — are done. No
// lock-step diagonals: a block is released by the event that completes its
// last dependency.
//
// A Scheduler is a state machine: its driver reports events (Done, Failed)
// and asks for work (Next); it does no I/O and keeps no time. Among ready
// blocks Next prefers the lowest anti-diagonal, because those unlock the
// most work downstream. It is not safe for concurrent use; a driver with
// several goroutines guards it with a mutex.
type Scheduler struct {
	region Rect
	bw, bh int
	nx, ny int

	state   []blockState
	pending []int8 // dependencies not yet done
	ready   diagHeap
	counts  Counts
}

type blockState uint8

const (
	waiting blockState = iota
	ready
	running
	done
	failed
)

// Counts are the numbers of blocks in each state.
type Counts struct {
	Waiting int // not all dependencies are done
	Ready   int // can run; not handed out by Next yet
	Running int // handed out by Next, not reported yet
	Done    int
	Failed  int
}

// NewScheduler returns a Scheduler for the cells of region in blocks of
// bw×bh. isDone, if not nil, reports cells an earlier run finished (a
// checkpoint): a block whose cells are all done starts done, and a block
// with some done cells still runs, its engine skipping them.
func NewScheduler(region Rect, bw, bh int, isDone func(x, y int) bool) (*Scheduler, error) {
	if err := region.Validate(); err != nil {
		return nil, err
	}
	if bw < 1 || bh < 1 {
		return nil, fmt.Errorf("block size %d×%d: blocks need at least one cell", bw, bh)
	}
	s := &Scheduler{
		region: region,
		bw:     bw,
		bh:     bh,
		nx:     (region.W + bw - 1) / bw,
		ny:     (region.H + bh - 1) / bh,
	}
	n := s.nx * s.ny
	s.state = make([]blockState, n)
	s.pending = make([]int8, n)
	s.ready.w = s.nx
	for i := range n {
		if isDone != nil && allDone(s.block(i), isDone) {
			s.state[i] = done
			s.counts.Done++
		}
	}
	for i := range n {
		if s.state[i] == done {
			continue
		}
		for _, d := range s.deps(i) {
			if d >= 0 && s.state[d] != done {
				s.pending[i]++
			}
		}
		s.counts.Waiting++
		if s.pending[i] == 0 {
			s.release(i)
		}
	}
	return s, nil
}

func allDone(b Rect, isDone func(x, y int) bool) bool {
	for y := b.Y; y < b.Y+b.H; y++ {
		for x := b.X; x < b.X+b.W; x++ {
			if !isDone(x, y) {
				return false
			}
		}
	}
	return true
}

// Region returns the rectangle the Scheduler covers.
func (s *Scheduler) Region() Rect { return s.region }

// Blocks returns the number of blocks.
func (s *Scheduler) Blocks() int { return len(s.state) }

// Counts returns the number of blocks in each state.
func (s *Scheduler) Counts() Counts { return s.counts }

// Finished reports whether nothing is running and nothing more can run:
// every block is done, or the rest wait on failed blocks.
func (s *Scheduler) Finished() bool { return s.counts.Running == 0 && s.counts.Ready == 0 }

// Next hands out a ready block, marking it running, or reports false if no
// block is ready.
func (s *Scheduler) Next() (Rect, bool) {
	if s.ready.Len() == 0 {
		return Rect{}, false
	}
	i := heap.Pop(&s.ready).(int)
	s.state[i] = running
	s.counts.Ready--
	s.counts.Running++
	return s.block(i), true
}

// Done reports that block b (as returned by Next) is complete, releasing the
// blocks that were waiting only for it. Reporting a done block again does
// nothing, so that a block computed twice (a re-sent straggler) is harmless.
// A Rect that is not one of the Scheduler's blocks is a programming error
// and panics.
func (s *Scheduler) Done(b Rect) {
	i := s.index(b)
	switch s.state[i] {
	case done:
		return
	case running:
		s.counts.Running--
	case ready:
		s.counts.Ready-- // done elsewhere before Next handed it out
		s.ready.remove(i)
	case waiting:
		s.counts.Waiting--
	case failed:
		s.counts.Failed--
	}
	s.state[i] = done
	s.counts.Done++
	for _, d := range s.dependents(i) {
		if d < 0 {
			continue
		}
		s.pending[d]--
		if s.pending[d] == 0 && s.state[d] == waiting {
			s.release(d)
		}
	}
}

// Failed reports that block b could not be computed. The blocks that depend
// on it, directly or not, are never released. A block already done (by
// another copy of it) stays done.
func (s *Scheduler) Failed(b Rect) {
	i := s.index(b)
	if s.state[i] == done {
		return
	}
	if s.state[i] != running {
		panic(fmt.Sprintf("wavefront: Failed(%v) on a block that is not running", b))
	}
	s.counts.Running--
	s.state[i] = failed
	s.counts.Failed++
}

func (s *Scheduler) release(i int) {
	s.state[i] = ready
	s.counts.Waiting--
	s.counts.Ready++
	heap.Push(&s.ready, i)
}

// block returns the rectangle of block i.
func (s *Scheduler) block(i int) Rect {
	bx, by := i%s.nx, i/s.nx
	x, y := s.region.X+bx*s.bw, s.region.Y+by*s.bh
	return Rect{
		X: x, Y: y,
		W: min(s.bw, s.region.X+s.region.W-x),
		H: min(s.bh, s.region.Y+s.region.H-y),
	}
}

// index returns the number of block b.
func (s *Scheduler) index(b Rect) int {
	dx, dy := b.X-s.region.X, b.Y-s.region.Y
	if dx < 0 || dy < 0 || dx%s.bw != 0 || dy%s.bh != 0 || dx/s.bw >= s.nx || dy/s.bh >= s.ny {
		panic(fmt.Sprintf("wavefront: %v is not a block of %v in blocks of %d×%d", b, s.region, s.bw, s.bh))
	}
	i := dy/s.bh*s.nx + dx/s.bw
	if s.block(i) != b {
		panic(fmt.Sprintf("wavefront: %v is not a block of %v in blocks of %d×%d", b, s.region, s.bw, s.bh))
	}
	return i
}

// deps returns the blocks left, below and diagonally left-below block i, or
// -1 where there is none (the inputs come from outside the region).
func (s *Scheduler) deps(i int) [3]int {
	bx, by := i%s.nx, i/s.nx
	return [3]int{s.at(bx-1, by), s.at(bx, by-1), s.at(bx-1, by-1)}
}

// dependents returns the blocks right, above and diagonally right-above.
func (s *Scheduler) dependents(i int) [3]int {
	bx, by := i%s.nx, i/s.nx
	return [3]int{s.at(bx+1, by), s.at(bx, by+1), s.at(bx+1, by+1)}
}

func (s *Scheduler) at(bx, by int) int {
	if bx < 0 || by < 0 || bx >= s.nx || by >= s.ny {
		return -1
	}
	return by*s.nx + bx
}

// diagHeap holds indices into a grid w wide, row-major, and pops them by
// anti-diagonal, then from the bottom: the order in which a Wavefront's
// inputs are done, so what it pops unblocks the most soonest.
type diagHeap struct {
	w     int
	items []int
}

func (h *diagHeap) Len() int { return len(h.items) }
func (h *diagHeap) Less(a, b int) bool {
	i, j := h.items[a], h.items[b]
	di, dj := i%h.w+i/h.w, j%h.w+j/h.w
	if di != dj {
		return di < dj
	}
	return i/h.w < j/h.w
}
func (h *diagHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *diagHeap) Push(x any)    { h.items = append(h.items, x.(int)) }
func (h *diagHeap) Pop() any {
	n := len(h.items) - 1
	x := h.items[n]
	h.items = h.items[:n]
	return x
}

func (h *diagHeap) remove(i int) {
	for k, v := range h.items {
		if v == i {
			heap.Remove(h, k)
			return
		}
	}
}
