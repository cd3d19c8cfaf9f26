package distmaster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
	"github.com/rightsize/rightsize/wavefront/blocks"
	"github.com/rightsize/rightsize/workqueue"
)

// A hybrid Wavefront (Wavefront.HereCores) does not make this machine one
// more slot of a batch system, or one more worker of a Work Queue master,
// taking blocks: its cores take cells, as the multicore engine does, while
// the cluster takes whole blocks (blocks.Hybrid's policy, which
// model.WavefrontHybrid simulates). With
// blocks as the unit, this machine's cores waited for a whole block's
// inputs and idled at each block's first and last anti-diagonals; by cells
// they keep the parallelism of the anti-diagonals across blocks, and the
// cluster takes only the blocks that become ready while they are busy.
//
// One goroutine, the loop below, holds the state: it hands cells to free
// cores (a goroutine per call), sends blocks, takes back blocks still in
// the batch system's queue when the cores run dry, and absorbs what comes
// back. A block that fails on the cluster is not resubmitted: its cells
// left are computed here.
//
// On Work Queue the loop also looks at the master's workers, at each of
// its events and every workersLook (a worker that joins or leaves sends
// it none). Two things follow from them. A worker that connects from this
// machine runs its blocks on the cores the cells here run on: the cells
// give way by its cores (as All-Pairs' own worker drains for it, see
// internal/distcmd's OwnWorker), and take them back when it leaves, so that
// this machine's cores are not shared at half speed by both. And blocks
// cut before any worker was known (a side chosen for no hosts, which the
// hybrid model makes 1×1: the cluster has no slot to fill) are cut again
// when the first worker joins, for the workers then connected
// (refitBlocks), so that a worker that comes late gets blocks worth
// sending it.

// workersLook is how often a hybrid run on Work Queue looks at the
// master's workers besides at its jobs' events: a worker that joins is
// given blocks, and one leaving this machine gives its cores back to the
// cells here, within that time.
const workersLook = 250 * time.Millisecond

// OnThisMachine returns a test of whether an address is one of this
// machine's: a loopback address or one of its interfaces'. A Work Queue
// worker that connects from one runs on the cores of this machine.
func OnThisMachine() func(net.IP) bool {
	var mine []net.IP
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				mine = append(mine, n.IP)
			}
		}
	}
	return func(ip net.IP) bool {
		return ip.IsLoopback() || slices.ContainsFunc(mine, ip.Equal)
	}
}

// workerCores returns the cores of workers ws that take tasks, and the
// cores that those of them connecting from this machine (here) compute
// on: all of them, or while draining (no new task) the cores of the tasks
// they still hold.
func workerCores(ws []workqueue.WorkerStats, here func(net.IP) bool) (cluster, thisMachine int) {
	var all, mine float64
	for _, w := range ws {
		if !w.Draining {
			all += w.Cores
		}
		host, _, err := net.SplitHostPort(w.Addr)
		if err != nil {
			host = w.Addr
		}
		if ip := net.ParseIP(host); ip == nil || !here(ip) {
			continue
		}
		if w.Draining {
			mine += w.CoresInUse
		} else {
			mine += w.Cores
		}
	}
	return int(all), int(math.Ceil(mine))
}

// A queuedRemover is a driver that removes a job only if it has not
// started (Work Queue's, whose workers report no start): a block taken
// back is then never one a worker is computing.
type queuedRemover interface {
	RemoveQueued(ctx context.Context, id string) (bool, error)
}

// masterOf returns the Work Queue master that d submits to, or nil.
func masterOf(d batch.Driver) *workqueue.Master {
	if w, ok := d.(interface{ Master() *workqueue.Master }); ok {
		return w.Master()
	}
	return nil
}

// hybridJob is a block away on the cluster.
type hybridJob struct {
	block   int
	dir     string
	started bool // the batch system said it runs: too late to take back
}

// cellDone is a cell computed here, or failed.
type cellDone struct {
	x, y int
	out  []byte
	err  error
}

// runHybrid computes r's region with cores cells at a time here and the
// cluster's blocks (cfg.Driver), r.b cells on a side, filling res.
func (r *wfRun) runHybrid(ctx context.Context, cores int, res *WavefrontResult) error {
	w, cfg := r.w, r.cfg
	hy, err := blocks.NewHybrid(w.Region, r.b, func(x, y int) bool { return r.have.has(r.index(x, y)) })
	if err != nil {
		return err
	}
	res.Blocks = hy.Blocks()
	slots := max(hostBound(cfg)-cfg.LocalCores, 1)
	// width is how many blocks may be away at once, hereBusy the cores
	// of this machine that a worker of the cluster computes on.
	width, hereBusy := slots, 0
	jobs := fmt.Sprintf("up to %d jobs at once", slots)
	m := masterOf(cfg.Driver)
	var look <-chan time.Time
	var onThisMachine func(net.IP) bool
	if m != nil {
		jobs = fmt.Sprintf("as many jobs at once as its workers have cores, up to %d", slots)
		onThisMachine = OnThisMachine()
		t := time.NewTicker(workersLook)
		defer t.Stop()
		look = t.C
	}
	begun := time.Now()
	var saidHere, joined bool
	// Look at the workers at the start, at each batch event and at each
	// tick, not at each cell's end: a look is a round trip through the
	// master and a copy of every worker's state, and cells of a
	// millisecond end thousands of times a second.
	lookNow := m != nil
	fmt.Fprintf(cfg.Explain, "%d cells to compute: this machine's %d cores take cells, the cluster (%s, %s) blocks of %d×%d that become ready while the cores are busy\n",
		hy.Undone(), cores, cfg.Kind, jobs, r.b, r.b)
	if err := os.RemoveAll(cfg.WorkDir); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	defer os.RemoveAll(cfg.WorkDir)

	d := cfg.Driver
	away := map[string]*hybridJob{} // by job ID
	var order []string              // away's IDs, oldest first
	defer func() {
		rm, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for id := range away {
			d.Remove(rm, id)
		}
	}()
	// Calls still running when the run returns (an error, a cancel) are
	// cancelled and waited for: the caller may close the function next.
	ctx, cancel := context.WithCancel(ctx)
	var calls sync.WaitGroup
	defer func() {
		cancel()
		calls.Wait()
	}()
	r.vals = map[sparsematrix.Key][]byte{}
	// As many as the calls in flight: a call never waits to report.
	results := make(chan cellDone, cores)
	running := 0 // cells computed here now
	var failures []*BlockError
	failedBlock := map[int]bool{}
	var ran time.Duration
	var ranJobs int
	var ranCells int64 // of the jobs ran counts
	var inFlight int64 // cells running here or away
	flight := func(delta int64) {
		inFlight += delta
		if cfg.InFlight != nil {
			cfg.InFlight(inFlight)
		}
	}

	forget := func(id string) {
		delete(away, id)
		for i, o := range order {
			if o == id {
				order = append(order[:i], order[i+1:]...)
				break
			}
		}
	}
	// takeBack takes back the oldest block still waiting in the batch
	// system's queue, reporting whether there was one.
	takeBack := func() bool {
		for _, id := range order {
			j := away[id]
			if j.started {
				continue
			}
			if qr, ok := d.(queuedRemover); ok {
				// Work Queue reports no start: only the master knows
				// whether a worker has the block.
				if removed, err := qr.RemoveQueued(ctx, id); err != nil || !removed {
					j.started = err == nil
					continue
				}
			} else {
				if st, err := d.Status(id); err != nil || st.State != batch.Queued {
					continue
				}
				if err := d.Remove(ctx, id); err != nil {
					continue
				}
			}
			forget(id)
			os.RemoveAll(j.dir)
			flight(-r.size(j.block))
			hy.TakeBack(j.block)
			return true
		}
		return false
	}
	start := func(x, y int) error {
		var in [3]funcs.Input
		for i, c := range [3][2]int{{x - 1, y}, {x, y - 1}, {x - 1, y - 1}} {
			v, err := r.input(c[0], c[1])
			if err != nil {
				return fmt.Errorf("input cell (%d,%d): %w", c[0], c[1], err)
			}
			in[i] = funcs.Input{Data: v}
		}
		if w.States != nil {
			w.States.Set(x, y, wavefront.Running)
		}
		callCtx := ctx
		if w.Cell.Info().Kind == funcs.SharedLibrary {
			// A library that crashes the process names the cell.
			var label funcs.Label
			label.SetCell(x, y)
			callCtx = funcs.WithLabel(ctx, &label)
		}
		flight(1)
		calls.Go(func() {
			out, err := w.Cell.Call(callCtx, in[0], in[1], in[2])
			results <- cellDone{x: x, y: y, out: out, err: err}
		})
		return nil
	}
	send := func(b int) error {
		dir := filepath.Join(cfg.WorkDir, r.name(b))
		job, err := r.job(b, dir)
		if err != nil {
			return fmt.Errorf("block %s: %w", r.name(b), err)
		}
		job.Do = nil // the cluster runs the command; this machine's cores take cells
		id, err := d.Submit(ctx, job)
		if err != nil {
			// Refused: its cells are done here.
			fmt.Fprintf(cfg.Explain, "block %s: the batch system refused it (%v); its cells are computed here\n", r.name(b), err)
			os.RemoveAll(dir)
			hy.TakeBack(b)
			return nil
		}
		res.Jobs++
		flight(r.size(b))
		away[id] = &hybridJob{block: b, dir: dir}
		order = append(order, id)
		return nil
	}
	finish := func(id string, ev batch.Event) error {
		j := away[id]
		forget(id)
		flight(-r.size(j.block))
		defer os.RemoveAll(j.dir)
		jobErr := ev.Err
		if ev.State != batch.Failed && ev.ExitCode != 0 {
			jobErr = fmt.Errorf("exit status %d", ev.ExitCode)
		}
		rect := r.block(j.block)
		complete, err := r.absorb(j.block, j.dir)
		var werr *writeError
		if errors.As(err, &werr) {
			return err
		}
		for y := rect.Y; y < rect.Y+rect.H; y++ {
			for x := rect.X; x < rect.X+rect.W; x++ {
				if r.have.has(r.index(x, y)) {
					hy.CellDone(x, y)
					r.release(x, y)
				}
			}
		}
		why := errors.Join(jobErr, err)
		if why == nil && !complete {
			why = errors.New("the job exited 0 but did not return every cell of its block")
		}
		ended := cmp.Or(ev.Ended, time.Now())
		if cfg.JobEnded != nil {
			cfg.JobEnded(JobEnd{Block: j.block, Name: r.name(j.block), Parents: r.parents(j.block),
				Started: cmp.Or(ev.Started, ended), Ended: ended, Err: why, Stderr: ev.Stderr})
		}
		if why == nil {
			if !ev.Started.IsZero() {
				ran += ended.Sub(ev.Started)
				ranJobs++
				ranCells += r.size(j.block)
				leastDispatch(&res.Dispatch, ev)
			}
			res.Done++
			return nil
		}
		fmt.Fprintf(cfg.Explain, "block %s failed on the cluster (%v); its cells left are computed here\n", r.name(j.block), why)
		cfg.Logger.Warn("block failed on the cluster; computing it here", "block", r.name(j.block), "err", why)
		hy.TakeBack(j.block)
		return nil
	}

	cellEnded := func(c cellDone) error {
		running--
		flight(-1)
		if c.err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			hy.CellFailed(c.x, c.y)
			if w.States != nil {
				w.States.Set(c.x, c.y, wavefront.Failed)
			}
			b := hy.BlockOf(c.x, c.y)
			if !failedBlock[b] {
				failedBlock[b] = true
				failures = append(failures, &BlockError{Block: r.name(b), Attempts: 1, Err: &wavefront.CellError{X: c.x, Y: c.y, Err: c.err}})
			}
			r.failedCells++
			return nil
		}
		if err := r.store(c.x, c.y, c.out); err != nil {
			return err
		}
		hy.CellDone(c.x, c.y)
		r.release(c.x, c.y)
		return nil
	}

	for {
		if lookNow {
			lookNow = false
			// A Work Queue master's cluster is the workers connected
			// now: a block no worker has room for is better computed
			// here, and with none connected the run is this machine's
			// alone.
			all, mine := workerCores(m.Workers(), onThisMachine)
			width, hereBusy = min(slots, all/max(cfg.JobCores, 1)), mine
			if mine > 0 && !saidHere {
				saidHere = true
				fmt.Fprintf(cfg.Explain, "a worker joined from this machine (%s): its blocks run on the cores the cells here do, so the cells here take %d of %s while it is connected\n",
					cmdutil.Plural(mine, "core"), max(cores-mine, 0), cmdutil.Plural(cores, "core"))
			}
			if all > 0 && !joined {
				joined = true
				if r.refit && len(away) == 0 {
					if err := r.refitBlocks(hy, max(cores-mine, 0), all, time.Since(begun), res); err != nil {
						return err
					}
				}
			}
		}
		// This machine's cores less those a worker here computes on;
		// with none left, one while nothing is away, for the cells of the
		// blocks here that nothing else computes.
		here := max(cores-hereBusy, 0)
		if here == 0 && len(away) == 0 {
			here = 1
		}
		// Cores first, then the cluster: a block a core could start now
		// stays here.
		for running < here {
			if x, y, ok := hy.NextCell(); ok {
				if err := start(x, y); err != nil {
					return err
				}
				running++
				continue
			}
			if !takeBack() {
				break
			}
		}
		for n := width; len(away) < n; {
			b, ok := hy.NextBlock()
			if !ok {
				break
			}
			if err := send(b); err != nil {
				return err
			}
		}
		if running == 0 && len(away) == 0 {
			break // nothing runs, nothing can
		}
		select {
		case c := <-results:
			// The cells that ended meanwhile too, so that a core is not
			// thought idle (and a block taken back) for want of a cell
			// its neighbour has just finished.
			for more := true; more; {
				if err := cellEnded(c); err != nil {
					return err
				}
				select {
				case c = <-results:
				default:
					more = false
				}
			}
		case ev, ok := <-d.Events():
			if !ok {
				return errors.New("the batch driver closed while jobs were running")
			}
			lookNow = m != nil
			j, mine := away[ev.ID]
			switch {
			case !mine: // a job taken back
			case ev.State == batch.Running:
				j.started = true
			case ev.State.Final():
				if err := finish(ev.ID, ev); err != nil {
					return err
				}
			}
		case <-look:
			lookNow = true
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c := hy.Counts()
	res.HereCells = c.CellsHere - c.FailedHere
	res.TakenBack = c.TakenBack
	if ranJobs > 0 {
		res.MeanJob = ran / time.Duration(ranJobs)
		res.MeanJobCells = float64(ranCells) / float64(ranJobs)
	}
	if len(failures) > 0 {
		res.Failed = len(failures)
		return &FailedError{Blocks: failures, Total: res.Blocks}
	}
	return nil
}

// writeError is a failure to write the checkpoint, which ends a run.
type writeError struct{ err error }

func (e *writeError) Error() string { return "checkpoint: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// input returns the value of cell (x, y) for a cell computed here or a
// block sent: one computed by this run (here, or on the cluster), or one
// the run reads but does not compute. A hybrid run keeps in vals every
// cell a cell not done reads, so that blocks cut again (refitBlocks) find
// their inputs there, not only on the edges of the blocks first cut.
func (r *wfRun) input(x, y int) ([]byte, error) {
	if v, ok := r.vals[sparsematrix.Key{X: x, Y: y}]; ok {
		return v, nil
	}
	return r.value(x, y)
}

// store keeps cell (x, y) computed here: in Out, for the cells that read
// it and, on its block's top row or right column, for the blocks that do.
func (r *wfRun) store(x, y int, v []byte) error {
	if err := r.w.Out.Append(x, y, v); err != nil {
		return &writeError{err}
	}
	r.have.set(r.index(x, y))
	r.computed++
	k := sparsematrix.Key{X: x, Y: y}
	r.vals[k] = v
	if rect := r.block(r.blockOf(x, y)); x == rect.X+rect.W-1 || y == rect.Y+rect.H-1 {
		r.edges[k] = v
	}
	if r.w.States != nil {
		r.w.States.Set(x, y, wavefront.Complete)
	}
	if r.w.Progress != nil {
		r.w.Progress(r.computed)
	}
	return nil
}

// blockOf returns the number of the block holding cell (x, y).
func (r *wfRun) blockOf(x, y int) int {
	rg := r.w.Region
	return (y-rg.Y)/r.b*r.nx + (x-rg.X)/r.b
}

// release drops the values that cell (x, y), now done, was the last cell
// here to read (a block's edges stay, for the cluster's jobs).
func (r *wfRun) release(x, y int) {
	for _, in := range [3][2]int{{x - 1, y}, {x, y - 1}, {x - 1, y - 1}} {
		k := sparsematrix.Key{X: in[0], Y: in[1]}
		if _, ok := r.vals[k]; !ok {
			continue
		}
		if r.readBy(in[0]+1, in[1]) && r.readBy(in[0], in[1]+1) && r.readBy(in[0]+1, in[1]+1) {
			delete(r.vals, k)
		}
	}
}

// readBy reports whether cell (x, y) no longer needs its inputs: done, or
// outside the region.
func (r *wfRun) readBy(x, y int) bool {
	return !r.w.Region.Contains(x, y) || r.have.has(r.index(x, y))
}

// refitBlocks cuts the region's blocks again, for the first workers to
// join a hybrid run on Work Queue whose blocks were cut for a cluster of
// no known width: the hybrid model's block side (place.HybridWavefront)
// for this machine's cores not computing for a worker here (local), the
// cores of the workers connected now, and a cluster that takes its first
// block after the time the cores have run alone (elapsed). The cells keep
// their state: a block the cores have touched stays theirs
// (blocks.Hybrid.Resize).
func (r *wfRun) refitBlocks(hy *blocks.Hybrid, local, workers int, elapsed time.Duration, res *WavefrontResult) error {
	cfg := r.cfg
	if r.tau.V <= 0 {
		return nil
	}
	var c place.Cluster
	if cfg.Cluster != nil {
		c = *cfg.Cluster
	}
	c.Kind = "wq"
	c.Hosts = place.Value{V: float64(workers), Source: "the workers connected", Measured: time.Now()}
	c.CoresPerHost = place.Value{V: 1, Source: "the workers connected", Measured: time.Now()}
	// Work Queue's start (place.Cluster.startDispatch) is when the
	// workers take their first block: now, as they have joined.
	c.Dispatch = place.Value{V: elapsed.Seconds(), Source: "the time the cores ran alone", Measured: time.Now()}
	n := max(r.w.Region.W, r.w.Region.H)
	secs, b, detail := place.HybridWavefront(n, local, r.tau.V, &c)
	if limit := int(math.Sqrt(cfg.jobTimeLimit().Seconds() / r.tau.V)); b > limit {
		b = max(limit, 1)
	}
	fmt.Fprintf(cfg.Explain, "the first worker joined after %v, the blocks (%d×%d) cut for no known worker: blocks of %d×%d for the workers' %s connected now (hybrid model, the cluster from %v on: predicted %s, %s)\n",
		elapsed.Round(time.Millisecond), r.b, r.b, b, b, cmdutil.Plural(workers, "core"), elapsed.Round(time.Millisecond), place.Seconds(secs), detail)
	if b == r.b {
		return nil
	}
	if err := hy.Resize(b); err != nil {
		return fmt.Errorf("blocks of %d×%d: %w", b, b, err)
	}
	r.b, r.nx = b, (r.w.Region.W+b-1)/b
	res.JobSize, res.Blocks = b, hy.Blocks()
	if res.Predicted > 0 && !math.IsInf(secs, 0) {
		res.Predicted = time.Duration(secs * float64(time.Second))
	}
	if err := writePlan(r.w.Checkpoint, plan{Problem: r.problem, JobW: b, JobH: b}); err != nil {
		return fmt.Errorf("checkpoint plan: %w", err)
	}
	return nil
}
