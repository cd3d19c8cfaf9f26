// Package sim simulates Work Queue runs at scales this machine cannot run:
// a discrete-event simulation on a logical clock that drives the
// production state machines — the master's scheduler (workqueue/sched)
// and, where the scenario has them, the worker factory's plan
// (workqueue/factory), and the distributed master's tracker
// (distmaster/jobs) with the Wavefront block scheduler
// (wavefront/blocks) — against simulated workers, network and batch
// system. Every decision in a simulated run is the one the real master
// and factory would take; only the world around them is modelled:
//
//   - tasks: run-time distributions, input, cached shared input and output
//     sizes, attempts that hang;
//   - the network: each transfer crosses the master's network interface,
//     which carries one at a time (FIFO), and the worker's own link, with
//     a latency each way; the master spends its own time on each task;
//   - workers: resources, speed, arrival times (a batch queue's wait),
//     lifetimes (preemption, failed nodes), deaths the master is told of
//     and silent ones only keepalive finds;
//   - a batch system for the factory: queue waits and jobs that fail to
//     start, or a mock LRM with slots that requests wait for room in
//     (LRM, seed 004's).
//
// A Scenario is read from JSON (Load); Run returns a Result with the
// makespan, utilisation, worker time, transfer volume and a timeline
// (Result.WriteTimeline draws it). The same scenario and seed give the same
// result.
package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/model/capacity"
	"github.com/rightsize/rightsize/workqueue/factory"
	"github.com/rightsize/rightsize/workqueue/sched"
)

// epoch is time zero of every simulated run; the state machines get
// epoch plus the simulated seconds.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

type eventKind uint8

const (
	evSubmit   eventKind = iota // task submitted
	evJoin                      // worker connects
	evDeath                     // worker dies
	evReport                    // attempt reports to the master
	evFetched                   // attempt's outputs are in
	evHeard                     // worker answers a keepalive check
	evTick                      // the master's tick
	evFactory                   // the factory looks at the master
	evJobStart                  // a factory job starts: its worker connects
	evJobFail                   // a factory job fails to start
	evSteal                     // a master may steal (Masters.Steal)
	evStolen                    // stolen tasks reach their new master
	evLRMPoll                   // the LRM's scheduler's periodic pass
	evLRMPass                   // the LRM's scheduler's pass when slots free
)

// periodic reports whether events of kind k come round whatever happens:
// they do not keep a stalled run going.
func (k eventKind) periodic() bool {
	return k == evTick || k == evFactory || k == evHeard || k == evSteal || k == evLRMPoll
}

type event struct {
	at     float64
	seq    uint64 // ties broken by the order events were made
	kind   eventKind
	task   sched.TaskID
	worker sched.WorkerID
	master int32
	a      *attempt
	ids    []sched.TaskID // evStolen
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type simTask struct {
	group       int32   // in Scenario.Tasks; -1 for a block's job
	m           int32   // its master; -1 while stolen tasks travel
	dispatched  bool    // it has left its first master's queue
	runtime     float64 // on a worker of speed 1
	inMB, outMB float64
	live        int32 // attempts running
	fetching    bool
	finished    bool
}

type simWorker struct {
	id       sched.WorkerID
	g        *WorkerGroup
	m        *master
	lifetime sampler // how long it lives once connected; nil: for ever
	job      string  // the factory's job, if it is one
	slots    int     // the LRM's slots its job holds
	joined   float64 // when it connected; -1 before
	left     float64 // when it left; -1 before
	// silent: dead, but the master was not told; it answers nothing.
	silent    bool
	cached    map[int32]bool // the shared inputs it holds, by engine.sharedInput
	attempts  map[sched.TaskID]*attempt
	idleSince float64 // -1 while it holds a task
}

func (w *simWorker) connected() bool { return w.joined >= 0 && w.left < 0 }

type attempt struct {
	task    sched.TaskID
	w       *simWorker
	sentMB  float64 // its inputs the master sent, shared ones included
	cores   float64
	start   float64 // when it started running on the worker
	exec    float64 // how long it ran, once it has reported
	running bool    // until it reports or dies
	dead    bool    // aborted, discarded, or its worker gone
}

type engine struct {
	sc      Scenario
	src     rand.Source
	rng     *rand.Rand
	now     float64
	seq     uint64
	events  eventHeap
	masters []*master
	plan    *factory.Plan
	// capacity is the master's window of finished tasks, as the real
	// master keeps it; the factory decides on what it advertises of it
	// (advertised).
	capacity capacity.Window
	// advertisedCapacity is what the factory read at its last look (0:
	// none yet).
	advertisedCapacity int
	tasks              []simTask
	// sharedInput numbers each task group's shared input, the same for
	// groups that name the same one; sharedKey is the scheduler's name of
	// each number's input.
	sharedInput []int32
	sharedKey   []string
	workers     []*simWorker // by ID - 1
	queueWait   sampler      // the factory's batch queue
	lrm         *lrm         // or its LRM

	blocks                   *blockRun // nil without Scenario.Blocks
	blocksDone, blocksFailed int

	// Counts of the run, kept as it goes.
	plainTasks                           int // of Scenario.Tasks
	submitted, finished, failed, running int
	fetching, connected                  int
	lastEnd                              float64

	// pending counts the events in the heap that are not periodic;
	// lastChange is when something last happened beyond those.
	pending    int
	lastChange float64
	stalled    bool

	res                     Result
	nextSample, sampleEvery float64
}

// Run simulates sc until every task has finished or failed, sc.Limit is
// reached, ctx ends, or the run has stalled: nothing but periodic checks
// is to come, and nothing has happened for as long as the run had lasted
// (and at least ten simulated minutes) — tasks no worker can take, attempts
// that hang with fast abort off, no worker left.
func Run(ctx context.Context, sc *Scenario) (*Result, error) {
	if err := sc.check(); err != nil {
		return nil, err
	}
	e := &engine{sc: sc.withDefaults()}
	e.src = rand.NewPCG(sc.Seed, 0x5eed)
	e.rng = rand.New(e.src)
	if err := e.setup(); err != nil {
		return nil, err
	}
	for n := 0; len(e.events) > 0 && !e.over() && !e.stalled; n++ {
		if n&4095 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ev := heap.Pop(&e.events).(event)
		if ev.at > e.sc.Limit {
			e.now = e.sc.Limit
			e.res.Unfinished = true
			break
		}
		e.now = ev.at
		e.res.Events++
		if !ev.kind.periodic() {
			e.pending--
			e.lastChange = e.now
		}
		e.handle(ev)
	}
	return e.result(), nil
}

// over reports whether every task and block has ended.
func (e *engine) over() bool {
	if e.blocks != nil && !e.blocks.tr.Idle() {
		return false
	}
	return e.finished+e.failed == e.plainTasks
}

func (e *engine) push(ev event) {
	if !ev.kind.periodic() {
		e.pending++
	}
	e.seq++
	ev.seq = e.seq
	heap.Push(&e.events, ev)
}

func (e *engine) at(sec float64) time.Time {
	return epoch.Add(time.Duration(sec * float64(time.Second)))
}

func (e *engine) setup() error {
	sc := &e.sc
	cfg := sched.Config{
		FastAbort:   sched.FastAbort{Multiplier: sc.Scheduler.FastAbort},
		SlowStart:   sc.Scheduler.SlowStart,
		Speculation: sched.Speculation{Multiplier: sc.Scheduler.Speculation},
		Keepalive: sched.Keepalive{
			Interval: seconds(sc.Scheduler.KeepaliveInterval),
			Timeout:  seconds(sc.Scheduler.KeepaliveTimeout),
		},
	}
	k := 1
	if sc.Masters != nil {
		k = sc.Masters.Count
	}
	// A master starts stealing when its first worker finds nothing to do
	// (hungry).
	for i := range k {
		e.masters = append(e.masters, &master{id: i, s: sched.New(cfg)})
	}
	total := 0
	for _, g := range sc.Tasks {
		total += g.Count
	}
	e.plainTasks = total
	e.sharedInput = make([]int32, len(sc.Tasks))
	e.sharedKey = make([]string, len(sc.Tasks))
	named := map[string]int32{}
	for gi, g := range sc.Tasks {
		e.sharedInput[gi] = int32(gi)
		e.sharedKey[gi] = fmt.Sprint("shared-", gi)
		if g.SharedInput != "" {
			if first, ok := named[g.SharedInput]; ok {
				e.sharedInput[gi] = first
			} else {
				named[g.SharedInput] = int32(gi)
			}
		}
	}
	e.tasks = make([]simTask, 0, total)
	for gi, g := range sc.Tasks {
		run, submit := g.Runtime.sampler(e.src), g.Submit.sampler(e.src)
		for range g.Count {
			m := 0
			if sc.Masters != nil && sc.Masters.Submit != "one" {
				m = len(e.tasks) % k
			}
			e.tasks = append(e.tasks, simTask{group: int32(gi), m: int32(m), runtime: run(), inMB: g.InputMB, outMB: g.OutputMB})
			id := sched.TaskID(len(e.tasks))
			e.push(event{at: submit(), kind: evSubmit, task: id})
		}
	}
	for gi := range sc.Workers {
		g := &sc.Workers[gi]
		arrive := g.Arrive.sampler(e.src)
		var life sampler
		if g.Lifetime != nil {
			life = g.Lifetime.sampler(e.src)
		}
		for range g.Count {
			w := e.newWorker(g, life)
			e.push(event{at: arrive(), kind: evJoin, worker: w.id})
		}
	}
	if f := sc.Factory; f != nil {
		policy := factory.D3
		if f.Decision != "" {
			p, err := factory.ParsePolicy(f.Decision)
			if err != nil {
				return fmt.Errorf("factory: %w", err)
			}
			policy = p
		}
		var strategy factory.Strategy
		var err error
		if f.Strategy != "" {
			if strategy, err = factory.ParseStrategy(f.Strategy); err != nil {
				return fmt.Errorf("factory: %w", err)
			}
		}
		plan, err := factory.NewPlan(factory.Limits{Min: f.Min, Max: f.Max,
			TasksPerWorker: max(1, int(f.Worker.Cores)), Policy: policy,
			MaxChange: f.MaxChange, DefaultCapacity: f.DefaultCapacity, Strategy: strategy}, e.at(0))
		if err != nil {
			return err
		}
		e.plan = plan
		e.queueWait = f.QueueWait.sampler(e.src)
		if f.LRM != nil {
			e.lrm = newLRM(*f.LRM, e.src)
			e.push(event{at: e.lrm.conf.FirstPoll, kind: evLRMPoll})
			for _, t := range e.lrm.rises() {
				e.push(event{at: t, kind: evLRMPass})
			}
		}
		e.push(event{at: 0, kind: evFactory})
	}
	if sc.Blocks != nil {
		r, err := newBlockRun(sc.Blocks, sc.Blocks.CellTime.sampler(e.src))
		if err != nil {
			return fmt.Errorf("blocks: %w", err)
		}
		e.blocks = r
		e.submitBlocks(e.at(0))
	}
	e.sampleEvery = sc.Master.Tick
	e.push(event{at: sc.Master.Tick, kind: evTick})
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (e *engine) newWorker(g *WorkerGroup, lifetime sampler) *simWorker {
	w := &simWorker{id: sched.WorkerID(len(e.workers) + 1), g: g, lifetime: lifetime, joined: -1, left: -1, idleSince: -1,
		m:      e.masters[len(e.workers)%len(e.masters)],
		cached: map[int32]bool{}, attempts: map[sched.TaskID]*attempt{}}
	e.workers = append(e.workers, w)
	return w
}

func (e *engine) worker(id sched.WorkerID) *simWorker { return e.workers[id-1] }

func (e *engine) handle(ev event) {
	now := e.at(e.now)
	switch ev.kind {
	case evSubmit:
		e.submitted++
		t := &e.tasks[ev.task-1]
		e.submitTo(e.masters[t.m], ev.task, e.schedTask(ev.task))
	case evStolen:
		m := e.masters[ev.master]
		for _, id := range ev.ids {
			e.submitTo(m, id, e.schedTask(id))
		}
	case evSteal:
		e.steal(e.masters[ev.master])
	case evJoin, evJobStart:
		w := e.worker(ev.worker)
		if ev.kind == evJobStart {
			e.plan.Started(w.job)
		}
		w.joined, w.idleSince = e.now, e.now
		e.connected++
		e.res.WorkersJoined++
		if w.lifetime != nil {
			e.push(event{at: e.now + w.lifetime(), kind: evDeath, worker: w.id})
		}
		w.m.cores += w.g.Cores
		defer e.hungry(w.m)
		e.apply(w.m.s.WorkerJoined(w.id, fmt.Sprintf("w%d", w.id), sched.Resources{
			Cores: w.g.Cores, MemoryMB: w.g.MemoryMB, DiskMB: w.g.DiskMB}, now))
	case evDeath:
		w := e.worker(ev.worker)
		if !w.connected() || w.silent {
			return
		}
		e.res.WorkersDied++
		if e.rng.Float64() < w.g.Silent {
			w.silent = true // it holds its tasks until keepalive gives it up
			for _, a := range w.attempts {
				e.kill(a)
			}
			return
		}
		e.leave(w, batch.Status{State: batch.Done, ExitCode: 137})
		e.apply(w.m.s.WorkerLeft(w.id, now))
	case evReport:
		if ev.a.dead {
			return
		}
		e.apply(ev.a.w.m.s.TaskDone(ev.a.task, ev.a.w.id, true, now))
	case evFetched:
		if ev.a.dead {
			return
		}
		e.apply(ev.a.w.m.s.Fetched(ev.a.task, ev.a.w.id, now))
	case evHeard:
		if w := e.worker(ev.worker); w.connected() && !w.silent {
			w.m.s.Heard(w.id, now)
		}
	case evTick:
		for _, m := range e.masters {
			e.apply(m.s.Tick(now))
		}
		e.sample()
		e.stalled = e.pending == 0 && e.now-e.lastChange > max(600, e.lastChange)
		e.push(event{at: e.now + e.sc.Master.Tick, kind: evTick})
	case evFactory:
		e.factory(now)
	case evLRMPoll, evLRMPass:
		ws, at := e.lrm.pass(e.now)
		for i, w := range ws {
			e.push(event{at: at[i], kind: evJobStart, worker: w.id})
		}
		if ev.kind == evLRMPoll && !e.over() {
			e.push(event{at: e.now + e.lrm.conf.Poll, kind: evLRMPoll})
		}
	case evJobFail:
		w := e.worker(ev.worker)
		e.plan.Ended(batch.Event{ID: w.job, Status: batch.Status{State: batch.Failed,
			Err: fmt.Errorf("simulated: %w", batch.ErrRejected)}}, now)
	}
}

// schedTask is what the scheduler is told of task id.
func (e *engine) schedTask(id sched.TaskID) sched.Task {
	t := &e.tasks[id-1]
	if t.group < 0 {
		return sched.Task{ID: id, Category: e.blocks.b.Kind}
	}
	g := &e.sc.Tasks[t.group]
	st := sched.Task{ID: id, Category: g.Category,
		Need: sched.Resources{Cores: g.Cores, MemoryMB: g.MemoryMB, DiskMB: g.DiskMB}}
	if g.SharedInputMB > 0 {
		// A cached input, as the real master tells its scheduler: a
		// worker that holds it is preferred.
		st.Inputs = []sched.Input{{Key: e.sharedKey[e.sharedInput[t.group]], Size: int64(g.SharedInputMB * 1e6)}}
	}
	return st
}

// apply carries out the scheduler's actions in the simulated world.
func (e *engine) apply(acts []sched.Action) {
	for _, act := range acts {
		switch act.(type) {
		case sched.Check, sched.Warning:
		default:
			e.lastChange = e.now
		}
		switch a := act.(type) {
		case sched.Dispatch:
			e.dispatch(a)
		case sched.Abort:
			if at := e.worker(a.Worker).attempts[a.Task]; at != nil {
				e.kill(at)
				delete(at.w.attempts, a.Task)
				e.idle(at.w)
			}
			if a.Reason == sched.FastAborted {
				e.res.FastAborts++
			}
		case sched.Fetch:
			at := e.worker(a.Worker).attempts[a.Task]
			t := &e.tasks[a.Task-1]
			e.end(at)
			at.exec = e.now - at.start
			t.fetching = true
			e.fetching++
			out := t.outMB
			e.res.MBFromWorkers += out
			done := e.transfer(e.now+e.sc.Master.Latency, out, at.w)
			e.push(event{at: done, kind: evFetched, a: at})
			e.res.BusyCoreSeconds += at.cores * (e.now - at.start)
		case sched.Discard:
			if at := e.worker(a.Worker).attempts[a.Task]; at != nil {
				e.kill(at)
				delete(at.w.attempts, a.Task)
				e.idle(at.w)
			}
			e.res.Discarded++
		case sched.Complete:
			t := &e.tasks[a.Task-1]
			t.finished = true
			if t.fetching {
				t.fetching = false
				e.fetching--
			}
			e.lastEnd = e.now
			w := e.worker(a.Worker)
			if at := w.attempts[a.Task]; at != nil {
				// What the master measures of it, for its capacity: its
				// share of the master's network time (workqueue's
				// shareClock), which on the simulated interface, one
				// transfer at a time, is its own transfers' time: the
				// inputs it sent, a shared input the worker did not hold
				// yet included (the real master times every input it
				// sends), and its outputs.
				e.capacity.Add(capacity.Sample{Exec: seconds(at.exec),
					Transfer: seconds((at.sentMB + t.outMB) / e.sc.Master.Bandwidth), Think: seconds(e.sc.Master.TaskCost)})
			}
			delete(w.attempts, a.Task)
			e.idle(w)
			if t.group < 0 {
				e.blockEnded(a.Task, nil, e.at(e.now))
			} else {
				e.finished++
			}
		case sched.Fail:
			t := &e.tasks[a.Task-1]
			if t.fetching {
				t.fetching = false
				e.fetching--
			}
			t.finished = true
			e.lastEnd = e.now
			if t.group < 0 {
				e.blockEnded(a.Task, errors.New(a.Reason), e.at(e.now))
			} else {
				e.failed++
			}
		case sched.Check:
			if w := e.worker(a.Worker); !w.silent {
				e.push(event{at: e.now + 2*e.sc.Master.Latency, kind: evHeard, worker: w.id})
			}
		case sched.DropWorker:
			w := e.worker(a.Worker)
			if w.connected() {
				e.res.WorkersDropped++
				e.leave(w, batch.Status{State: batch.Done})
			}
		case sched.Warning:
			e.res.Warnings++
		}
	}
}

// dispatch starts an attempt: the master spends its time on the task, the
// inputs cross the network, and the task runs.
func (e *engine) dispatch(d sched.Dispatch) {
	w := e.worker(d.Worker)
	t := &e.tasks[d.Task-1]
	e.res.Attempts++
	if d.Copy {
		e.res.Copies++
	}
	m := w.m
	m.free = math.Max(e.now, m.free) + e.sc.Master.TaskCost
	e.dispatched(m, t)
	m.busy += d.Alloc.Cores
	mb := t.inMB
	hang := 0.0
	if t.group >= 0 {
		g := &e.sc.Tasks[t.group]
		if in := e.sharedInput[t.group]; g.SharedInputMB > 0 && !w.cached[in] {
			mb += g.SharedInputMB
			w.cached[in] = true
		}
		hang = g.Hang
	}
	e.res.MBToWorkers += mb
	start := e.transfer(m.free, mb, w) + w.g.TaskCost
	at := &attempt{task: d.Task, w: w, sentMB: mb, cores: d.Alloc.Cores, start: start, running: true}
	if t.live == 0 {
		e.running++
	}
	t.live++
	w.attempts[d.Task] = at
	w.idleSince = -1
	if w.silent {
		return // it will never answer
	}
	if hang > 0 && e.rng.Float64() < hang {
		return // it never ends
	}
	e.push(event{at: start + t.runtime/w.g.Speed + e.sc.Master.Latency, kind: evReport, a: at})
}

// transfer sends mb from time start over the master's interface, one
// transfer at a time, and w's link, and returns when it has arrived.
func (e *engine) transfer(start, mb float64, w *simWorker) float64 {
	if mb <= 0 {
		return start + e.sc.Master.Latency
	}
	m := w.m
	m.nicFree = math.Max(start, m.nicFree) + mb/e.sc.Master.Bandwidth
	return math.Max(m.nicFree, start+mb/w.g.Bandwidth) + e.sc.Master.Latency
}

// end records that attempt a no longer runs.
func (e *engine) end(a *attempt) {
	if !a.running {
		return
	}
	a.running = false
	a.w.m.busy -= a.cores
	e.hungry(a.w.m)
	t := &e.tasks[a.task-1]
	t.live--
	if t.live == 0 {
		e.running--
	}
}

// kill ends attempt a for good: whatever it would report is lost.
func (e *engine) kill(a *attempt) {
	if a.dead {
		return
	}
	if t := &e.tasks[a.task-1]; !a.running && t.fetching {
		// Its outputs were coming: the scheduler puts the task back.
		t.fetching = false
		e.fetching--
	}
	e.end(a)
	a.dead = true
}

// idle notes that w may have no task left.
func (e *engine) idle(w *simWorker) {
	if len(w.attempts) == 0 && w.idleSince < 0 {
		w.idleSince = e.now
	}
}

// leave disconnects w; a factory's worker's job ends with st.
func (e *engine) leave(w *simWorker, st batch.Status) {
	for _, a := range w.attempts {
		e.kill(a)
	}
	clear(w.attempts)
	w.m.cores -= w.g.Cores
	w.left = e.now
	e.connected--
	e.res.WorkerSeconds += e.now - w.joined
	e.res.CoreSeconds += w.g.Cores * (e.now - w.joined)
	if w.job != "" {
		e.plan.Ended(batch.Event{ID: w.job, Status: st}, e.at(e.now))
		if e.lrm != nil {
			e.lrm.release(w.slots)
			e.push(event{at: e.now, kind: evLRMPass})
		}
	}
}

// factory does what the factory does every interval: tells its plan what
// the master says, submits the workers it wants, and lets idle workers go
// at their timeout.
func (e *engine) factory(now time.Time) {
	f := e.sc.Factory
	for _, w := range e.workers {
		if w.job != "" && w.connected() && !w.silent && len(w.attempts) == 0 && w.idleSince >= 0 &&
			e.now-w.idleSince >= f.IdleTimeout {
			e.leave(w, batch.Status{State: batch.Done})
			e.apply(w.m.s.WorkerLeft(w.id, now))
		}
	}
	d := factory.Demand{Masters: 1, Tasks: e.submitted - e.finished - e.failed, Workers: e.connected}
	busy := 0
	for _, w := range e.workers {
		if w.connected() && len(w.attempts) > 0 {
			busy++
		}
	}
	e.advertisedCapacity = e.advertised(busy)
	if e.advertisedCapacity > 0 {
		d.Capacities = []factory.MasterCapacity{{Tasks: d.Tasks, Capacity: e.advertisedCapacity}}
	}
	e.plan.Observe(d, now)
	if e.lrm != nil {
		e.plan.ObserveFree(e.lrm.free(e.now))
	}
	next := e.plan.Next(now)
	if next.Err != nil {
		e.res.FactoryErr = next.Err.Error()
		return
	}
	for _, k := range next.Requests {
		w := e.newWorker(f.request(k), nil)
		w.job = fmt.Sprint(w.id)
		w.slots = k
		e.plan.Submitted(w.job, k)
		e.res.JobsSubmitted++
		if e.lrm != nil {
			e.lrm.submit(w, k, e.now)
			continue
		}
		kind := evJobStart
		if f.FailStart > 0 && e.rng.Float64() < f.FailStart {
			kind = evJobFail
		}
		e.push(event{at: e.now + e.queueWait(), kind: kind, worker: w.id})
	}
	if !e.over() {
		e.push(event{at: e.now + f.Interval, kind: evFactory})
	}
}

// advertised is the capacity the master advertises (capacity_tasks,
// workqueue.Stats.CapacityTasks) with busy workers, which the real factory
// reads: the workers it keeps busy (capacity.Window.Workers), in whole
// workers, at least 1; 0 before a task has finished.
func (e *engine) advertised(busy int) int {
	c, ok := e.capacity.Workers(busy)
	if !ok {
		return 0
	}
	return int(max(1, min(c, 1e9)))
}

// sample adds a point to the timeline, at most every sampleEvery; when
// the timeline grows past maxSamples it keeps every other point and
// samples half as often.
func (e *engine) sample() {
	const maxSamples = 2000
	if e.now < e.nextSample {
		return
	}
	s := Sample{Time: e.now, Workers: e.connected,
		Running: e.running, Waiting: e.submitted - e.finished - e.failed - e.running - e.fetching,
		Finished: e.finished, Capacity: e.advertisedCapacity}
	if e.plan != nil {
		s.Target = e.plan.Counts().Target
	}
	e.res.Timeline = append(e.res.Timeline, s)
	if len(e.res.Timeline) > maxSamples {
		tl := e.res.Timeline
		for i := range len(tl) / 2 {
			tl[i] = tl[2*i]
		}
		e.res.Timeline = tl[:len(tl)/2]
		e.sampleEvery *= 2
	}
	e.nextSample = e.now + e.sampleEvery
}

func (e *engine) result() *Result {
	r := &e.res
	r.Name = e.sc.Name
	r.Tasks = e.plainTasks
	r.Finished, r.Failed = e.finished, e.failed
	if e.blocks != nil {
		r.Blocks, r.BlocksDone, r.BlocksFailed = e.blocks.blocks(), e.blocksDone, e.blocksFailed
	}
	r.Makespan = e.lastEnd
	r.Stalled = e.stalled
	if r.Unfinished || !e.over() {
		r.Unfinished = true
		r.Makespan = e.now
	}
	for _, w := range e.workers {
		if w.connected() {
			r.WorkerSeconds += r.Makespan - w.joined
			r.CoreSeconds += w.g.Cores * (r.Makespan - w.joined)
			if w.job != "" && !r.Unfinished && w.idleSince >= 0 {
				r.IdleAfterSeconds += max(0, w.idleSince+e.sc.Factory.IdleTimeout-r.Makespan)
			}
		}
	}
	if r.CoreSeconds > 0 {
		r.Utilisation = r.BusyCoreSeconds / r.CoreSeconds
	}
	e.sampleEvery, e.nextSample = 0, 0
	e.sample()
	return r
}
