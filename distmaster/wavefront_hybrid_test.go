package distmaster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/wq"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/model"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/wavefront"
	"github.com/rightsize/rightsize/wavefront/blocks"
	"github.com/rightsize/rightsize/workqueue"
)

// TestWavefrontHybridByCells runs hybrid Wavefronts by cells (this
// machine's cores take cells, the batch system or Work Queue's workers
// blocks) and checks that they compute what multicore does, every cell
// once: with a cluster that starts jobs at once, or two workers, some
// blocks come back from it; with one whose dispatch outlasts the run,
// every block sent is taken back from its queue and computed here; with a
// Work Queue master no worker connects to, no block is sent.
func TestWavefrontHybridByCells(t *testing.T) {
	script := testutil_writeCellScript(t, "")
	local := func(delay time.Duration) func(t *testing.T) batch.Driver {
		return func(t *testing.T) batch.Driver {
			d := batch.NewLocal(batch.Options{Slots: 16, DispatchDelay: delay, KillDelay: 200 * time.Millisecond})
			t.Cleanup(func() { d.Close(context.Background()) })
			return d
		}
	}
	workQueue := func(workers int) func(t *testing.T) batch.Driver {
		return func(t *testing.T) batch.Driver {
			d := wqDriver(t, "wavefront", FastAbort{})
			if workers > 0 {
				startWorkers(t, d.Port(), workers)
				testutil.WaitFor(t, "the workers to connect", 30*time.Second, func() bool {
					return d.Master().Stats().WorkersConnected == workers
				})
			}
			return d
		}
	}
	for _, tc := range []struct {
		name     string
		fn       string
		n, size  int
		driver   func(t *testing.T) batch.Driver
		allHere  bool // every block sent is taken back
		someAway bool // some block comes back from the cluster
	}{
		{"program, quick cluster", script, 10, 3, local(0), false, true},
		{"builtin, queue never starts", "builtin:sum", 13, 4, local(time.Hour), true, false},
		{"program, queue never starts", script, 9, 2, local(time.Hour), true, false},
		{"program, two Work Queue workers", script, 10, 3, workQueue(2), false, true},
		{"builtin, no Work Queue worker", "builtin:sum", 13, 4, workQueue(0), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.driver(t)
			fn := openCell(t, tc.fn)
			p := newWavefront(t, tc.n)
			p.here = 2
			want := p.multicore(t, fn)
			cfg := testConfig(t, d, "wavefront")
			ended := 0
			cfg.JobEnded = func(e JobEnd) {
				ended++
				if e.Err != nil || e.Here || e.Ended.Before(e.Started) {
					t.Errorf("job ended: %+v", e)
				}
			}
			res, err := p.run(context.Background(), t, cfg, fn, tc.size)
			if err != nil {
				t.Fatal(err)
			}
			if ended != res.Jobs-res.TakenBack {
				t.Errorf("%d jobs ended; %d sent, %d taken back", ended, res.Jobs, res.TakenBack)
			}
			if got := p.result(t); !equalCells(got, want) {
				t.Errorf("%d cells, want %d, or values differ", len(got), len(want))
			}
			cells := tc.n * tc.n
			if res.Computed != cells || res.HereCells > cells {
				t.Errorf("computed %d cells, %d here, of %d", res.Computed, res.HereCells, cells)
			}
			if _, ok := d.(*wq.Driver); ok && tc.allHere && res.Jobs > 0 {
				t.Errorf("%d blocks sent to a master without workers", res.Jobs)
			}
			if _, ok := d.(*wq.Driver); ok && tc.someAway && (res.Dispatch <= 0 || res.Dispatch > 5*time.Second) {
				t.Errorf("least dispatch %v, want Work Queue's measured", res.Dispatch)
			}
			if tc.allHere && (res.HereCells != cells || res.TakenBack != res.Jobs) {
				t.Errorf("%d cells here of %d; %d blocks taken back of %d sent", res.HereCells, cells, res.TakenBack, res.Jobs)
			}
			if away := res.HereCells < cells; away != tc.someAway {
				t.Errorf("%d cells here of %d: want some away %v (%d blocks sent, %d taken back)", res.HereCells, cells, tc.someAway, res.Jobs, res.TakenBack)
			}
		})
	}
}

// TestWavefrontHybridFailingCell: a cell that fails, on the cluster or
// here, stops exactly the cells that depend on it; every other cell is
// computed and kept, and the failed block is named.
func TestWavefrontHybridFailingCell(t *testing.T) {
	// R[1,7] is the only cell whose left input is 7.
	fn := openCell(t, testutil_writeCellScript(t, `[ "$(cat "$1")" = 7 ] && { echo "left is 7" >&2; exit 1; }`))
	p := newWavefront(t, 12)
	p.here = 2
	d := batch.NewLocal(batch.Options{Slots: 16, KillDelay: 200 * time.Millisecond})
	t.Cleanup(func() { d.Close(context.Background()) })
	res, err := p.run(context.Background(), t, testConfig(t, d, "wavefront"), fn, 4)
	var fe *FailedError
	if !errors.As(err, &fe) || len(fe.Blocks) != 1 || fe.Blocks[0].Block != "x1-y5" {
		t.Fatalf("err = %v, want block x1-y5 failed", err)
	}
	// The cells x ≥ 1, y ≥ 7 depend on R[1,7]: 72, one of them failed.
	if res.Computed != 72 || res.NotRun != 71 || len(p.result(t)) != 72 {
		t.Errorf("computed %d, not run %d, kept %d", res.Computed, res.NotRun, len(p.result(t)))
	}
}

// lingeringCell is a Wavefront function whose calls, once cut short,
// linger until the run has returned (which a run that waits for its calls
// never does, so they give up after a while) and say whether they saw it.
type lingeringCell struct {
	funcs.Cell
	started, returned, finished chan struct{}
	once, finish                sync.Once
	sawReturn                   atomic.Bool
}

func (c *lingeringCell) Call(ctx context.Context, x, y, d funcs.Input) ([]byte, error) {
	c.once.Do(func() { close(c.started) })
	<-ctx.Done() // a call cut short by the run's end
	select {
	case <-c.returned:
		c.sawReturn.Store(true)
	case <-time.After(200 * time.Millisecond):
	}
	c.finish.Do(func() { close(c.finished) })
	return nil, ctx.Err()
}

// TestWavefrontHybridWaitsForCalls: a hybrid run by cells that ends while
// its cells are being computed here (cancelled) returns only once their
// calls have returned, so that its caller may close the function.
func TestWavefrontHybridWaitsForCalls(t *testing.T) {
	d := batch.NewLocal(batch.Options{Slots: 16, DispatchDelay: time.Hour, KillDelay: 200 * time.Millisecond})
	t.Cleanup(func() { d.Close(context.Background()) })
	fn := &lingeringCell{Cell: openCell(t, "builtin:sum"), started: make(chan struct{}), returned: make(chan struct{}),
		finished: make(chan struct{})}
	p := newWavefront(t, 6)
	p.here = 2
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-fn.started
		cancel()
	}()
	_, err := p.run(ctx, t, testConfig(t, d, "wavefront"), fn, 2)
	close(fn.returned)
	<-fn.finished
	if !errors.Is(err, context.Canceled) {
		t.Errorf("run: %v, want cancelled", err)
	}
	if fn.sawReturn.Load() {
		t.Error("a call was still running after the run returned")
	}
}

// TestWavefrontHybridSizedByHybridModel: a hybrid run by cells whose
// blocks neither placement nor the caller sized (-T local --hybrid on a
// checkpoint without a plan) takes the block side of the model that
// simulates it, not the distributed model's: on placement's crossover (a
// 20×20 of 50 ms cells, 16 slots a second away) blocks of 4×4, where the
// distributed model would take 5×5.
func TestWavefrontHybridSizedByHybridModel(t *testing.T) {
	named := func(v float64) place.Value { return place.Value{V: v, Source: "RIGHTSIZE_CLUSTER"} }
	cl := &place.Cluster{Kind: "local", Hosts: named(16), CoresPerHost: named(1), Dispatch: named(1)}
	const n, tau = 20, 0.05
	want, wantBlock, _ := place.HybridWavefront(n, 2, tau, cl)
	if ch := model.ChooseWavefront(n, 2, cl.Slots()+2, 1, tau, cl.Dispatch.V); ch.Block == wantBlock {
		t.Fatalf("the distributed model's block is the hybrid one's too (%d): the test tells nothing", wantBlock)
	}
	// A queue that never starts: the run is this machine's, at once.
	d := batch.NewLocal(batch.Options{Slots: 16, DispatchDelay: time.Hour, KillDelay: 200 * time.Millisecond})
	t.Cleanup(func() { d.Close(context.Background()) })
	p := newWavefront(t, n)
	p.here, p.cellTime = 2, &place.Value{V: tau}
	cfg := testConfig(t, d, "wavefront")
	cfg.Kind, cfg.Cluster, cfg.LocalCores = "local", cl, 2
	res, err := p.run(context.Background(), t, cfg, openCell(t, "builtin:sum"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.JobSize != wantBlock || math.Abs(res.Predicted.Seconds()-want) > 1e-6 {
		t.Errorf("blocks of %d×%d, predicted %v; want %d×%d, %.3f s", res.JobSize, res.JobSize, res.Predicted, wantBlock, wantBlock, want)
	}
}

// TestWorkerCores: the cores of a Work Queue master's workers that take
// tasks, and those that compute on this machine's: a worker from a
// loopback address or this machine's interface, all its cores, or only
// those of the tasks it holds while draining.
func TestWorkerCores(t *testing.T) {
	here := func(ip net.IP) bool { return ip.IsLoopback() || ip.Equal(net.ParseIP("10.1.2.3")) }
	for _, tc := range []struct {
		name               string
		workers            []workqueue.WorkerStats
		cluster, onThisOne int
	}{
		{"none", nil, 0, 0},
		{"another machine's", []workqueue.WorkerStats{{Addr: "192.0.2.7:4000", Cores: 8}}, 8, 0},
		{"loopback", []workqueue.WorkerStats{{Addr: "127.0.0.1:4000", Cores: 1}}, 1, 1},
		{"IPv6 loopback", []workqueue.WorkerStats{{Addr: "[::1]:4000", Cores: 2}}, 2, 2},
		{"this machine's interface", []workqueue.WorkerStats{{Addr: "10.1.2.3:4000", Cores: 4}}, 4, 4},
		{"here and elsewhere", []workqueue.WorkerStats{
			{Addr: "127.0.0.1:4000", Cores: 1}, {Addr: "192.0.2.7:4000", Cores: 3}, {Addr: "127.0.0.1:4001", Cores: 1},
		}, 5, 2},
		{"draining here, one task", []workqueue.WorkerStats{{Addr: "127.0.0.1:4000", Cores: 4, CoresInUse: 1, Draining: true}}, 0, 1},
		{"draining here, idle", []workqueue.WorkerStats{{Addr: "127.0.0.1:4000", Cores: 4, Draining: true}}, 0, 0},
		{"half a core here", []workqueue.WorkerStats{{Addr: "127.0.0.1:4000", Cores: 0.5}}, 0, 1},
		{"no address", []workqueue.WorkerStats{{Addr: "", Cores: 2}}, 2, 0},
	} {
		cluster, mine := workerCores(tc.workers, here)
		if cluster != tc.cluster || mine != tc.onThisOne {
			t.Errorf("%s: %d cores, %d on this machine; want %d, %d", tc.name, cluster, mine, tc.cluster, tc.onThisOne)
		}
	}
}

// countedCell is a Wavefront function that counts its calls in flight,
// the most at once in each phase of a test (the phase a call starts in),
// and closes nth as its nth call starts.
type countedCell struct {
	funcs.Cell
	mu            sync.Mutex
	inFlight, n   int
	phase         int
	most          [2]int
	nthCall       int
	nth           chan struct{}
	closedNth     bool
	phaseTwoCalls int
}

func newCountedCell(fn funcs.Cell, nth int) *countedCell {
	return &countedCell{Cell: fn, nthCall: nth, nth: make(chan struct{})}
}

func (c *countedCell) Call(ctx context.Context, x, y, d funcs.Input) ([]byte, error) {
	c.mu.Lock()
	c.inFlight++
	c.n++
	c.most[c.phase] = max(c.most[c.phase], c.inFlight)
	if c.phase == 1 {
		c.phaseTwoCalls++
	}
	if c.n == c.nthCall && !c.closedNth {
		c.closedNth = true
		close(c.nth)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	return c.Cell.Call(ctx, x, y, d)
}

// waitNth waits for the nth call to start, failing the test if the run
// (done) ends first.
func (c *countedCell) waitNth(t *testing.T, done <-chan wfOutcome) {
	t.Helper()
	select {
	case <-c.nth:
	case out := <-done:
		t.Fatalf("the run ended (%v) before call %d of the function", out.err, c.nthCall)
	}
}

func (c *countedCell) nextPhase() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.phase = 1
}

func (c *countedCell) counts() (most [2]int, phaseTwoCalls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.most, c.phaseTwoCalls
}

// TestWavefrontHybridGivesWayToWorkerHere: a Work Queue worker connected
// from this machine (a real one, on 127.0.0.1) computes its blocks on the
// cores the cells here run on: while it is connected, a hybrid run by
// cells on two cores computes one cell at a time here, not two, and says
// so; once it is gone (killed), two again.
func TestWavefrontHybridGivesWayToWorkerHere(t *testing.T) {
	// Cells of 50 ms of the program, so that two cores here would have
	// two at once whenever two are ready.
	fn := newCountedCell(openCell(t, testutil_writeCellScript(t, "sleep 0.05")), 4)
	d := wqDriver(t, "wavefront", FastAbort{})
	ws := startWorkers(t, d.Port(), 1)
	// As the run sees the workers: it looks before its first cell.
	testutil.WaitFor(t, "the worker to join", 30*time.Second, func() bool {
		ws := d.Master().Workers()
		return len(ws) == 1 && ws[0].Cores == 1
	})
	p := newWavefront(t, 8)
	p.here = 2
	want := p.multicore(t, openCell(t, testutil_writeCellScript(t, ""))) // the same values, without the wait
	cfg := testConfig(t, d, "wavefront")
	var explain bytes.Buffer
	cfg.Explain = &explain
	done := p.start(context.Background(), t, cfg, fn, 2)
	fn.waitNth(t, done)
	// The second phase begins before the kill: the run may see the
	// worker gone, and start two cells, as soon as the master does.
	fn.nextPhase()
	ws.kill(0)
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	t.Log(explain.String())
	most, after := fn.counts()
	if most[0] != 1 {
		t.Errorf("%d cells at once here while the worker here was connected, want 1", most[0])
	}
	if most[1] != 2 {
		t.Errorf("%d cells at once here (of %d calls) once the worker here had gone, want 2", most[1], after)
	}
	if got := p.result(t); !equalCells(got, want) {
		t.Errorf("%d cells, want %d, or values differ", len(got), len(want))
	}
	if n := strings.Count(explain.String(), "a worker joined from this machine (1 core)"); n != 1 {
		t.Errorf("the worker here is explained %d times, want once:\n%s", n, explain.String())
	}
}

// TestWavefrontHybridRefitsBlocksForLateWorker: a hybrid run by cells on
// Work Queue with no host listed cuts its blocks for no worker (1×1:
// the hybrid model has no slot to fill); a worker that joins late gets
// blocks cut again for it, by the same model with the workers connected
// then, and the plan keeps that side for a re-run.
func TestWavefrontHybridRefitsBlocksForLateWorker(t *testing.T) {
	const n, tau = 12, 0.05
	cl := &place.Cluster{Kind: "wq", CoresPerHost: place.Value{V: 1}, Dispatch: place.Value{V: 0.05}, JobCost: place.Value{V: 0.05}}
	if _, b, _ := place.HybridWavefront(n, 2, tau, cl); b != 1 {
		t.Fatalf("with no host the model cuts blocks of %d×%d, not 1×1: the test tells nothing", b, b)
	}
	fn := newCountedCell(openCell(t, testutil_writeCellScript(t, "sleep 0.05")), 4)
	d := wqDriver(t, "wavefront", FastAbort{})
	p := newWavefront(t, n)
	p.here, p.cellTime = 2, &place.Value{V: tau, Source: "measured"}
	want := p.multicore(t, openCell(t, testutil_writeCellScript(t, "")))
	cfg := testConfig(t, d, "wavefront")
	cfg.Kind, cfg.Cluster, cfg.LocalCores = "wq", cl, 2
	var explain bytes.Buffer
	cfg.Explain = &explain
	done := p.start(context.Background(), t, cfg, fn, 0)
	fn.waitNth(t, done) // the run has begun with no worker
	startWorkers(t, d.Port(), 1)
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	t.Log(explain.String())
	res := out.res
	if res.JobSize < 2 || res.Jobs == 0 {
		t.Errorf("blocks of %d×%d, %d sent to the worker that joined late; want larger than 1×1, and some sent", res.JobSize, res.JobSize, res.Jobs)
	}
	if pl, err := readPlan(p.matrix, "wavefront "+p.region().String(), io.Discard); err != nil || pl == nil || pl.JobW != res.JobSize {
		t.Errorf("plan %+v (%v), want blocks of %d", pl, err, res.JobSize)
	}
	if got := p.result(t); !equalCells(got, want) {
		t.Errorf("%d cells, want %d, or values differ", len(got), len(want))
	}
	if !strings.Contains(explain.String(), "the first worker joined after") {
		t.Errorf("the new blocks are not explained:\n%s", explain.String())
	}
}

// TestRefitBlocks: blocks cut for no worker are cut again, when the first
// workers join, to the hybrid model's side for this machine's cores left
// to the cells, the workers' cores, and a cluster that starts when they
// joined (measured in logical seconds here); the run's side, its count of
// blocks and its plan follow. A run whose cell time is unknown keeps its
// blocks.
func TestRefitBlocks(t *testing.T) {
	const n = 20
	assumed := &place.Cluster{Kind: "wq", CoresPerHost: place.Value{V: 1}, Dispatch: place.Value{V: 0.05}, JobCost: place.Value{V: 0.05}}
	for _, tc := range []struct {
		name           string
		tau            float64
		local, workers int
		elapsed        time.Duration
		wallTime       time.Duration // the chosen shape's: a job may take half of it
	}{
		{"one worker at once, two cores here", 0.05, 2, 1, 0, 0},
		{"one worker after a second, one core here", 0.05, 1, 1, time.Second, 0},
		{"eight workers", 0.05, 2, 8, 500 * time.Millisecond, 0},
		{"slow cells, jobs of at most a second", 0.4, 2, 1, 0, 2 * time.Second},
		{"cell time unknown", 0, 2, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			region := wavefront.Rect{X: 1, Y: 1, W: n, H: n}
			hy, err := blocks.NewHybrid(region, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkpoint := filepath.Join(t.TempDir(), "R.matrix")
			cfg := &Config{Explain: io.Discard, Cluster: assumed, wallTime: tc.wallTime}
			r := &wfRun{w: &Wavefront{Region: region, Checkpoint: checkpoint}, cfg: cfg, b: 1, nx: n,
				problem: "wavefront " + region.String(), tau: place.Value{V: tc.tau}}
			res := &WavefrontResult{JobSize: 1, Blocks: n * n, Predicted: time.Second}
			if err := r.refitBlocks(hy, tc.local, tc.workers, tc.elapsed, res); err != nil {
				t.Fatal(err)
			}
			want, secs := 1, 1.0
			if tc.tau > 0 {
				c := place.Cluster{Kind: "wq", Hosts: place.Value{V: float64(tc.workers)}, CoresPerHost: place.Value{V: 1},
					Dispatch: place.Value{V: tc.elapsed.Seconds()}, JobCost: assumed.JobCost}
				secs, want, _ = place.HybridWavefront(n, tc.local, tc.tau, &c)
				if limit := int(math.Sqrt(cfg.jobTimeLimit().Seconds() / tc.tau)); want > limit {
					want = limit
				}
			}
			nb := (n + want - 1) / want
			if r.b != want || r.nx != nb || hy.Blocks() != nb*nb || res.JobSize != want || res.Blocks != nb*nb {
				t.Errorf("side %d, %d blocks a row, %d blocks (result: %d, %d); want %d, %d, %d", r.b, r.nx, hy.Blocks(), res.JobSize, res.Blocks, want, nb, nb*nb)
			}
			if want != 1 && math.Abs(res.Predicted.Seconds()-secs) > 1e-6 {
				t.Errorf("predicted %v, want the new blocks' %.3f s", res.Predicted, secs)
			}
			pl, err := readPlan(checkpoint, r.problem, io.Discard)
			switch {
			case want == 1 && pl != nil:
				t.Errorf("plan %+v written for blocks that did not change", pl)
			case want != 1 && (err != nil || pl == nil || pl.JobW != want):
				t.Errorf("plan %+v (%v), want blocks of %d", pl, err, want)
			}
		})
	}
}
