package workqueue

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/rightsize/rightsize/model/capacity"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/sched"
)

// Events the loop receives.
type event interface{}

type (
	evSubmit struct{ e *entry }
	evCancel struct {
		id int
		// waiting cancels the task only if no worker has it.
		waiting bool
		reply   chan bool
	}
	evStats   struct{ reply chan Stats }
	evWorkers struct{ reply chan []WorkerStats }
	// evStatus asks for a status answer ("queue", "task", "worker", ...,
	// or "catalog" for the catalog record) as JSON bytes.
	evStatus struct {
		kind  string
		reply chan []byte
	}
	evWorkerJoined struct {
		w        *workerConn
		res      sched.Resources
		features []string
	}
	evWorkerLeft struct {
		w   *workerConn
		err error
	}
	// evReported: a worker reported an attempt finished; fetch fetches its
	// outputs if the loop takes its result.
	evReported struct {
		a     *attempt
		ok    bool
		fetch *fetchJob
	}
	// evFetched: an attempt's outputs are in; r is the task's result.
	evFetched struct {
		a *attempt
		r *Result
	}
	// evInputMissing: an attempt could not be sent for want of an input.
	evInputMissing struct {
		a   *attempt
		err error
	}
	// evForsaken: a worker gave an attempt back (CCTools' FORSAKEN).
	evForsaken struct{ a *attempt }
	// evPoolDecisions: the workers each pool gives this master, as the
	// catalog says now.
	evPoolDecisions struct{ byPool map[string]enforce.Quota }
)

// tickInterval is how often fast abort and keepalives are checked.
const tickInterval = 200 * time.Millisecond

// loop carries out the scheduler's decisions: it feeds it the events the
// workers' connections report and does what its actions say. It owns the
// scheduler and the entries and is the only goroutine that touches them;
// where a task is in its life is the scheduler's to know (TaskState).
type loop struct {
	m        *Master
	s        *sched.Scheduler
	tasks    map[int]*entry
	workers  map[sched.WorkerID]*workerConn
	nextWire int

	window capacity.Window
	ewma   capacity.EWMA
	st     Stats

	// enforcer carries out the pools' decisions (package enforce): it
	// hears of the pools' workers, their tasks and the decisions, and
	// says which to drain and release.
	enforcer *enforce.Enforcer
}

func newLoop(m *Master) *loop {
	return &loop{
		m: m,
		s: sched.New(sched.Config{
			FastAbort: m.cfg.FastAbort, Categories: m.cfg.FastAbortCategories, MaxLost: m.cfg.MaxLost,
			SlowStart: m.cfg.SlowStart, Speculation: m.cfg.Speculation,
			Keepalive: sched.Keepalive{Interval: m.cfg.KeepaliveInterval, Timeout: m.cfg.KeepaliveTimeout},
		}),
		tasks:   map[int]*entry{},
		workers: map[sched.WorkerID]*workerConn{},
		// A worker of a pool back within an advertising interval of
		// its release was not sent back by the pool's decision, which
		// learns of this master's room from its record.
		enforcer: enforce.NewEnforcer(m.cfg.AdvertiseInterval),
	}
}

func (l *loop) run() {
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	for {
		select {
		case ev := <-l.m.events:
			l.handle(ev)
		case now := <-tick.C:
			for _, w := range l.workers {
				l.s.Heard(w.id, time.Unix(0, w.lastHeard.Load()))
			}
			l.apply(l.s.Tick(now), now)
			l.sendHeld()
		case <-l.m.done:
			return // each worker connection releases its worker
		}
	}
}

func (l *loop) handle(ev event) {
	now := time.Now()
	switch ev := ev.(type) {
	case evSubmit:
		e := ev.e
		l.tasks[e.id] = e
		l.st.TasksSubmitted++
		l.apply(l.s.Submit(e.sched, now), now)
		e.think += time.Since(now)
	case evCancel:
		e, ok := l.tasks[ev.id]
		if ok && ev.waiting {
			ok = l.s.TaskState(e.sched.ID) == sched.Waiting
		}
		if ok {
			l.apply(l.s.Cancel(e.sched.ID, now), now)
			l.finish(e)
			l.st.TasksCancelled++
			l.m.outstanding.Add(-1)
		}
		ev.reply <- ok
	case evStats:
		ev.reply <- l.stats()
	case evWorkers:
		ev.reply <- l.workerStats()
	case evStatus:
		ev.reply <- l.status(ev.kind, now)
	case evWorkerJoined:
		w := ev.w
		drain := false
		if _, known := l.workers[w.id]; !known {
			l.workers[w.id] = w
			l.st.WorkersJoined++
			l.m.log.Info("worker joined", "worker", w.addr, "host", w.hello.Host, "version", w.hello.Version,
				"cores", ev.res.Cores, "memory_mb", ev.res.MemoryMB, "disk_mb", ev.res.DiskMB)
			if f := l.m.cfg.Joined; f != nil {
				f(WorkerInfo{Addr: w.conn.RemoteAddr(), Host: w.hello.Host, Cores: ev.res.Cores, Features: ev.features})
			}
			if w.poolName() != "" {
				var released bool
				if drain, released = l.poolWorkerJoined(w, ev.res.Cores, now); released {
					return
				}
			}
		}
		if drain {
			// Drained as it joins, so that it takes none of the
			// tasks waiting here.
			l.apply(l.s.WorkerJoinedDrained(w.id, w.host, ev.res, now), now)
		} else {
			l.apply(l.s.WorkerJoined(w.id, w.host, ev.res, now), now)
		}
		l.touch(w, now)
	case evWorkerLeft:
		l.workerLeft(ev.w, ev.err, now)
	case evReported:
		l.reported(ev.a, ev.ok, ev.fetch, now)
	case evFetched:
		l.fetched(ev.a, ev.r, now)
	case evInputMissing:
		// The attempt ended without running: its result is complete
		// with nothing to fetch.
		a := ev.a
		acts := l.s.TaskDone(a.e.sched.ID, a.worker.id, false, now)
		if _, ok := acts[0].(sched.Fetch); ok {
			acts = append(acts, l.s.Fetched(a.e.sched.ID, a.worker.id, now)...)
			a.result = &Result{Status: InputMissing, ExitCode: -1, Err: ev.err, Worker: a.worker.addr, Dispatched: a.dispatched}
			l.keep(a)
		}
		l.apply(acts[1:], now)
		l.touch(a.worker, now)
	case evForsaken:
		l.forsaken(ev.a, now)
		l.touch(ev.a.worker, now)
	case evPoolDecisions:
		l.syncHolds(now)
		l.enforce(l.enforcer.DecidedQuotas(ev.byPool, now), now)
	}
}

// sendHeld sends what the workers' connections hold (a fetch's cleanup,
// workerConn.hold) that went with no later message.
func (l *loop) sendHeld() {
	for _, w := range l.workers {
		if w.hasHeld() {
			w.kick()
		}
	}
}

// poolWorkerJoined tells the enforcer of a pool's worker that joined,
// before the scheduler hears of it, so that a worker beyond its pool's
// decision is released before it is given a task. It reports whether the
// enforcer drains the worker (for the scheduler to do, once it knows it)
// or has released it. cores are the cores it offers, by which it counts
// against its pool's decision.
func (l *loop) poolWorkerJoined(w *workerConn, cores float64, now time.Time) (drain, released bool) {
	l.syncHolds(now)
	acts := l.enforcer.Joined(enforce.Joining{ID: int(w.id), Pool: w.poolName(), Key: w.workerKey(), Cores: cores}, now)
	for _, a := range acts {
		drain = drain || a.Worker == int(w.id) && a.Verb == enforce.Drain
	}
	l.enforce(acts, now)
	_, kept := l.workers[w.id]
	return drain, !kept
}

// touch tells the enforcer the tasks worker w holds now, after they may
// have changed; a drained worker whose last task is done is released at
// once.
func (l *loop) touch(w *workerConn, now time.Time) {
	if w == nil || w.poolName() == "" {
		return
	}
	if n, _, ok := l.s.Holds(w.id); ok {
		l.enforce(l.enforcer.Holds(int(w.id), n, now), now)
	}
}

// syncHolds tells the enforcer the tasks every pool's worker holds, so
// that it decides on what they hold now.
func (l *loop) syncHolds(now time.Time) {
	if !l.enforcer.Active() {
		return
	}
	for _, w := range l.workers {
		l.touch(w, now)
	}
}

// enforce does what the enforcer says (seed 000 §4.5.1): a pool's
// workers beyond what it gives this master get no new tasks, and each is
// released once it holds none, to serve another master; one that came
// straight back after its release is kept drained instead.
func (l *loop) enforce(acts []enforce.Action, now time.Time) {
	for _, a := range acts {
		w := l.workers[sched.WorkerID(a.Worker)]
		if w == nil {
			continue
		}
		switch a.Verb {
		case enforce.Release:
			if n, _, _ := l.s.Holds(w.id); n > 0 {
				// Never mid-task: it holds a task the enforcer did
				// not hear of. Told again, it drains the worker and
				// releases it once it holds none.
				l.m.log.Warn("worker not released: it holds tasks", "worker", w.addr, "tasks", n)
				l.enforce(l.enforcer.Joined(enforce.Joining{ID: a.Worker, Pool: a.Pool, Holds: n, Cores: l.cores(w)}, now), now)
				continue
			}
			l.releaseWorker(w, a.Decision, now)
		case enforce.Drain:
			msg := "worker draining: beyond its pool's decision"
			if a.Back {
				msg = "worker kept drained: back after its release, beyond its pool's decision"
			}
			l.m.log.Info(msg, "worker", w.addr, "pool", a.Pool, "decision", a.Decision, "tasks", a.Holds)
			l.apply(l.s.Drain(w.id, true, now), now)
		case enforce.Undrain:
			l.apply(l.s.Drain(w.id, false, now), now)
		}
	}
}

// releaseWorker lets a worker that holds no task go, to serve another
// master.
func (l *loop) releaseWorker(w *workerConn, decision int, now time.Time) {
	delete(l.workers, w.id)
	l.st.WorkersReleased++
	l.m.log.Info("worker released: beyond its pool's decision", "worker", w.addr, "pool", w.poolName(), "decision", decision)
	l.apply(l.s.WorkerLeft(w.id, now), now)
	w.release()
}

// apply carries out the scheduler's actions.
func (l *loop) apply(acts []sched.Action, now time.Time) {
	for _, act := range acts {
		switch a := act.(type) {
		case sched.Dispatch:
			e := l.tasks[int(a.Task)]
			w := l.workers[a.Worker]
			if e == nil || w == nil {
				continue
			}
			l.nextWire++
			at := &attempt{e: e, wire: l.nextWire, worker: w, alloc: a.Alloc, dispatched: now}
			e.attempts = append(e.attempts, at)
			if a.Copy {
				l.st.SpeculativeCopies++
				l.m.log.Info("speculative copy", "task", e.id, "tag", e.task.Tag, "worker", w.addr)
			}
			w.dispatch(at)
			l.touch(w, now)
		case sched.Abort:
			e := l.tasks[int(a.Task)]
			if e == nil {
				continue
			}
			w := l.workers[a.Worker]
			if at := e.attemptOn(w); at != nil {
				e.drop(at)
				w.abort(at)
			}
			l.touch(w, now)
			switch a.Reason {
			case sched.FastAborted:
				l.st.FastAborts++
				if w != nil {
					w.fastAborts++
				}
				l.m.log.Warn("fast abort", "task", e.id, "tag", e.task.Tag, "worker", workerAddr(w), "count", a.Count, "final", a.Final)
			case sched.Superseded, sched.Yielded, sched.Restarted:
				l.m.log.Debug("attempt aborted", "task", e.id, "worker", workerAddr(w), "reason", a.Reason)
			}
		case sched.Complete:
			e := l.tasks[int(a.Task)]
			if at := e.attemptOn(l.workers[a.Worker]); e != nil && at != nil && at.result != nil {
				at.result.FastAborts = a.FastAborts
				l.deliver(e, at.result, now)
			}
		case sched.Check:
			if w := l.workers[a.Worker]; w != nil {
				w.check()
			}
		case sched.DropWorker:
			w := l.workers[a.Worker]
			if w == nil {
				continue
			}
			if a.Until.IsZero() {
				l.m.log.Warn("worker dropped", "worker", w.addr, "reason", a.Reason)
			} else {
				l.m.log.Warn("worker dropped and its host kept out", "worker", w.addr,
					"until", a.Until.Format(time.RFC3339), "reason", a.Reason)
			}
			l.st.WorkersRemoved++
			w.close()
		case sched.Warning:
			l.m.log.Warn(a.Text, "worker", workerAddr(l.workers[a.Worker]))
		case sched.Fail:
			e := l.tasks[int(a.Task)]
			if e == nil {
				continue
			}
			status := MaxRetries
			if a.GivenBack {
				status = Forsaken
			}
			l.deliver(e, &Result{Status: status, ExitCode: -1, FastAborts: a.FastAborts, Err: fmt.Errorf("task %d: %s", e.id, a.Reason)}, now)
		}
	}
}

func workerAddr(w *workerConn) string {
	if w == nil {
		return ""
	}
	return w.addr
}

func (l *loop) workerLeft(w *workerConn, err error, now time.Time) {
	if _, ok := l.workers[w.id]; !ok {
		return
	}
	delete(l.workers, w.id)
	l.st.WorkersLost++
	l.m.log.Warn("worker left", "worker", w.addr, "reason", err)
	for _, e := range l.tasks {
		if a := e.attemptOn(w); a != nil {
			e.drop(a)
		}
	}
	l.apply(l.s.WorkerLeft(w.id, now), now)
	if w.poolName() != "" {
		// Its pool may have room for a drained worker now.
		l.syncHolds(now)
		l.enforce(l.enforcer.Left(int(w.id), now), now)
	}
}

// forsaken hands the scheduler an attempt its worker gave back.
func (l *loop) forsaken(a *attempt, now time.Time) {
	a.e.drop(a)
	l.apply(l.s.GivenBack(a.e.sched.ID, a.worker.id, now), now)
}

// reported hands the scheduler an attempt's report: if it takes it
// (sched.Fetch), the outputs are fetched before the worker gets its next
// task; if not (sched.Discard), the worker is told to forget it.
func (l *loop) reported(a *attempt, ok bool, j *fetchJob, now time.Time) {
	start := time.Now()
	e := a.e
	acts := l.s.TaskDone(e.sched.ID, a.worker.id, ok, now)
	if _, take := acts[0].(sched.Fetch); !take {
		a.worker.discard(a)
		l.touch(a.worker, now)
		return
	}
	l.keep(a)
	a.worker.fetch(j)
	// The scheduler gives the cores back at the report: the get and the
	// worker's next task (in acts, if there is one) go in one write.
	l.apply(acts[1:], now)
	a.worker.kick()
	e.think += time.Since(start)
}

// keep makes a the attempt of its task on its worker again if it was
// dropped: an aborted attempt whose report crossed the abort is the one
// whose result the scheduler took.
func (l *loop) keep(a *attempt) {
	if a.e.attemptOn(a.worker) == nil {
		a.e.attempts = append(a.e.attempts, a)
	}
}

// fetched hands the scheduler the outputs of an attempt; the task is
// complete if they are the ones it waits for.
func (l *loop) fetched(a *attempt, r *Result, now time.Time) {
	a.result = r
	l.apply(l.s.Fetched(a.e.sched.ID, a.worker.id, now), now)
	l.touch(a.worker, now)
}

// deliver completes an entry and hands its result to Wait.
func (l *loop) deliver(e *entry, r *Result, now time.Time) {
	start := time.Now()
	r.ID, r.Tag, r.Task, r.Submitted, r.Finished = e.id, e.task.Tag, e.task, e.submitted, now
	l.finish(e)
	l.st.TasksComplete++
	if !r.OK() {
		l.st.TasksFailed++
	}
	e.think += time.Since(start)
	if r.Status == Success {
		s := capacity.Sample{Exec: r.Exec, Transfer: r.netShare, Think: e.think}
		l.window.Add(s)
		l.ewma.Add(s)
		l.st.ExecTime += r.Exec
		l.st.TransferTime += r.Transfer
		l.st.ThinkTime += e.think
	}
	l.m.deliver(r)
}

func (l *loop) finish(e *entry) {
	delete(l.tasks, e.id)
}

func (l *loop) stats() Stats {
	st := l.st
	st.Port = l.m.Port()
	st.Project = l.m.cfg.Project
	st.Started = l.m.started
	c := l.s.Counts()
	st.TasksWaiting, st.TasksRunning, st.WorkersConnected = c.Waiting, c.Running+c.Fetching, c.Workers
	st.CoresTotal, st.CoresInUse = c.Total.Cores, c.Used.Cores
	st.MemoryTotal, st.MemoryInUse = c.Total.MemoryMB, c.Used.MemoryMB
	st.DiskTotal, st.DiskInUse = c.Total.DiskMB, c.Used.DiskMB
	st.GPUsTotal, st.GPUsInUse = c.Total.GPUs, c.Used.GPUs
	for _, w := range l.workers {
		st.BytesSent += w.bytesSent.Load()
		st.BytesReceived += w.bytesReceived.Load()
	}
	// What runs at once, in the estimate's unit, tasks: a worker of k
	// cores running k tasks is k one-task workers busy (seed 003's
	// window of max(10, busy workers) tasks), not one.
	busy := 0
	for _, w := range l.workers {
		if _, _, n, ok := l.s.WorkerLoad(w.id); ok {
			busy += n
		}
	}
	if v, ok := l.window.Capacity(busy); ok {
		st.Capacity = v
	}
	if v, ok := l.window.Workers(busy); ok {
		st.CapacityWorkers = v
	}
	if v, ok := l.ewma.Value(); ok {
		st.CapacityWeighted = v
	}
	return st
}

// workerStats returns the connected workers, in the order they connected.
func (l *loop) workerStats() []WorkerStats {
	ids := slices.Sorted(maps.Keys(l.workers)) // IDs are given as they connect
	ws := make([]WorkerStats, 0, len(ids))
	for _, id := range ids {
		w := l.workers[id]
		used, total, n, _ := l.s.WorkerLoad(w.id)
		_, draining, _ := l.s.Holds(w.id)
		ws = append(ws, WorkerStats{
			Draining: draining,
			Host:     w.hello.Host, Addr: w.addr,
			Cores: total.Cores, CoresInUse: used.Cores,
			Running: n, Completed: int(w.completed.Load()), FastAborts: w.fastAborts,
			Joined: w.joined,
		})
	}
	return ws
}

func hostOf(addr net.Addr) string {
	if h, _, err := net.SplitHostPort(addr.String()); err == nil {
		return h
	}
	return addr.String()
}
