// Package sched decides, for a Work Queue master, which waiting task runs on
// which worker, how many tasks a worker is trusted with, when an overdue
// task gets a speculative copy on an idle worker, when a straggler is
// fast-aborted, and when a misbehaving worker is dropped. It is a state
// machine without I/O or clocks: the master feeds it events (Submit,
// WorkerJoined, TaskDone, Tick, ...) with the time they happened, and each
// event returns the Actions to carry out. The same code therefore runs in
// the master and in deterministic tests, and can run in a simulator.
//
// Every decision of a task's life is made here: where an attempt runs,
// which of two reports wins (the other is discarded), when a task's
// outputs are fetched and when it is complete, what happens to it when a
// worker gives it back or leaves while its outputs are coming, and when a
// silent worker is asked whether it lives (keepalive) or given up. Each
// abort carries its reason.
//
// It does not move files, talk to workers, or keep results; it knows tasks
// and workers only by their IDs, resources and cached inputs. It does not
// believe what workers announce beyond their resources: a worker holds
// tasks in proportion to the results it has returned (Config.SlowStart).
//
// Its fast-abort policy and statistics (FastAbort, Stats) are package
// lifecycle's, which the distributed master applies to batch jobs too.
// The simulator (model/sim) drives it on simulated workers.
package sched

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rightsize/rightsize/lifecycle"
)

// TaskID and WorkerID name tasks and workers; the master assigns them.
type (
	TaskID   int
	WorkerID int
)

// Resources are amounts of cores, memory (MB), disk (MB) and GPUs.
type Resources struct {
	Cores    float64
	MemoryMB int64
	DiskMB   int64
	GPUs     int64
}

// IsZero reports whether no resource is set.
func (r Resources) IsZero() bool { return r == Resources{} }

func (r Resources) fits(free Resources) bool {
	const eps = 1e-9
	return r.Cores <= free.Cores+eps && r.MemoryMB <= free.MemoryMB && r.DiskMB <= free.DiskMB && r.GPUs <= free.GPUs
}

func (r Resources) add(o Resources, sign int64) Resources {
	return Resources{
		Cores:    r.Cores + float64(sign)*o.Cores,
		MemoryMB: r.MemoryMB + sign*o.MemoryMB,
		DiskMB:   r.DiskMB + sign*o.DiskMB,
		GPUs:     r.GPUs + sign*o.GPUs,
	}
}

// Input is a cacheable input of a task: the name it has in a worker's cache
// and its size, so that tasks go where their inputs already are.
type Input struct {
	Key  string
	Size int64
}

// Task is what the scheduler knows of a task.
type Task struct {
	ID       TaskID
	Category string
	// Need is the declared resources. A task that declares none gets one
	// core and a share of memory and disk in proportion, not a whole
	// worker; undeclared memory or disk likewise gets the share of the
	// cores it takes.
	Need   Resources
	Inputs []Input
}

// Config configures a Scheduler. The zero value of each field means its
// documented default.
type Config struct {
	// FastAbort applies to every category without its own entry in
	// Categories.
	FastAbort FastAbort
	// Categories holds per-category fast abort settings.
	Categories map[string]FastAbort
	// MaxLost is how many times a task may lose its worker (disconnect,
	// drop) and be re-queued before it fails (lifecycle.Retries; default
	// 5): a task that kills its worker must not go round for ever.
	MaxLost lifecycle.Retries
	// SlowStart is how many tasks a worker may hold before it has returned
	// any result (default 4; negative: as many as its resources allow).
	// Each result it returns lets it hold one more, and its announced
	// resources bound it as always. A worker's word about its cores costs
	// nothing, so a worker that announces 1000 cores and runs nothing
	// holds SlowStart tasks, not the whole queue, while an honest worker
	// doubles what it holds with every round of tasks it completes and
	// reaches its full size after about log₂(cores/SlowStart) rounds.
	SlowStart int
	// Speculation configures copies of overdue tasks on idle workers (on
	// by default).
	Speculation Speculation
	// Keepalive says when silent workers are asked whether they live and
	// when they are given up.
	Keepalive Keepalive
	// MaxGivenBack is how often workers may give a task back (Work Queue's
	// FORSAKEN) before it fails (default 5): our worker gives back the
	// tasks that held a cached input when a task writes to it, which
	// happens once per input and worker.
	MaxGivenBack lifecycle.Retries
}

// Keepalive configures the checks of silent workers: a worker not heard
// from for Interval (default 120 s) is asked whether it lives, again every
// Timeout (default 30 s), and dropped when silent for Interval+Timeout. A
// negative Interval turns the checks off.
type Keepalive struct {
	Interval, Timeout time.Duration
}

func (k Keepalive) withDefaults() Keepalive {
	if k.Interval == 0 {
		k.Interval = 120 * time.Second
	}
	if k.Timeout <= 0 {
		k.Timeout = 30 * time.Second
	}
	return k
}

// Action is something the master must do. Its concrete types are Dispatch,
// Abort, Fetch, Discard, Complete, Check, DropWorker, Fail and Warning.
type Action interface{ action() }

// Dispatch sends a task to a worker with the resources allocated to it.
// Copy marks a speculative copy of a task that still runs elsewhere: the
// first of the two attempts to report wins (see Scheduler.TaskDone).
type Dispatch struct {
	Task   TaskID
	Worker WorkerID
	Alloc  Resources
	Copy   bool
}

// AbortReason says why an attempt is aborted.
type AbortReason int

const (
	// Cancelled: the master cancelled the task; it is forgotten.
	Cancelled AbortReason = iota
	// FastAborted: the attempt ran past the fast-abort limit. The task
	// runs on in its other attempt, if it has one, or waits in the queue.
	FastAborted
	// Superseded: another attempt of the task reported first.
	Superseded
	// Yielded: a speculative copy gave its place to a waiting task; the
	// task runs on in its first attempt.
	Yielded
	// Restarted: another attempt of the task was given back by its
	// worker; the task starts again from the queue.
	Restarted
)

var abortReasons = [...]string{"cancelled", "fast abort", "superseded", "yielded to a waiting task", "restarted"}

func (r AbortReason) String() string { return abortReasons[r] }

// Abort kills one attempt of a task: the one on Worker. Count is how many
// times the task has been fast-aborted, and Final says it will not be
// fast-aborted again.
type Abort struct {
	Task   TaskID
	Worker WorkerID
	Count  int
	Final  bool
	Reason AbortReason
}

// Fetch asks a worker for the outputs of the task it reported; Fetched
// says when they are in. It is the first action TaskDone returns when it
// takes a report, and the master asks for the outputs before it sends the
// worker anything else.
type Fetch struct {
	Task   TaskID
	Worker WorkerID
}

// Discard drops a report that came too late: the task's result was taken
// from another attempt, or the task was cancelled. It is the only action
// TaskDone returns for such a report.
type Discard struct {
	Task   TaskID
	Worker WorkerID
}

// Complete ends a task: its result is the one fetched from Worker.
// FastAborts is how many times it was fast-aborted.
type Complete struct {
	Task       TaskID
	Worker     WorkerID
	FastAborts int
}

// Check asks a silent worker whether it lives (see Keepalive).
type Check struct {
	Worker WorkerID
}

// DropWorker disconnects a worker; its host is refused until Until (the
// zero time: not refused). Its tasks are already back in the queue.
type DropWorker struct {
	Worker WorkerID
	Until  time.Time
	Reason string
}

// Fail ends a task without a result: it lost its worker too often, or
// (GivenBack) workers gave it back too often.
type Fail struct {
	Task       TaskID
	Reason     string
	GivenBack  bool
	FastAborts int
}

// Warning is something about a worker that the user should hear of
// although nothing is to be done: a decision the scheduler refrained from.
type Warning struct {
	Worker WorkerID
	Text   string
}

func (Dispatch) action()   {}
func (Abort) action()      {}
func (Fetch) action()      {}
func (Discard) action()    {}
func (Complete) action()   {}
func (Check) action()      {}
func (DropWorker) action() {}
func (Fail) action()       {}
func (Warning) action()    {}

// run is one attempt of a task on a worker.
type run struct {
	task    *task
	stopped bool
	worker  WorkerID
	alloc   Resources
	started time.Time
	copy    bool // a speculative copy, while the first attempt also runs
}

type task struct {
	Task
	runs      []*run // its attempts on workers; none while it waits
	fetching  bool   // its outputs are coming from fetchFrom
	fetchFrom WorkerID
	aborts    int
	lost      int
	givenBack int
	avoid     map[WorkerID]bool // workers it was fast-aborted on
}

// waiting reports whether t is in the queue: neither running nor fetched.
func (t *task) waiting() bool { return len(t.runs) == 0 && !t.fetching }

func (t *task) runOn(w WorkerID) *run {
	for _, r := range t.runs {
		if r.worker == w {
			return r
		}
	}
	return nil
}

type worker struct {
	id      WorkerID
	host    string
	total   Resources
	used    Resources
	cached  map[string]bool
	tasks   map[TaskID]bool // tasks with an attempt here
	fetches map[TaskID]bool // tasks whose outputs it is sending
	heard   time.Time       // when it was last heard from
	checked time.Time       // when it was last asked whether it lives
	alarm   bool            // a task of its was fast-aborted
	speed   float64         // sum over finished tasks of time / category mean
	samples int
	results int // results it returned: what it has proved
	// draining: it gets no new task (Drain), as its master is to
	// release it once it holds none.
	draining bool
}

// mean slowness relative to the category means; 1 when unknown.
func (w *worker) slowness() float64 {
	if w.samples == 0 {
		return 1
	}
	return w.speed / float64(w.samples)
}

// Scheduler is the state machine. It is not safe for concurrent use: one
// goroutine owns it.
//
// Its cost does not grow with the workers or tasks it holds but with what
// changes: it keeps apart the workers with room (only they are looked at
// when a task is placed), the tasks that run (only they are checked at a
// tick), and the queue as a window on one slice (a dispatch looks at the
// tasks it places, not the whole queue).
type Scheduler struct {
	cfg     Config
	tasks   map[TaskID]*task
	queue   []TaskID // waiting tasks from head on, in dispatch order
	head    int
	workers map[WorkerID]*worker
	order   []WorkerID           // workers by ID, for deterministic choices
	room    map[WorkerID]*worker // workers that may take another task
	running map[TaskID]*task     // tasks with an attempt on a worker
	// started holds the attempts from started on, oldest first (some
	// stopped since): a tick looks only at the old ones.
	started []*run
	// keepaliveDue is no later than the first time a worker may need a
	// keepalive check.
	keepaliveDue time.Time
	blocked      map[string]time.Time
	stats        map[string]*Stats
	copies       int // speculative copies running
}

// New returns an empty Scheduler.
func New(cfg Config) *Scheduler {
	if cfg.SlowStart == 0 {
		cfg.SlowStart = 4
	}
	cfg.Speculation = cfg.Speculation.withDefaults()
	cfg.Keepalive = cfg.Keepalive.withDefaults()
	return &Scheduler{
		cfg:     cfg,
		tasks:   map[TaskID]*task{},
		workers: map[WorkerID]*worker{},
		room:    map[WorkerID]*worker{},
		running: map[TaskID]*task{},
		blocked: map[string]time.Time{},
		stats:   map[string]*Stats{},
	}
}

func (s *Scheduler) fastAbort(category string) FastAbort {
	if f, ok := s.cfg.Categories[category]; ok {
		return f.WithDefaults()
	}
	return s.cfg.FastAbort.WithDefaults()
}

// Submit queues a new task.
func (s *Scheduler) Submit(t Task, now time.Time) []Action {
	if _, dup := s.tasks[t.ID]; dup {
		return nil
	}
	s.tasks[t.ID] = &task{Task: t}
	s.queue = append(s.queue, t.ID)
	return s.dispatch(nil, now)
}

// requeue puts tasks back at the front of the queue, in the order given.
func (s *Scheduler) requeue(ids []TaskID) {
	if len(ids) <= s.head {
		s.head -= len(ids)
		copy(s.queue[s.head:], ids)
		return
	}
	s.queue = append(append([]TaskID(nil), ids...), s.queue[s.head:]...)
	s.head = 0
}

// touch records whether w may take another task, after a change to what
// it holds, has proved or offers.
func (s *Scheduler) touch(w *worker) {
	if s.workers[w.id] == w && s.hasRoom(w) {
		s.room[w.id] = w
	} else {
		delete(s.room, w.id)
	}
}

// WorkerJoined adds a worker offering total resources, or updates the
// resources of a known one. host is its address without port, used to keep
// dropped workers out; a blocked host is let in all the same when no other
// worker is connected, with a Warning, since refusing it would stall the
// run.
func (s *Scheduler) WorkerJoined(id WorkerID, host string, total Resources, now time.Time) []Action {
	return s.join(id, host, total, false, now)
}

// WorkerJoinedDrained is WorkerJoined for a worker that is to get no new
// task (see Drain): one its master keeps only until it can release it.
// It joins draining, with its resources, in one event, so that no task is
// ever matched to it, and no state of the scheduler shows it without its
// resources. A known worker is drained and its resources updated.
func (s *Scheduler) WorkerJoinedDrained(id WorkerID, host string, total Resources, now time.Time) []Action {
	return s.join(id, host, total, true, now)
}

func (s *Scheduler) join(id WorkerID, host string, total Resources, drained bool, now time.Time) []Action {
	if w, ok := s.workers[id]; ok {
		w.total = total
		w.draining = w.draining || drained
		s.touch(w)
		return s.dispatch(nil, now)
	}
	var acts []Action
	if until, ok := s.blocked[host]; ok && now.Before(until) {
		if len(s.workers) > 0 {
			return []Action{DropWorker{Worker: id, Until: until, Reason: "its host is kept out after repeated fast aborts"}}
		}
		acts = append(acts, Warning{Worker: id, Text: "its host is kept out after repeated fast aborts until " +
			until.Format(time.RFC3339) + ", but no other worker is connected: let in"})
	}
	delete(s.blocked, host)
	s.workers[id] = &worker{id: id, host: host, total: total, heard: now, draining: drained,
		cached: map[string]bool{}, tasks: map[TaskID]bool{}, fetches: map[TaskID]bool{}}
	i := sort.Search(len(s.order), func(i int) bool { return s.order[i] >= id })
	s.order = append(s.order, 0)
	copy(s.order[i+1:], s.order[i:])
	s.order[i] = id
	s.touch(s.workers[id])
	return s.dispatch(acts, now)
}

// WorkerLeft removes a worker; the tasks it held that run nowhere else go
// back to the front of the queue.
func (s *Scheduler) WorkerLeft(id WorkerID, now time.Time) []Action {
	return s.dispatch(s.removeWorker(id, nil), now)
}

func (s *Scheduler) removeWorker(id WorkerID, acts []Action) []Action {
	w, ok := s.workers[id]
	if !ok {
		return acts
	}
	delete(s.workers, id)
	delete(s.room, id)
	i := sort.Search(len(s.order), func(i int) bool { return s.order[i] >= id })
	s.order = append(s.order[:i], s.order[i+1:]...)
	var held []TaskID
	for tid := range w.tasks {
		held = append(held, tid)
	}
	// A task whose outputs it was sending has no result after all.
	for tid := range w.fetches {
		held = append(held, tid)
		s.tasks[tid].fetching = false
	}
	sort.Slice(held, func(i, j int) bool { return held[i] < held[j] })
	var requeue []TaskID
	for _, tid := range held {
		t := s.tasks[tid]
		s.stop(t, t.runOn(id))
		if len(t.runs) > 0 {
			continue // its other attempt runs on
		}
		t.lost++
		if t.lost > s.cfg.MaxLost.Limit(5) {
			delete(s.tasks, tid)
			acts = append(acts, Fail{Task: tid, Reason: "lost its worker too many times", FastAborts: t.aborts})
			continue
		}
		requeue = append(requeue, tid)
	}
	s.requeue(requeue)
	return acts
}

// TaskDone records that the attempt of a task on worker w reported, ok
// meaning success (its time then counts towards its category's
// statistics). The first report wins: TaskDone returns Fetch for it, aborts
// the task's other attempt, if any (Superseded), and the task waits for its
// outputs (Fetched). A later report of the same task, or one of a task
// cancelled or unknown, gets Discard and nothing else. A report from an
// attempt aborted earlier (a fast abort that crossed the result on the
// wire) is taken as well, and stops the task's current attempts. Every
// report lets w hold one more task (SlowStart).
func (s *Scheduler) TaskDone(id TaskID, w WorkerID, ok bool, now time.Time) []Action {
	wk := s.workers[w]
	if wk != nil {
		wk.results++
		wk.heard = laterOf(wk.heard, now)
		s.touch(wk)
	}
	t, found := s.tasks[id]
	if !found || t.fetching {
		return []Action{Discard{Task: id, Worker: w}}
	}
	acts := []Action{Fetch{Task: id, Worker: w}}
	won := t.runOn(w)
	for len(t.runs) > 0 {
		r := t.runs[0]
		if r != won {
			acts = append(acts, Abort{Task: id, Worker: r.worker, Count: t.aborts, Reason: Superseded})
		}
		s.stop(t, r)
	}
	t.fetching, t.fetchFrom = true, w
	if wk != nil {
		wk.fetches[id] = true
	}
	if ok && won != nil {
		secs := now.Sub(won.started).Seconds()
		st := s.stats[t.Category]
		if st == nil {
			st = &Stats{}
			s.stats[t.Category] = st
		}
		if wk != nil {
			if mean := st.Mean().Seconds(); st.N() > 0 && mean > 0 {
				wk.speed += secs / mean
				wk.samples++
			}
			wk.alarm = false
		}
		st.Add(now.Sub(won.started))
	}
	return s.dispatch(acts, now)
}

// Fetched records that the outputs of task id came from worker w. It
// returns Complete if they are the result TaskDone took, and nothing if
// not (the task was cancelled, or w left and the task went back to the
// queue): such outputs are not the task's result.
func (s *Scheduler) Fetched(id TaskID, w WorkerID, now time.Time) []Action {
	t, ok := s.tasks[id]
	if !ok || !t.fetching || t.fetchFrom != w {
		return nil
	}
	delete(s.tasks, id)
	if wk := s.workers[w]; wk != nil {
		delete(wk.fetches, id)
		wk.heard = laterOf(wk.heard, now)
	}
	return []Action{Complete{Task: id, Worker: w, FastAborts: t.aborts}}
}

// GivenBack records that worker w gave back its attempt of task id without
// a result (Work Queue's FORSAKEN: a cached input it needs changed). The
// task's other attempt, which holds the same input, is aborted
// (Restarted), and the task starts again from the back of the queue; after
// Config.MaxGivenBack times it fails. A task not running on w is ignored.
func (s *Scheduler) GivenBack(id TaskID, w WorkerID, now time.Time) []Action {
	t, ok := s.tasks[id]
	if !ok || t.runOn(w) == nil {
		return nil
	}
	if wk := s.workers[w]; wk != nil {
		wk.results++
		wk.heard = laterOf(wk.heard, now)
		s.touch(wk)
	}
	var acts []Action
	for len(t.runs) > 0 {
		r := t.runs[0]
		if r.worker != w {
			acts = append(acts, Abort{Task: id, Worker: r.worker, Count: t.aborts, Reason: Restarted})
		}
		s.stop(t, r)
	}
	t.givenBack++
	if limit := s.cfg.MaxGivenBack.Limit(5); t.givenBack > limit {
		delete(s.tasks, id)
		acts = append(acts, Fail{Task: id, GivenBack: true, FastAborts: t.aborts,
			Reason: fmt.Sprintf("given back by its workers %d times", t.givenBack)})
		return s.dispatch(acts, now)
	}
	s.queue = append(s.queue, id)
	return s.dispatch(acts, now)
}

// Heard records that worker id was heard from at time at (see Keepalive);
// its reports count as heard already.
func (s *Scheduler) Heard(id WorkerID, at time.Time) {
	if w, ok := s.workers[id]; ok {
		w.heard = laterOf(w.heard, at)
	}
}

func minTime(t time.Time, more ...time.Time) time.Time {
	for _, u := range more {
		if u.Before(t) {
			t = u
		}
	}
	return t
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Cancel removes a task, waiting or running. For each of its attempts it
// returns an Abort so that the master kills it; the task is not re-queued.
func (s *Scheduler) Cancel(id TaskID, now time.Time) []Action {
	t, ok := s.tasks[id]
	if !ok {
		return nil
	}
	delete(s.tasks, id)
	if t.fetching {
		if w := s.workers[t.fetchFrom]; w != nil {
			delete(w.fetches, id)
		}
	}
	if len(t.runs) == 0 {
		return nil // its queue entry is skipped
	}
	var acts []Action
	for len(t.runs) > 0 {
		r := t.runs[0]
		acts = append(acts, Abort{Task: id, Worker: r.worker, Count: t.aborts, Reason: Cancelled})
		s.stop(t, r)
	}
	return s.dispatch(acts, now)
}

// Tick checks silent workers (Keepalive) and running attempts against fast
// abort at time now, then gives idle room to copies of overdue tasks (see
// Speculation).
func (s *Scheduler) Tick(now time.Time) []Action {
	acts := s.keepalive(now)
	acts = append(acts, s.fastAborts(now)...)
	if len(acts) > 0 {
		acts = s.dispatch(acts, now)
	}
	acts = s.speculate(acts, now)
	if len(acts) == 0 {
		return nil
	}
	return acts
}

// keepalive asks workers silent for Keepalive.Interval whether they live,
// once every Keepalive.Timeout, and drops those silent for longer than
// both.
func (s *Scheduler) keepalive(now time.Time) []Action {
	k := s.cfg.Keepalive
	if k.Interval < 0 || now.Before(s.keepaliveDue) {
		return nil
	}
	// A worker joins heard from, and is heard from again later: the
	// earliest time one may be due stays a lower bound until the next
	// look.
	due := now.Add(k.Interval)
	var acts []Action
	var gone []WorkerID
	for _, id := range s.order {
		w := s.workers[id]
		silent := now.Sub(w.heard)
		switch {
		case silent > k.Interval+k.Timeout:
			acts = append(acts, DropWorker{Worker: id, Reason: fmt.Sprintf("did not answer keepalive: silent for %v", silent.Round(time.Second))})
			gone = append(gone, id)
			continue
		case silent > k.Interval && now.Sub(w.checked) > k.Timeout:
			w.checked = now
			acts = append(acts, Check{Worker: id})
		}
		if silent > k.Interval {
			due = minTime(due, w.checked.Add(k.Timeout), w.heard.Add(k.Interval+k.Timeout))
		} else {
			due = minTime(due, w.heard.Add(k.Interval))
		}
	}
	s.keepaliveDue = due
	for _, id := range gone {
		acts = s.removeWorker(id, acts)
	}
	return acts
}

func (s *Scheduler) fastAborts(now time.Time) []Action {
	type straggler struct {
		t     *task
		r     *run
		limit time.Duration
	}
	// No attempt younger than the lowest limit of any category is
	// looked at: a task's aborts only raise its limit.
	lowest, found := time.Duration(math.MaxInt64), false
	for cat, st := range s.stats {
		if limit, ok := s.fastAbort(cat).Limit(*st, 0); ok {
			lowest, found = min(lowest, limit), true
		}
	}
	var slow []straggler
	for _, r := range s.oldRuns(now, lowest, found) {
		t := r.task
		limit, ok := s.fastAbort(t.Category).Limit(*s.stats[t.Category], t.aborts)
		if ok && now.Sub(r.started) > limit {
			slow = append(slow, straggler{t, r, limit})
		}
	}
	sort.Slice(slow, func(i, j int) bool {
		a, b := slow[i], slow[j]
		return a.t.ID < b.t.ID || a.t.ID == b.t.ID && a.r.worker < b.r.worker
	})
	var acts []Action
	var requeue []TaskID
	for _, sl := range slow {
		t, r := sl.t, sl.r
		fa := s.fastAbort(t.Category)
		// Its worker was dropped by an earlier abort, or its other
		// attempt used its last abort.
		if t.runOn(r.worker) != r || t.aborts >= fa.MaxAborts {
			continue
		}
		t.aborts++
		if t.avoid == nil {
			t.avoid = map[WorkerID]bool{}
		}
		t.avoid[r.worker] = true
		acts = append(acts, Abort{Task: t.ID, Worker: r.worker, Count: t.aborts, Final: t.aborts >= fa.MaxAborts, Reason: FastAborted})
		s.stop(t, r)
		if len(t.runs) == 0 {
			requeue = append(requeue, t.ID)
		}
		// Only a task's first abort marks the worker: later ones may be
		// the task's own fault.
		w := s.workers[r.worker]
		if w == nil || t.aborts != 1 {
			continue
		}
		if !w.alarm {
			w.alarm = true
			continue
		}
		why := fmt.Sprintf("two of its tasks in a row ran past the fast-abort limit (the last, task %d, over %v)", t.ID, sl.limit.Round(time.Millisecond))
		if !s.othersCanRun(w, t) {
			acts = append(acts, Warning{Worker: w.id, Text: why + ", but no other worker can run its tasks: kept"})
			continue
		}
		until := now.Add(fa.BlockFor)
		s.blocked[w.host] = until
		acts = append(acts, DropWorker{Worker: w.id, Until: until, Reason: why})
		acts = s.removeWorker(w.id, acts)
	}
	// Stragglers go first, in task order, ahead of the tasks their
	// dropped workers held.
	s.requeue(requeue)
	return acts
}

// oldRuns returns the attempts running that started more than age before
// now (none unless ok), oldest first, dropping stopped ones from the front
// of s.started on the way.
func (s *Scheduler) oldRuns(now time.Time, age time.Duration, ok bool) []*run {
	i := 0
	for i < len(s.started) && s.started[i].stopped {
		i++
	}
	if i > 0 {
		s.started = s.started[i:]
		if cap(s.started) > 1024 && len(s.started) < cap(s.started)/4 {
			s.started = append([]*run(nil), s.started...)
		}
	}
	if !ok {
		return nil
	}
	var old []*run
	for _, r := range s.started {
		if now.Sub(r.started) <= age {
			break
		}
		if !r.stopped {
			old = append(old, r)
		}
	}
	return old
}

// othersCanRun reports whether a worker other than w could run t. Without
// one, dropping w for slowness would leave t and its like with nowhere to
// run: on a loaded machine every task is slow, and the run would stall.
func (s *Scheduler) othersCanRun(w *worker, t *task) bool {
	for _, id := range s.order {
		if v := s.workers[id]; v != w && need(t, v).fits(v.total) {
			return true
		}
	}
	return false
}

// speculate starts copies of overdue tasks, oldest first, on workers with
// room that no waiting task took.
func (s *Scheduler) speculate(acts []Action, now time.Time) []Action {
	sp := s.cfg.Speculation
	if sp.Multiplier < 0 || !s.anyFree() {
		return acts
	}
	lowest, found := math.Inf(1), false
	for _, st := range s.stats {
		if st.N() >= sp.MinSamples {
			lowest, found = math.Min(lowest, sp.Multiplier*st.Mean().Seconds()), true
		}
	}
	var late []*task
	for _, r := range s.oldRuns(now, time.Duration(lowest*float64(time.Second)), found) {
		t := r.task
		st := s.stats[t.Category]
		if len(t.runs) != 1 || st == nil || st.N() < sp.MinSamples {
			continue
		}
		if now.Sub(t.runs[0].started).Seconds() > sp.Multiplier*st.Mean().Seconds() {
			late = append(late, t)
		}
	}
	sort.Slice(late, func(i, j int) bool {
		a, b := late[i].runs[0].started, late[j].runs[0].started
		return a.Before(b) || a.Equal(b) && late[i].ID < late[j].ID
	})
	for _, t := range late {
		if !s.anyFree() {
			break
		}
		if w, alloc := s.choose(t, true); w != nil {
			acts = append(acts, s.start(t, w, alloc, now, true))
		}
	}
	return acts
}

// need is what a task takes on worker w.
func need(t *task, w *worker) Resources {
	n := t.Need
	if n.Cores == 0 && n.MemoryMB == 0 && n.DiskMB == 0 && n.GPUs == 0 {
		n.Cores = 1
	}
	if n.Cores > 0 && w.total.Cores > 0 {
		share := math.Min(n.Cores/w.total.Cores, 1)
		if t.Need.MemoryMB == 0 {
			n.MemoryMB = int64(share * float64(w.total.MemoryMB))
		}
		if t.Need.DiskMB == 0 {
			n.DiskMB = int64(share * float64(w.total.DiskMB))
		}
	}
	return n
}

// start runs an attempt of t on w.
func (s *Scheduler) start(t *task, w *worker, alloc Resources, now time.Time, copy bool) Action {
	r := &run{task: t, worker: w.id, alloc: alloc, started: now, copy: copy}
	t.runs = append(t.runs, r)
	s.started = append(s.started, r)
	if copy {
		s.copies++
	}
	w.used = w.used.add(alloc, 1)
	w.tasks[t.ID] = true
	s.running[t.ID] = t
	s.touch(w)
	for _, in := range t.Inputs {
		w.cached[in.Key] = true
	}
	return Dispatch{Task: t.ID, Worker: w.id, Alloc: alloc, Copy: copy}
}

// stop ends attempt r of t (nil: none) and frees what it held. A copy left
// as the task's only attempt is a copy no more: it must not yield.
func (s *Scheduler) stop(t *task, r *run) {
	if r == nil {
		return
	}
	for i, x := range t.runs {
		if x == r {
			t.runs = append(t.runs[:i], t.runs[i+1:]...)
			break
		}
	}
	r.stopped = true
	if w := s.workers[r.worker]; w != nil {
		w.used = w.used.add(r.alloc, -1)
		delete(w.tasks, t.ID)
		s.touch(w)
	}
	if len(t.runs) == 0 {
		delete(s.running, t.ID)
	}
	if r.copy {
		s.copies--
	}
	if len(t.runs) == 1 && t.runs[0].copy {
		t.runs[0].copy = false
		s.copies--
	}
}

// dispatch matches waiting tasks to workers: among the workers a task fits
// on, not those it was fast-aborted on (while others are connected), the
// most cached input bytes, then the fastest history, then the least loaded.
// A task that fits nowhere takes the place of speculative copies.
func (s *Scheduler) dispatch(acts []Action, now time.Time) []Action {
	if s.head == len(s.queue) || len(s.order) == 0 {
		return acts
	}
	// The tasks that stay are gathered at the front of the part looked
	// at, in order (q[head:k]), and moved up to just before i at the end.
	q, k, i := s.queue, s.head, s.head
	for ; i < len(q); i++ {
		if s.copies == 0 && len(s.room) == 0 {
			break
		}
		id := q[i]
		t, ok := s.tasks[id]
		if !ok || !t.waiting() {
			continue // cancelled, or a stale duplicate entry
		}
		best, alloc := s.choose(t, false)
		if best == nil && s.copies > 0 {
			best, alloc, acts = s.yield(t, acts)
		}
		if best == nil {
			q[k] = id
			k++
			continue
		}
		acts = append(acts, s.start(t, best, alloc, now, false))
	}
	kept := k - s.head
	copy(q[i-kept:i], q[s.head:k])
	s.head = i - kept
	if s.head > 1024 && s.head > len(q)/2 {
		n := copy(q, q[s.head:])
		s.queue, s.head = q[:n], 0
	}
	return acts
}

// limit is how many tasks w may hold now (see Config.SlowStart).
func (s *Scheduler) limit(w *worker) int {
	if s.cfg.SlowStart < 0 {
		return math.MaxInt
	}
	return s.cfg.SlowStart + w.results
}

// hasRoom reports whether w may take another task.
func (s *Scheduler) hasRoom(w *worker) bool {
	free := w.total.add(w.used, -1)
	return !w.draining && (free.Cores > 1e-9 || free.GPUs > 0) && len(w.tasks) < s.limit(w)
}

func (s *Scheduler) anyFree() bool { return len(s.room) > 0 }

// shuns reports whether t should wait for another worker rather than go
// back to w, one it was fast-aborted on: yes unless no other is connected.
func (s *Scheduler) shuns(t *task, w WorkerID) bool {
	if !t.avoid[w] {
		return false
	}
	for _, id := range s.order {
		if !t.avoid[id] {
			return true
		}
	}
	return false
}

// choose picks the worker for t, or for a copy of it: a copy goes only to a
// worker that has returned a result, does not run t already, and never to
// one t was fast-aborted on.
func (s *Scheduler) choose(t *task, copy bool) (*worker, Resources) {
	var (
		best      *worker
		bestAlloc Resources
		bestKey   [4]float64
	)
	for id, w := range s.room {
		if copy && (w.results == 0 || t.avoid[id] || w.tasks[t.ID]) || !copy && s.shuns(t, id) || !s.hasRoom(w) {
			continue
		}
		n := need(t, w)
		if !n.fits(w.total.add(w.used, -1)) {
			continue
		}
		var cached int64
		for _, in := range t.Inputs {
			if w.cached[in.Key] {
				cached += in.Size
			}
		}
		// Smaller is better in every position; the ID last, so that the
		// choice does not depend on the order of the map.
		key := [4]float64{-float64(cached), w.slowness(), float64(len(w.tasks)), float64(id)}
		if best == nil || less(key, bestKey) {
			best, bestAlloc, bestKey = w, n, key
		}
	}
	return best, bestAlloc
}

// yield finds a worker where aborting speculative copies, the youngest
// first, makes room for t, and aborts them.
func (s *Scheduler) yield(t *task, acts []Action) (*worker, Resources, []Action) {
	for _, id := range s.order {
		w := s.workers[id]
		if w.draining || s.shuns(t, id) {
			continue
		}
		var copies []*task
		for tid := range w.tasks {
			if r := s.tasks[tid].runOn(id); r.copy {
				copies = append(copies, s.tasks[tid])
			}
		}
		if len(copies) == 0 {
			continue
		}
		sort.Slice(copies, func(i, j int) bool {
			a, b := copies[i].runOn(id).started, copies[j].runOn(id).started
			return a.After(b) || a.Equal(b) && copies[i].ID > copies[j].ID
		})
		n := need(t, w)
		free, held, k := w.total.add(w.used, -1), len(w.tasks), 0
		for ; k < len(copies) && !(n.fits(free) && held < s.limit(w)); k++ {
			free = free.add(copies[k].runOn(id).alloc, 1)
			held--
		}
		if !n.fits(free) || held >= s.limit(w) {
			continue
		}
		for _, c := range copies[:k] {
			acts = append(acts, Abort{Task: c.ID, Worker: id, Count: c.aborts, Reason: Yielded})
			s.stop(c, c.runOn(id))
		}
		return w, n, acts
	}
	return nil, Resources{}, acts
}

func less(a, b [4]float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// Counts is a snapshot of the queue.
type Counts struct {
	// Running counts tasks with an attempt on a worker (a task and its
	// speculative copy count once); Fetching, those whose outputs are
	// coming; Copies the copies among the attempts.
	Waiting, Running, Fetching, Workers, Copies int
	// Used and Total are summed over the connected workers.
	Used, Total Resources
}

// Counts returns how many tasks wait and run, and the workers' resources.
func (s *Scheduler) Counts() Counts {
	c := Counts{Workers: len(s.workers), Copies: s.copies}
	for _, t := range s.tasks {
		switch {
		case t.fetching:
			c.Fetching++
		case len(t.runs) > 0:
			c.Running++
		default:
			c.Waiting++
		}
	}
	for _, w := range s.workers {
		c.Used = c.Used.add(w.used, 1)
		c.Total = c.Total.add(w.total, 1)
	}
	return c
}

// State is where a task is in its life.
type State int

const (
	Unknown  State = iota // finished, cancelled, failed or never submitted
	Waiting               // in the queue
	Running               // on one worker or more
	Fetching              // its outputs are coming
)

// TaskState returns the state of task id.
func (s *Scheduler) TaskState(id TaskID) State {
	t, ok := s.tasks[id]
	switch {
	case !ok:
		return Unknown
	case t.fetching:
		return Fetching
	case len(t.runs) > 0:
		return Running
	}
	return Waiting
}

// Drain stops (on) giving worker id new tasks, or resumes (off); the
// tasks it holds run on. Its master drains a worker it is to release
// (package enforce) and releases it once Holds says it holds none.
func (s *Scheduler) Drain(id WorkerID, on bool, now time.Time) []Action {
	w, ok := s.workers[id]
	if !ok || w.draining == on {
		return nil
	}
	w.draining = on
	s.touch(w)
	return s.dispatch(nil, now)
}

// Holds reports how many tasks worker id runs or sends the outputs of,
// and whether it is draining.
func (s *Scheduler) Holds(id WorkerID) (tasks int, draining, ok bool) {
	w, ok := s.workers[id]
	if !ok {
		return 0, false, false
	}
	return len(w.tasks) + len(w.fetches), w.draining, true
}

// WorkerLoad reports a worker's resources in use and in total, and how many
// tasks it runs.
func (s *Scheduler) WorkerLoad(id WorkerID) (used, total Resources, tasks int, ok bool) {
	w, ok := s.workers[id]
	if !ok {
		return used, total, 0, false
	}
	return w.used, w.total, len(w.tasks), true
}
