package blocks

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
)

// Hybrid schedules a Wavefront run by two kinds of worker at once: this
// machine's cores, which take one cell at a time as the multicore engine
// does, and a cluster, which takes whole blocks as jobs. It is the policy
// of a hybrid run, shared by the distributed master (which runs it) and
// the model (model.WavefrontHybrid, which simulates it in logical time).
//
// The region is cut into square blocks of side cells. A block is here once
// a core has taken one of its cells, away once it was handed to the
// cluster, and untouched before either. The policy:
//
//   - A free core takes a ready cell (its three inputs done) of a block
//     here, the lowest anti-diagonal first; if there is none, one of an
//     untouched block, which so becomes here. Cells of different blocks
//     interleave: a cell starts as soon as its inputs are done, wherever
//     they were computed.
//   - The cluster takes an untouched block once every cell it reads (the
//     column left of it and the row below it) is done, the lowest
//     anti-diagonal of blocks first: the blocks that become ready while
//     the cores are busy with others. Its driver offers cells to free
//     cores before it sends blocks, so a block the cores could start at
//     once stays here.
//   - A core left with no ready cell may take back a block that is away
//     but has not started on the cluster (TakeBack): the driver knows
//     which.
//
// A block that comes back (BlockDone) releases the cells that read its top
// row and right column. Like Scheduler it is a state machine without I/O,
// clock or functions, not safe for concurrent use.
type Hybrid struct {
	region Rect
	side   int
	nx, ny int

	cell    []cellState
	pending []int8 // inputs of the cell in the region not yet done
	block   []place
	// bound counts the cells a block reads from the region that are not
	// done; left counts its own cells not done.
	bound, left []int
	// readyHere holds the ready cells of blocks here; readyFree those of
	// untouched blocks, some of which may since have gone away or here
	// (checked when popped).
	readyHere, readyFree diagHeap
	// sendable holds untouched blocks with every input done, some of
	// which may since have been touched (checked when popped).
	sendable diagHeap

	counts HybridCounts
	undone int // cells not done
}

type cellState uint8

const (
	cellWaiting cellState = iota
	cellReady
	cellRunning
	cellDone
	cellFailed
)

// place is where a block's cells are computed.
type place uint8

const (
	untouched place = iota
	here
	away
	finished // every cell done
)

// HybridCounts count what a Hybrid has handed out.
type HybridCounts struct {
	CellsHere  int // cells handed to this machine's cores
	Sent       int // blocks handed to the cluster
	TakenBack  int // of those, blocks taken back before they started
	CellsAway  int // cells of the blocks that came back from the cluster
	FailedHere int // cells that failed here
}

// NewHybrid returns a Hybrid for the cells of region in square blocks of
// side cells (smaller at the top and right edges). isDone, if not nil,
// reports cells an earlier run finished.
func NewHybrid(region Rect, side int, isDone func(x, y int) bool) (*Hybrid, error) {
	if err := region.Validate(); err != nil {
		return nil, err
	}
	if side < 1 {
		return nil, fmt.Errorf("block side %d: blocks need at least one cell", side)
	}
	h := &Hybrid{
		region: region,
		side:   side,
		nx:     (region.W + side - 1) / side,
		ny:     (region.H + side - 1) / side,
	}
	n := region.Cells()
	h.cell = make([]cellState, n)
	h.pending = make([]int8, n)
	h.block = make([]place, h.nx*h.ny)
	h.bound = make([]int, h.nx*h.ny)
	h.left = make([]int, h.nx*h.ny)
	h.readyHere.w, h.readyFree.w, h.sendable.w = region.W, region.W, h.nx
	for y := region.Y; y < region.Y+region.H; y++ {
		for x := region.X; x < region.X+region.W; x++ {
			if isDone != nil && isDone(x, y) {
				h.cell[h.index(x, y)] = cellDone
			} else {
				h.left[h.BlockOf(x, y)]++
				h.undone++
			}
		}
	}
	for b := range h.block {
		if h.left[b] == 0 {
			h.block[b] = finished
			continue
		}
		r := h.Block(b)
		for y := r.Y - 1; y < r.Y+r.H; y++ {
			h.bound[b] += h.notDone(r.X-1, y)
		}
		for x := r.X; x < r.X+r.W; x++ {
			h.bound[b] += h.notDone(x, r.Y-1)
		}
		if h.bound[b] == 0 {
			heap.Push(&h.sendable, b)
		}
	}
	for y := region.Y; y < region.Y+region.H; y++ {
		for x := region.X; x < region.X+region.W; x++ {
			i := h.index(x, y)
			if h.cell[i] == cellDone {
				continue
			}
			h.pending[i] = int8(h.notDone(x-1, y) + h.notDone(x, y-1) + h.notDone(x-1, y-1))
			if h.pending[i] == 0 {
				h.ready(x, y)
			}
		}
	}
	return h, nil
}

// Resize cuts the region again into square blocks of side cells, keeping
// every cell's state and the counts: a block with a cell handed to a core,
// failed or done (and one not done) is here, one with every cell done
// finished, the others untouched, and sent once their inputs are done. It
// is for a run that cut its blocks before it knew the cluster (a Work
// Queue master no worker had joined yet), and is refused once a block is
// away, whose cells the cluster computes as it was cut.
func (h *Hybrid) Resize(side int) error {
	if side < 1 {
		return fmt.Errorf("block side %d: blocks need at least one cell", side)
	}
	if slices.Contains(h.block, away) {
		return errors.New("a block is away on the cluster: its blocks stay as they are")
	}
	h.side = side
	h.nx = (h.region.W + side - 1) / side
	h.ny = (h.region.H + side - 1) / side
	nb := h.nx * h.ny
	h.block = make([]place, nb)
	h.bound = make([]int, nb)
	h.left = make([]int, nb)
	touched := make([]bool, nb)
	for i, c := range h.cell {
		x, y := h.xy(i)
		b := h.BlockOf(x, y)
		if c != cellDone {
			h.left[b]++
		}
		if c != cellWaiting && c != cellReady {
			touched[b] = true
		}
	}
	h.readyHere = diagHeap{w: h.region.W}
	h.readyFree = diagHeap{w: h.region.W}
	h.sendable = diagHeap{w: h.nx}
	for b := range h.block {
		switch {
		case h.left[b] == 0:
			h.block[b] = finished
			continue
		case touched[b]:
			h.block[b] = here
		}
		r := h.Block(b)
		for y := r.Y - 1; y < r.Y+r.H; y++ {
			h.bound[b] += h.notDone(r.X-1, y)
		}
		for x := r.X; x < r.X+r.W; x++ {
			h.bound[b] += h.notDone(x, r.Y-1)
		}
		if h.bound[b] == 0 && h.block[b] == untouched {
			heap.Push(&h.sendable, b)
		}
	}
	for i, c := range h.cell {
		if c == cellReady {
			h.ready(h.xy(i))
		}
	}
	return nil
}

// notDone is 1 if (x, y) is a cell of the region not done, else 0.
func (h *Hybrid) notDone(x, y int) int {
	if !h.region.Contains(x, y) || h.cell[h.index(x, y)] == cellDone {
		return 0
	}
	return 1
}

func (h *Hybrid) index(x, y int) int { return (y-h.region.Y)*h.region.W + (x - h.region.X) }

func (h *Hybrid) xy(i int) (x, y int) { return h.region.X + i%h.region.W, h.region.Y + i/h.region.W }

// Blocks returns the number of blocks.
func (h *Hybrid) Blocks() int { return len(h.block) }

// Block returns the rectangle of block b.
func (h *Hybrid) Block(b int) Rect {
	x, y := h.region.X+b%h.nx*h.side, h.region.Y+b/h.nx*h.side
	return Rect{X: x, Y: y, W: min(h.side, h.region.X+h.region.W-x), H: min(h.side, h.region.Y+h.region.H-y)}
}

// BlockOf returns the number of the block holding cell (x, y).
func (h *Hybrid) BlockOf(x, y int) int {
	return (y-h.region.Y)/h.side*h.nx + (x-h.region.X)/h.side
}

// Undone returns the number of cells not done.
func (h *Hybrid) Undone() int { return h.undone }

// Counts returns what the Hybrid has handed out so far.
func (h *Hybrid) Counts() HybridCounts { return h.counts }

// ready records that cell (x, y) has its inputs.
func (h *Hybrid) ready(x, y int) {
	i := h.index(x, y)
	h.cell[i] = cellReady
	switch h.block[h.BlockOf(x, y)] {
	case here:
		heap.Push(&h.readyHere, i)
	case untouched:
		heap.Push(&h.readyFree, i)
	}
}

// NextCell hands a ready cell to a free core here, marking it running, or
// reports false if no cell is ready outside the blocks away.
func (h *Hybrid) NextCell() (x, y int, ok bool) {
	for h.readyHere.Len() == 0 && h.readyFree.Len() > 0 {
		i := heap.Pop(&h.readyFree).(int)
		x, y := h.xy(i)
		b := h.BlockOf(x, y)
		if h.cell[i] != cellReady || h.block[b] == away {
			continue
		}
		h.block[b] = here
		heap.Push(&h.readyHere, i)
	}
	if h.readyHere.Len() == 0 {
		return 0, 0, false
	}
	i := heap.Pop(&h.readyHere).(int)
	h.cell[i] = cellRunning
	h.counts.CellsHere++
	x, y = h.xy(i)
	return x, y, true
}

// NextBlock hands the cluster an untouched block whose inputs are all
// done, marking it away, or reports false if there is none.
func (h *Hybrid) NextBlock() (b int, ok bool) {
	for h.sendable.Len() > 0 {
		b := heap.Pop(&h.sendable).(int)
		if h.block[b] != untouched {
			continue
		}
		h.block[b] = away
		h.counts.Sent++
		return b, true
	}
	return 0, false
}

// TakeBack makes block b, handed to the cluster and not started there (or
// failed there), a block of this machine's: its cells not done become
// cores' work. It does nothing unless b is away.
func (h *Hybrid) TakeBack(b int) {
	if h.block[b] != away {
		return
	}
	h.block[b] = here
	h.counts.TakenBack++
	r := h.Block(b)
	for y := r.Y; y < r.Y+r.H; y++ {
		for x := r.X; x < r.X+r.W; x++ {
			if i := h.index(x, y); h.cell[i] == cellReady {
				heap.Push(&h.readyHere, i)
			}
		}
	}
}

// CellDone reports that cell (x, y) is computed — by a core here, or by
// the cluster — releasing the cells and blocks that waited only for it. A
// cell reported twice counts once.
func (h *Hybrid) CellDone(x, y int) {
	i := h.index(x, y)
	if h.cell[i] == cellDone {
		return
	}
	h.cell[i] = cellDone
	h.undone--
	b := h.BlockOf(x, y)
	if h.left[b]--; h.left[b] == 0 {
		h.block[b] = finished
	}
	for _, d := range [3][2]int{{x + 1, y}, {x, y + 1}, {x + 1, y + 1}} {
		if !h.region.Contains(d[0], d[1]) {
			continue
		}
		j := h.index(d[0], d[1])
		if h.pending[j]--; h.pending[j] == 0 && h.cell[j] == cellWaiting {
			h.ready(d[0], d[1])
		}
	}
	// The blocks whose left column or bottom row (x, y) is in: those to
	// the right of it and above it, when it is on a block's edge.
	right := (x+1-h.region.X)%h.side == 0 && x+1 < h.region.X+h.region.W
	above := (y+1-h.region.Y)%h.side == 0 && y+1 < h.region.Y+h.region.H
	var readers [3]int
	n := 0
	if right {
		readers[n] = h.BlockOf(x+1, y)
		n++
	}
	if above {
		readers[n] = h.BlockOf(x, y+1)
		n++
	}
	if right && above {
		readers[n] = h.BlockOf(x+1, y+1)
		n++
	}
	for _, rb := range readers[:n] {
		if h.bound[rb]--; h.bound[rb] == 0 && h.block[rb] == untouched {
			heap.Push(&h.sendable, rb)
		}
	}
}

// BlockDone reports that the cluster computed every cell of block b.
func (h *Hybrid) BlockDone(b int) {
	r := h.Block(b)
	for y := r.Y; y < r.Y+r.H; y++ {
		for x := r.X; x < r.X+r.W; x++ {
			h.CellDone(x, y)
		}
	}
	h.counts.CellsAway += r.Cells()
}

// CellFailed reports that cell (x, y), handed out by NextCell, could not
// be computed: the cells that depend on it are never handed out.
func (h *Hybrid) CellFailed(x, y int) {
	i := h.index(x, y)
	if h.cell[i] != cellRunning {
		panic(fmt.Sprintf("wavefront: CellFailed(%d,%d) on a cell that is not running", x, y))
	}
	h.cell[i] = cellFailed
	h.counts.FailedHere++
}

// Away reports whether block b is with the cluster.
func (h *Hybrid) Away(b int) bool { return h.block[b] == away }
