package model

import (
	"container/heap"
	"fmt"
	"math"
	"slices"

	"github.com/rightsize/rightsize/wavefront/blocks"
)

// antiDiagonal returns the number of cells (i, j), 0 <= i < x, 0 <= j < y,
// with i + j = k.
func antiDiagonal(x, y, k int) int {
	return min(k, x-1, y-1, x+y-2-k) + 1
}

// WavefrontMulticore is seed 000's multicore model for an x×y Wavefront on
// p cores with a fixed cost of tau seconds per cell: every anti-diagonal must
// finish before the next can, and k cells on p cores take ⌈k/p⌉ rounds.
//
//	T_mc = Σ_k ⌈s_k/p⌉·τ
//
// A scheduler that starts each cell as soon as its three neighbours are
// done may do a little better, since a core left idle at the end of one
// anti-diagonal can start cells of the next: on two cores, by up to about
// n/2 rounds (model/sim's TestWavefrontCrossover measures it).
func WavefrontMulticore(x, y, p int, tau float64) float64 {
	if x <= 0 || y <= 0 || p <= 0 {
		return 0
	}
	rounds := 0
	for k := 0; k <= x+y-2; k++ {
		rounds += (antiDiagonal(x, y, k) + p - 1) / p
	}
	return float64(rounds) * tau
}

// WavefrontDistributed models an n×n Wavefront cut into square blocks of b
// cells on a side, each run as a job with dispatch latency delta on a node of
// cpn cores, with `nodes` nodes:
//
//	T_dist = T_mc(⌈n/b⌉, nodes, T_mc(b, cpn, τ) + δ)
func WavefrontDistributed(n, b, nodes, cpn int, tau, delta float64) float64 {
	if n <= 0 || b <= 0 {
		return 0
	}
	blocks := (n + b - 1) / b
	block := WavefrontMulticore(b, b, cpn, tau) + delta
	return WavefrontMulticore(blocks, blocks, nodes, block)
}

// WavefrontDistributedEvents predicts the same distributed run as
// WavefrontDistributed, but as the masters run it: a block is released the
// moment its two parents are done, not a round per anti-diagonal of
// blocks, so a slot left idle at the end of one anti-diagonal starts a
// block of the next. The blocks' graph (WavefrontBlocks) is list-scheduled
// on nodes slots, each block holding its slot for delta plus its cells
// (Makespan). It is never slower than WavefrontDistributed on the grid's
// shapes, and faster when an anti-diagonal has more blocks than nodes
// (eight workers and 1×1 blocks of a 20×20 of 50 ms cells and jobs of
// 10 ms: 3.42 s against 4.14 s). Its cost is about the blocks times log
// blocks.
func WavefrontDistributedEvents(n, b, nodes, cpn int, tau, delta float64) float64 {
	if n <= 0 || b <= 0 || nodes <= 0 {
		return 0
	}
	return Makespan(WavefrontBlocks(n, b, cpn, tau), FlowPlaces{RemoteSlots: nodes, Dispatch: delta})
}

// maxEventBlocks bounds the blocks of a distributed Wavefront whose graph
// BestWavefrontDistributed schedules block by block (a few milliseconds);
// a block side that cuts the region into more is predicted by the
// lock-step WavefrontDistributed.
const maxEventBlocks = 1 << 14

// BestWavefrontDistributed returns the fastest distributed n×n Wavefront
// predicted on nodes slots of cpn cores with a job cost of delta, in
// square blocks of at most limit cells on a side, and that side: by
// WavefrontDistributedEvents where the region has at most maxEventBlocks
// blocks, by WavefrontDistributed where it has more.
func BestWavefrontDistributed(n, limit, nodes, cpn int, tau, delta float64) (float64, int) {
	t, block := math.Inf(1), 1
	for b := 1; b <= min(n, limit); b++ {
		predict := WavefrontDistributed
		if nb := (n + b - 1) / b; nb*nb <= maxEventBlocks {
			predict = WavefrontDistributedEvents
		}
		v := predict(n, b, nodes, cpn, tau, delta)
		if v < t {
			t, block = v, b
		}
	}
	return t, block
}

// WavefrontBlocks returns the graph of an n×n Wavefront cut into square
// blocks of b cells on a side, as rules for Makespan, parents first: block
// (i, j) needs (i−1, j) and (i, j−1) (and through them (i−1, j−1)), and
// takes WavefrontMulticore of its cells on cpn cores; the last row and
// column of blocks may be narrower.
func WavefrontBlocks(n, b, cpn int, tau float64) []FlowRule {
	if n <= 0 || b <= 0 {
		return nil
	}
	nb := (n + b - 1) / b
	// Blocks come in at most four shapes: whole, and cut by the last row,
	// the last column or both.
	last := n - (nb-1)*b
	var shape [2][2]float64
	for i, rows := range [2]int{b, last} {
		for j, cols := range [2]int{b, last} {
			shape[i][j] = WavefrontMulticore(rows, cols, cpn, tau)
		}
	}
	edge := func(i int) int {
		if i == nb-1 {
			return 1
		}
		return 0
	}
	rules := make([]FlowRule, 0, nb*nb)
	for i := range nb {
		for j := range nb {
			r := FlowRule{Seconds: shape[edge(i)][edge(j)]}
			if i > 0 {
				r.Parents = append(r.Parents, (i-1)*nb+j)
			}
			if j > 0 {
				r.Parents = append(r.Parents, i*nb+j-1)
			}
			rules = append(rules, r)
		}
	}
	return rules
}

// WavefrontChoice is the models' decision for an n×n Wavefront.
type WavefrontChoice struct {
	Multicore  float64 // predicted seconds on this machine's cores
	Cluster    float64 // predicted seconds distributed, at Block
	Block      int     // the best block size
	Distribute bool
}

func (c WavefrontChoice) String() string {
	where := "this machine"
	if c.Distribute {
		where = "the cluster"
	}
	return fmt.Sprintf("predicted %.0f s here, %.0f s distributed in blocks of %d×%d: run on %s",
		c.Multicore, c.Cluster, c.Block, c.Block, where)
}

// distributeFactor is how much faster the cluster must be predicted to be
// before a Wavefront leaves this machine: the distributed model ignores
// stragglers and transfer time, so it is optimistic.
const distributeFactor = 2

// ChooseWavefront picks the block size that minimises the distributed
// prediction (BestWavefrontDistributed) and compares it with
// WavefrontMulticore on localCores.
func ChooseWavefront(n, localCores, nodes, cpn int, tau, delta float64) WavefrontChoice {
	c := WavefrontChoice{Multicore: WavefrontMulticore(n, n, localCores, tau)}
	c.Cluster, c.Block = BestWavefrontDistributed(n, n, nodes, cpn, tau, delta)
	c.Distribute = c.Cluster*distributeFactor < c.Multicore
	return c
}

// WavefrontHybridInputs describe a hybrid Wavefront run: this machine's
// cores computing cells, a cluster computing blocks.
type WavefrontHybridInputs struct {
	W, H       int // cells of the region
	Block      int // side of the cluster's square blocks
	LocalCores int // this machine's cores, one cell each at a time
	Slots      int // the cluster's jobs at once
	JobCores   int // cores of each job, on which its block's cells run (0 means 1)
	CellTime   float64
	// Dispatch is a job's time from its submission to its start, during
	// which a core here may take its block back; JobCost what it costs
	// once started beyond its cells (starting the program, reading the
	// inputs, returning the cells).
	Dispatch, JobCost float64
	// Start is when the cluster takes its first block: Work Queue's
	// workers connect to the master a run starts, and a block waits for
	// them once, not a Dispatch every block.
	Start float64
}

// WavefrontHybridRun is what WavefrontHybrid predicts.
type WavefrontHybridRun struct {
	Seconds float64
	blocks.HybridCounts
}

// WavefrontHybrid predicts a hybrid Wavefront run by simulating, in
// logical time, the policy the distributed master runs (blocks.Hybrid):
// the cores here take cells one at a time as soon as their inputs are
// done, cells of different blocks interleaving; the cluster takes, while
// it has free slots, each block untouched here whose inputs are all done,
// from Start on, and returns it Dispatch + JobCost + T_mc(block,
// JobCores) later; a core with no ready cell takes back a block still in
// its dispatch. Cells cost CellTime each, here and there alike.
//
// Its cost is about cells × (front width + log cells): the decision
// simulates only regions of at most maxHybridCells cells.
func WavefrontHybrid(in WavefrontHybridInputs) WavefrontHybridRun {
	region := blocks.Rect{X: 1, Y: 1, W: in.W, H: in.H}
	h, err := blocks.NewHybrid(region, in.Block, nil)
	if err != nil {
		return WavefrontHybridRun{Seconds: math.Inf(1)}
	}
	k := max(in.JobCores, 1)
	type job struct {
		block     int
		sent, end float64
	}
	var (
		now   float64
		free  = max(in.LocalCores, 1)
		cells endings[cellEvent] // running here
		away  []job              // oldest first
	)
	for h.Undone() > 0 {
		// Cores first, then the cluster: a block a core could start now
		// stays here.
		for free > 0 {
			if x, y, ok := h.NextCell(); ok {
				heap.Push(&cells, cellEvent{at: now + in.CellTime, x: x, y: y})
				free--
				continue
			}
			i := slices.IndexFunc(away, func(j job) bool { return j.sent+in.Dispatch > now })
			if i < 0 {
				break
			}
			h.TakeBack(away[i].block)
			away = slices.Delete(away, i, i+1)
		}
		for len(away) < in.Slots && now >= in.Start {
			b, ok := h.NextBlock()
			if !ok {
				break
			}
			r := h.Block(b)
			away = append(away, job{block: b, sent: now, end: now + in.Dispatch + in.JobCost + WavefrontMulticore(r.W, r.H, k, in.CellTime)})
		}
		// The next event: a cell here or a block from the cluster.
		next := -1
		for i, j := range away {
			if next < 0 || j.end < away[next].end {
				next = i
			}
		}
		// The cluster's start, if it comes first, is an event too: a
		// block ready then goes.
		joins := now < in.Start && in.Slots > 0 && h.Undone() > 0
		switch {
		case joins && (cells.Len() == 0 || in.Start < cells[0].at) && (next < 0 || in.Start < away[next].end):
			now = in.Start
		case cells.Len() > 0 && (next < 0 || cells[0].at <= away[next].end):
			// Cells that end together are seen together, as the
			// master drains the results at hand before it hands out
			// more.
			now = cells[0].at
			for cells.Len() > 0 && cells[0].at <= now+tieTime {
				ev := heap.Pop(&cells).(cellEvent)
				h.CellDone(ev.x, ev.y)
				free++
			}
		case next >= 0:
			now = away[next].end
			h.BlockDone(away[next].block)
			away = slices.Delete(away, next, next+1)
		default:
			// Nothing runs and nothing can start.
			return WavefrontHybridRun{Seconds: math.Inf(1), HybridCounts: h.Counts()}
		}
	}
	return WavefrontHybridRun{Seconds: now, HybridCounts: h.Counts()}
}

// hybridTie is how much slower, relatively, a hybrid Wavefront plan may be
// predicted than the fastest and still be chosen for taking fewer blocks
// back from the cluster's queue.
const hybridTie = 0.005

// BestWavefrontHybrid predicts in by WavefrontHybrid for block sides of
// 1 to limit cells (10% apart; in.Block is ignored) and returns the plan
// to run and its block side: among those predicted as fast as the
// fastest, within hybridTie, the one that takes the fewest blocks back
// from the queue. Each taken back costs the cluster a submission and a
// removal (sbatch and scancel), and when nothing is gained by sending
// blocks, none should go.
func BestWavefrontHybrid(in WavefrontHybridInputs, limit int) (WavefrontHybridRun, int) {
	type plan struct {
		block int
		WavefrontHybridRun
	}
	var plans []plan
	fastest := math.Inf(1)
	for b := 1; b <= min(max(in.W, in.H), limit); b = max(b+1, b*11/10) {
		in.Block = b
		run := WavefrontHybrid(in)
		plans = append(plans, plan{b, run})
		fastest = math.Min(fastest, run.Seconds)
	}
	if len(plans) == 0 {
		return WavefrontHybridRun{Seconds: math.Inf(1)}, 1
	}
	best := plans[0]
	for _, p := range plans[1:] {
		if p.Seconds > fastest*(1+hybridTie) {
			continue
		}
		if best.Seconds > fastest*(1+hybridTie) || p.TakenBack < best.TakenBack || p.TakenBack == best.TakenBack && p.Seconds < best.Seconds {
			best = p
		}
	}
	return best.WavefrontHybridRun, best.block
}

// tieTime is how close cells must end to be seen together.
const tieTime = 1e-9

type cellEvent struct {
	at   float64
	x, y int
}

func (c cellEvent) end() float64 { return c.at }
