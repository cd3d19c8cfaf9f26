package sim

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rightsize/rightsize/distmaster/jobs"
	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/wavefront/blocks"
	"github.com/rightsize/rightsize/workqueue/sched"
)

// Blocks is a distributed All-Pairs or Wavefront, as the distributed
// master runs it on Work Queue: its tracker (distmaster/jobs) hands out
// the blocks, a Wavefront's block scheduler (wavefront/blocks) releases
// each block once its neighbours above and to the left are done, and each
// block is one task of the master.
type Blocks struct {
	// Kind is "allpairs" or "wavefront".
	Kind string `json:"kind"`
	// Rows and Cols are the cells: All-Pairs' items of A and of B; a
	// Wavefront's side, Cols = Rows.
	Rows int `json:"rows"`
	Cols int `json:"cols"`
	// BlockRows and BlockCols are each job's cells (a Wavefront's blocks
	// are square: BlockRows).
	BlockRows int `json:"block_rows"`
	BlockCols int `json:"block_cols"`
	// CellTime is the function's time per cell on a worker of speed 1.
	CellTime Dist `json:"cell_time"`
	// JobCost is each job's time on its worker beyond its cells: starting
	// the function, reading its inputs, writing its results.
	JobCost float64 `json:"job_cost"`
	// ItemMB is an All-Pairs item, sent with every job that reads it;
	// CellMB is a cell's result, returned with its job (and, for a
	// Wavefront, a boundary value sent with a job).
	ItemMB float64 `json:"item_mb"`
	CellMB float64 `json:"cell_mb"`
	// MaxJobs and Retries are the tracker's (jobs.Config).
	MaxJobs int `json:"max_jobs"`
	Retries int `json:"retries"`
}

func (b *Blocks) check() error {
	switch b.Kind {
	case "allpairs":
	case "wavefront":
		if b.Cols != 0 && b.Cols != b.Rows || b.BlockCols != 0 && b.BlockCols != b.BlockRows {
			return errors.New("a wavefront is square: give rows and block_rows")
		}
	default:
		return fmt.Errorf("kind %q (allpairs or wavefront)", b.Kind)
	}
	if b.Rows <= 0 || b.BlockRows <= 0 || b.Kind == "allpairs" && (b.Cols <= 0 || b.BlockCols <= 0) {
		return fmt.Errorf("%d×%d cells in blocks of %d×%d", b.Rows, b.Cols, b.BlockRows, b.BlockCols)
	}
	if b.JobCost < 0 || b.ItemMB < 0 || b.CellMB < 0 {
		return errors.New("a negative cost or size")
	}
	if err := b.CellTime.check(); err != nil {
		return fmt.Errorf("cell_time: %w", err)
	}
	return nil
}

// blockRun follows a Blocks workload: the tracker, the wavefront's block
// scheduler, and which task carries which block.
type blockRun struct {
	b        *Blocks
	tr       *jobs.Tracker
	wf       *blocks.Scheduler // nil for All-Pairs
	nx, ny   int               // blocks across and down
	cellTime sampler
	jobs     map[sched.TaskID]int // task → block
}

func newBlockRun(b *Blocks, cellTime sampler) (*blockRun, error) {
	r := &blockRun{b: b, cellTime: cellTime, jobs: map[sched.TaskID]int{},
		tr: jobs.New(jobs.Config{MaxJobs: b.MaxJobs, Retries: lifecycle.Retries(b.Retries)})}
	if b.Kind == "wavefront" {
		r.nx = (b.Rows + b.BlockRows - 1) / b.BlockRows
		r.ny = r.nx
		// Row 0 and column 0 are a wavefront's boundary.
		wf, err := blocks.NewScheduler(blocks.Rect{X: 1, Y: 1, W: b.Rows, H: b.Rows}, b.BlockRows, b.BlockRows, func(x, y int) bool { return false })
		if err != nil {
			return nil, err
		}
		r.wf = wf
		r.release()
		return r, nil
	}
	r.nx = (b.Cols + b.BlockCols - 1) / b.BlockCols
	r.ny = (b.Rows + b.BlockRows - 1) / b.BlockRows
	for i := range r.nx * r.ny {
		r.tr.Add(i)
	}
	return r, nil
}

func (r *blockRun) blocks() int { return r.nx * r.ny }

// rect is block i's cells; a wavefront's start at (1, 1).
func (r *blockRun) rect(i int) blocks.Rect {
	if r.wf != nil {
		b := r.b.BlockRows
		x, y := i%r.nx*b, i/r.nx*b
		return blocks.Rect{X: 1 + x, Y: 1 + y, W: min(b, r.b.Rows-x), H: min(b, r.b.Rows-y)}
	}
	bw, bh := r.b.BlockCols, r.b.BlockRows
	x, y := i%r.nx*bw, i/r.nx*bh
	return blocks.Rect{X: x, Y: y, W: min(bw, r.b.Cols-x), H: min(bh, r.b.Rows-y)}
}

// release hands the tracker the blocks the wavefront made ready.
func (r *blockRun) release() {
	for {
		rect, ok := r.wf.Next()
		if !ok {
			return
		}
		r.tr.Add((rect.Y-1)/r.b.BlockRows*r.nx + (rect.X-1)/r.b.BlockRows)
	}
}

// task is what a job of block i costs: its run time on a worker of speed
// 1, the MB it is sent and the MB it returns.
func (r *blockRun) task(i int) simTask {
	rect := r.rect(i)
	cells := rect.W * rect.H
	run := r.b.JobCost
	for range cells {
		run += r.cellTime()
	}
	in := float64(rect.W+rect.H) * r.b.ItemMB
	if r.wf != nil {
		in = float64(rect.W+rect.H+1) * r.b.CellMB
	}
	return simTask{group: -1, runtime: run, inMB: in, outMB: float64(cells) * r.b.CellMB}
}

// submitBlocks turns the blocks the tracker hands out into tasks.
func (e *engine) submitBlocks(now time.Time) {
	r := e.blocks
	for {
		b, _, ok := r.tr.Next()
		if !ok {
			return
		}
		e.tasks = append(e.tasks, r.task(b))
		id := sched.TaskID(len(e.tasks))
		r.jobs[id] = b
		r.tr.Submitted(b, strconv.Itoa(int(id)), now)
		e.submitted++
		e.submitTo(e.masters[0], id, e.schedTask(id))
	}
}

// blockEnded tells the tracker how task id's job ended (err nil: done),
// and submits what it releases.
func (e *engine) blockEnded(id sched.TaskID, err error, now time.Time) {
	r := e.blocks
	b, ok := r.jobs[id]
	if !ok {
		return
	}
	delete(r.jobs, id)
	e.submitted--
	o := r.tr.Ended(strconv.Itoa(int(id)), now, err)
	switch {
	case o.Done:
		e.blocksDone++
		if r.wf != nil {
			r.wf.Done(r.rect(b))
			r.release()
		}
	case o.GaveUp:
		e.blocksFailed++
		if r.wf != nil {
			r.wf.Failed(r.rect(b))
		}
	}
	e.submitBlocks(now)
}
