package workqueue

import (
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/rightsize/rightsize/model/capacity"
	"github.com/rightsize/rightsize/workqueue/sched"
)

// Events the loop receives.
type event interface{}

type (
	evSubmit struct{ e *entry }
	evCancel struct {
		id    int
		reply chan bool
	}
	evStats struct{ reply chan Stats }
	// evStatus asks for a status answer ("queue", "task", "worker", ...,
	// or "catalog" for the catalog record) as JSON bytes.
	evStatus struct {
		kind  string
		reply chan []byte
	}
	evWorkerJoined struct {
		w   *workerConn
		res sched.Resources
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
)

// maxForsaken is how often a task may be given back by workers before it
// fails: our worker gives back the tasks that held a cached input when a
// task writes to it, which happens once per input and worker.
const maxForsaken = 5

// tickInterval is how often fast abort and keepalives are checked.
const tickInterval = 200 * time.Millisecond

// loop owns the scheduler and every entry's state; it is the only
// goroutine that touches them.
type loop struct {
	m        *Master
	s        *sched.Scheduler
	tasks    map[int]*entry
	workers  map[sched.WorkerID]*workerConn
	nextWire int

	window capacity.Window
	ewma   capacity.EWMA
	st     Stats
}

func newLoop(m *Master) *loop {
	return &loop{
		m: m,
		s: sched.New(sched.Config{
			FastAbort: m.cfg.FastAbort, Categories: m.cfg.FastAbortCategories, MaxLost: m.cfg.MaxLost,
			SlowStart: m.cfg.SlowStart, Speculation: m.cfg.Speculation,
		}),
		tasks:   map[int]*entry{},
		workers: map[sched.WorkerID]*workerConn{},
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
			l.apply(l.s.Tick(now), now)
			l.keepalive(now)
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
		if ok {
			l.apply(l.s.Cancel(e.sched.ID, now), now)
			l.finish(e)
			l.st.TasksCancelled++
			l.m.outstanding.Add(-1)
		}
		ev.reply <- ok
	case evStats:
		ev.reply <- l.stats()
	case evStatus:
		ev.reply <- l.status(ev.kind, now)
	case evWorkerJoined:
		w := ev.w
		if _, known := l.workers[w.id]; !known {
			l.workers[w.id] = w
			l.st.WorkersJoined++
			l.m.log.Info("worker joined", "worker", w.addr, "host", w.hello.Host, "version", w.hello.Version,
				"cores", ev.res.Cores, "memory_mb", ev.res.MemoryMB, "disk_mb", ev.res.DiskMB)
		}
		l.apply(l.s.WorkerJoined(w.id, w.host, ev.res, now), now)
	case evWorkerLeft:
		l.workerLeft(ev.w, ev.err, now)
	case evReported:
		l.reported(ev.a, ev.ok, ev.fetch, now)
	case evFetched:
		l.fetched(ev.a, ev.r, now)
	case evInputMissing:
		a := ev.a
		e := a.e
		if e.state != stateRunning || !e.drop(a) {
			return
		}
		l.apply(l.s.TaskDone(e.sched.ID, a.worker.id, false, now), now)
		l.deliver(e, &Result{Status: InputMissing, ExitCode: -1, Err: ev.err, Worker: a.worker.addr, Dispatched: a.dispatched}, now)
	case evForsaken:
		l.forsaken(ev.a, now)
	}
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
			at := &attempt{e: e, wire: l.nextWire, worker: w, alloc: a.Alloc, dispatched: now, fastAborts: e.fastAborts}
			e.state = stateRunning
			e.attempts = append(e.attempts, at)
			if a.Copy {
				l.st.SpeculativeCopies++
				l.m.log.Info("speculative copy", "task", e.id, "tag", e.task.Tag, "worker", w.addr)
			}
			w.dispatch(at)
		case sched.Abort:
			e := l.tasks[int(a.Task)]
			if e == nil {
				continue
			}
			w := l.workers[a.Worker]
			for _, at := range e.attempts {
				if at.worker == w {
					e.drop(at)
					w.abort(at)
					break
				}
			}
			if len(e.attempts) == 0 && e.state == stateRunning {
				e.state = stateWaiting
			}
			switch a.Reason {
			case sched.FastAborted:
				e.fastAborts = a.Count
				l.st.FastAborts++
				l.m.log.Warn("fast abort", "task", e.id, "tag", e.task.Tag, "worker", workerAddr(w), "count", a.Count, "final", a.Final)
			case sched.Superseded, sched.Yielded:
				l.m.log.Debug("attempt aborted", "task", e.id, "worker", workerAddr(w), "reason", a.Reason)
			}
		case sched.DropWorker:
			if w := l.workers[a.Worker]; w != nil {
				l.m.log.Warn("worker dropped and its host kept out", "worker", w.addr,
					"until", a.Until.Format(time.RFC3339), "reason", a.Reason)
				l.st.WorkersRemoved++
				w.close()
			}
		case sched.Warning:
			l.m.log.Warn(a.Text, "worker", workerAddr(l.workers[a.Worker]))
		case sched.Fail:
			e := l.tasks[int(a.Task)]
			if e == nil {
				continue
			}
			l.deliver(e, &Result{Status: MaxRetries, ExitCode: -1, Err: fmt.Errorf("task %d: %s", e.id, a.Reason)}, now)
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
	acts := l.s.WorkerLeft(w.id, now)
	// Attempts whose outputs were still coming from it start again.
	var again []*entry
	for _, e := range l.tasks {
		if e.state == stateFetching && e.fetching.worker == w {
			again = append(again, e)
		}
	}
	sort.Slice(again, func(i, j int) bool { return again[i].id < again[j].id })
	for _, e := range again {
		e.state, e.fetching = stateWaiting, nil
		acts = append(acts, l.s.Submit(e.sched, now)...)
	}
	for _, e := range l.tasks {
		if e.state != stateRunning {
			continue
		}
		for _, a := range e.attempts {
			if a.worker == w {
				e.drop(a)
				break
			}
		}
		if len(e.attempts) == 0 {
			e.state = stateWaiting
		}
	}
	l.apply(acts, now)
}

// forsaken runs again a task its worker gave back: the task ends on every
// worker (a speculative copy elsewhere is aborted too, since it holds the
// same input) and starts again from the queue.
func (l *loop) forsaken(a *attempt, now time.Time) {
	e := a.e
	if e.state != stateRunning || !e.drop(a) {
		return
	}
	l.apply(l.s.TaskDone(e.sched.ID, a.worker.id, false, now), now)
	e.forsaken++
	if e.forsaken > maxForsaken {
		l.deliver(e, &Result{Status: Forsaken, ExitCode: -1, Worker: a.worker.addr, Dispatched: a.dispatched,
			Err: fmt.Errorf("task %d: given back by its workers %d times", e.id, e.forsaken)}, now)
		return
	}
	e.state = stateWaiting
	l.apply(l.s.Submit(e.sched, now), now)
}

// reported takes the result of the first attempt of a task to report and
// fetches its outputs; the scheduler aborts the task's other attempt.
// Reports that come after it (a speculative copy that finished too) are
// discarded: only one attempt writes the task's output files. A report from
// an attempt aborted a moment ago, while it was finishing, is taken too.
func (l *loop) reported(a *attempt, ok bool, j *fetchJob, now time.Time) {
	start := time.Now()
	e := a.e
	if e.state == stateDone || e.state == stateFetching {
		a.worker.discard(a)
		return
	}
	e.drop(a)
	e.state, e.fetching = stateFetching, a
	acts := l.s.TaskDone(e.sched.ID, a.worker.id, ok, now)
	// The outputs are asked for before the worker gets its next task.
	a.worker.fetch(j)
	l.apply(acts, now)
	e.think += time.Since(start)
}

func (l *loop) fetched(a *attempt, r *Result, now time.Time) {
	e := a.e
	if e.state != stateFetching || e.fetching != a {
		return
	}
	l.deliver(e, r, now)
}

// deliver completes an entry and hands its result to Wait.
func (l *loop) deliver(e *entry, r *Result, now time.Time) {
	start := time.Now()
	r.ID, r.Tag, r.Task, r.Submitted, r.Finished = e.id, e.task.Tag, e.task, e.submitted, now
	r.FastAborts = e.fastAborts
	l.finish(e)
	l.st.TasksComplete++
	if !r.OK() {
		l.st.TasksFailed++
	}
	e.think += time.Since(start)
	if r.Status == Success {
		s := capacity.Sample{Exec: r.Exec, Transfer: r.Transfer, Think: e.think}
		l.window.Add(s)
		l.ewma.Add(s)
		l.st.ExecTime += r.Exec
		l.st.TransferTime += r.Transfer
		l.st.ThinkTime += e.think
	}
	l.m.deliver(r)
}

func (l *loop) finish(e *entry) {
	e.state = stateDone
	delete(l.tasks, e.id)
}

// keepalive asks silent workers whether they live, and drops those that
// do not answer.
func (l *loop) keepalive(now time.Time) {
	for _, w := range l.workers {
		silent := now.Sub(time.Unix(0, w.lastHeard.Load()))
		switch {
		case silent > l.m.cfg.KeepaliveInterval+l.m.cfg.KeepaliveTimeout:
			l.m.log.Warn("worker did not answer keepalive", "worker", w.addr, "silent", silent.Round(time.Second))
			w.close()
		case silent > l.m.cfg.KeepaliveInterval && now.Sub(w.checkSent) > l.m.cfg.KeepaliveTimeout:
			w.checkSent = now
			w.check()
		}
	}
}

func (l *loop) stats() Stats {
	st := l.st
	st.Port = l.m.Port()
	st.Project = l.m.cfg.Project
	st.Started = l.m.started
	c := l.s.Counts()
	st.TasksWaiting, st.TasksRunning, st.WorkersConnected = c.Waiting, c.Running, c.Workers
	for _, e := range l.tasks {
		if e.state == stateFetching {
			st.TasksRunning++
		}
	}
	st.CoresTotal, st.CoresInUse = c.Total.Cores, c.Used.Cores
	st.MemoryTotal, st.MemoryInUse = c.Total.MemoryMB, c.Used.MemoryMB
	st.DiskTotal, st.DiskInUse = c.Total.DiskMB, c.Used.DiskMB
	st.GPUsTotal, st.GPUsInUse = c.Total.GPUs, c.Used.GPUs
	for _, w := range l.workers {
		st.BytesSent += w.bytesSent.Load()
		st.BytesReceived += w.bytesReceived.Load()
	}
	busy := 0
	for _, w := range l.workers {
		if _, _, n, ok := l.s.WorkerLoad(w.id); ok && n > 0 {
			busy++
		}
	}
	if v, ok := l.window.Capacity(busy); ok {
		st.Capacity = v
	}
	if v, ok := l.ewma.Value(); ok {
		st.CapacityWeighted = v
	}
	return st
}

func hostOf(addr net.Addr) string {
	if h, _, err := net.SplitHostPort(addr.String()); err == nil {
		return h
	}
	return addr.String()
}
