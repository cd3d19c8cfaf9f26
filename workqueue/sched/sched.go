// Package sched decides, for a Work Queue master, which waiting task runs on
// which worker, when a straggler is fast-aborted, and when a misbehaving
// worker is dropped. It is a state machine without I/O or clocks: the master
// feeds it events (Submit, WorkerJoined, TaskDone, Tick, ...) with the time
// they happened, and each event returns the Actions to carry out. The same
// code therefore runs in the master, in deterministic tests and in a
// simulator.
//
// It does not move files, talk to workers, or keep results; it knows tasks
// and workers only by their IDs, resources and cached inputs.
package sched

import (
	"math"
	"sort"
	"time"
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

// FastAbort configures fast abort for a category. A zero FastAbort is off.
type FastAbort struct {
	// Multiplier, if ≥ 1, aborts a task running longer than Multiplier
	// times the category's mean task time (CCTools' rule).
	Multiplier float64
	// Sigmas, if > 0, aborts a task running longer than the mean plus
	// Sigmas standard deviations (the seed's "three standard deviations"
	// with Sigmas = 3), but never before twice the mean, so that uniform
	// tasks with a tiny deviation are not aborted for noise.
	Sigmas float64
	// MinSamples is how many successful tasks of the category must have
	// finished before any abort (default 10).
	MinSamples int
	// MaxAborts is how many times one task may be fast-aborted (default
	// 3); after that it runs to completion wherever it is.
	MaxAborts int
	// BlockFor is how long a worker that tripped fast abort twice in a row
	// is kept out (default 5 minutes).
	BlockFor time.Duration
}

func (f FastAbort) enabled() bool { return f.Multiplier >= 1 || f.Sigmas > 0 }

func (f FastAbort) withDefaults() FastAbort {
	if f.MinSamples <= 0 {
		f.MinSamples = 10
	}
	if f.MaxAborts <= 0 {
		f.MaxAborts = 3
	}
	if f.BlockFor <= 0 {
		f.BlockFor = 5 * time.Minute
	}
	return f
}

// Config configures a Scheduler.
type Config struct {
	// FastAbort applies to every category without its own entry in
	// Categories.
	FastAbort FastAbort
	// Categories holds per-category fast abort settings.
	Categories map[string]FastAbort
	// MaxLost is how many times a task may lose its worker (disconnect,
	// drop) and be re-queued before it fails (default 5): a task that
	// kills its worker must not go round for ever.
	MaxLost int
}

// Action is something the master must do. Its concrete types are Dispatch,
// Abort, DropWorker and Fail.
type Action interface{ action() }

// Dispatch sends a task to a worker with the resources allocated to it.
type Dispatch struct {
	Task   TaskID
	Worker WorkerID
	Alloc  Resources
}

// Abort kills a task on a worker. The scheduler has already put the task
// back in the queue; Count is how many times it has been fast-aborted, and
// Final says it will not be fast-aborted again.
type Abort struct {
	Task   TaskID
	Worker WorkerID
	Count  int
	Final  bool
}

// DropWorker disconnects a worker; its address is refused until Until.
// Its tasks are already back in the queue.
type DropWorker struct {
	Worker WorkerID
	Until  time.Time
	Reason string
}

// Fail ends a task without a result (it lost its worker too often).
type Fail struct {
	Task   TaskID
	Reason string
}

func (Dispatch) action()   {}
func (Abort) action()      {}
func (DropWorker) action() {}
func (Fail) action()       {}

type taskState int

const (
	waiting taskState = iota
	running
)

type task struct {
	Task
	state   taskState
	worker  WorkerID
	alloc   Resources
	started time.Time
	aborts  int
	lost    int
	avoid   map[WorkerID]bool // workers it was fast-aborted on
}

type worker struct {
	id      WorkerID
	host    string
	total   Resources
	used    Resources
	cached  map[string]bool
	tasks   map[TaskID]bool
	alarm   bool    // a task of its was fast-aborted
	speed   float64 // sum over finished tasks of time / category mean
	samples int
}

// mean slowness relative to the category means; 1 when unknown.
func (w *worker) slowness() float64 {
	if w.samples == 0 {
		return 1
	}
	return w.speed / float64(w.samples)
}

type categoryStats struct {
	n          int
	sum, sumSq float64 // seconds
}

func (c *categoryStats) mean() float64 { return c.sum / float64(c.n) }

func (c *categoryStats) stddev() float64 {
	if c.n < 2 {
		return 0
	}
	m := c.mean()
	v := (c.sumSq - float64(c.n)*m*m) / float64(c.n-1)
	return math.Sqrt(math.Max(v, 0))
}

// Scheduler is the state machine. It is not safe for concurrent use: one
// goroutine owns it.
type Scheduler struct {
	cfg     Config
	tasks   map[TaskID]*task
	queue   []TaskID // waiting tasks, in dispatch order
	workers map[WorkerID]*worker
	order   []WorkerID // workers by ID, for deterministic choices
	blocked map[string]time.Time
	stats   map[string]*categoryStats
}

// New returns an empty Scheduler.
func New(cfg Config) *Scheduler {
	if cfg.MaxLost <= 0 {
		cfg.MaxLost = 5
	}
	return &Scheduler{
		cfg:     cfg,
		tasks:   map[TaskID]*task{},
		workers: map[WorkerID]*worker{},
		blocked: map[string]time.Time{},
		stats:   map[string]*categoryStats{},
	}
}

func (s *Scheduler) fastAbort(category string) FastAbort {
	if f, ok := s.cfg.Categories[category]; ok {
		return f.withDefaults()
	}
	return s.cfg.FastAbort.withDefaults()
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

// WorkerJoined adds a worker offering total resources. host is its address
// without port, used to keep dropped workers out.
func (s *Scheduler) WorkerJoined(id WorkerID, host string, total Resources, now time.Time) []Action {
	if until, ok := s.blocked[host]; ok {
		if now.Before(until) {
			return []Action{DropWorker{Worker: id, Until: until, Reason: "host is blocked after repeated fast aborts"}}
		}
		delete(s.blocked, host)
	}
	if w, ok := s.workers[id]; ok {
		// A new resource report from a known worker.
		w.total = total
		return s.dispatch(nil, now)
	}
	s.workers[id] = &worker{id: id, host: host, total: total, cached: map[string]bool{}, tasks: map[TaskID]bool{}}
	i := sort.Search(len(s.order), func(i int) bool { return s.order[i] >= id })
	s.order = append(s.order, 0)
	copy(s.order[i+1:], s.order[i:])
	s.order[i] = id
	return s.dispatch(nil, now)
}

// WorkerLeft removes a worker; its tasks go back to the front of the queue.
func (s *Scheduler) WorkerLeft(id WorkerID, now time.Time) []Action {
	return s.dispatch(s.removeWorker(id, nil), now)
}

func (s *Scheduler) removeWorker(id WorkerID, acts []Action) []Action {
	w, ok := s.workers[id]
	if !ok {
		return acts
	}
	delete(s.workers, id)
	i := sort.Search(len(s.order), func(i int) bool { return s.order[i] >= id })
	s.order = append(s.order[:i], s.order[i+1:]...)
	var lost []TaskID
	for tid := range w.tasks {
		lost = append(lost, tid)
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
	var requeue []TaskID
	for _, tid := range lost {
		t := s.tasks[tid]
		t.lost++
		if t.lost > s.cfg.MaxLost {
			delete(s.tasks, tid)
			acts = append(acts, Fail{Task: tid, Reason: "lost its worker too many times"})
			continue
		}
		t.state = waiting
		requeue = append(requeue, tid)
	}
	s.queue = append(requeue, s.queue...)
	return acts
}

// TaskDone records that a running task finished (ok: successfully, so its
// time counts towards its category's statistics).
func (s *Scheduler) TaskDone(id TaskID, ok bool, now time.Time) []Action {
	t, found := s.tasks[id]
	if !found || t.state != running {
		return nil
	}
	delete(s.tasks, id)
	w := s.workers[t.worker]
	if w != nil {
		w.used = w.used.add(t.alloc, -1)
		delete(w.tasks, id)
	}
	if ok {
		secs := now.Sub(t.started).Seconds()
		st := s.stats[t.Category]
		if st == nil {
			st = &categoryStats{}
			s.stats[t.Category] = st
		}
		if w != nil {
			if st.n > 0 && st.mean() > 0 {
				w.speed += secs / st.mean()
				w.samples++
			}
			w.alarm = false
		}
		st.n++
		st.sum += secs
		st.sumSq += secs * secs
	}
	return s.dispatch(nil, now)
}

// Cancel removes a task, waiting or running. For a running task it returns
// an Abort so that the master kills it; the task is not re-queued.
func (s *Scheduler) Cancel(id TaskID, now time.Time) []Action {
	t, ok := s.tasks[id]
	if !ok {
		return nil
	}
	delete(s.tasks, id)
	if t.state != running {
		return nil // its queue entry is skipped
	}
	var acts []Action
	if w := s.workers[t.worker]; w != nil {
		w.used = w.used.add(t.alloc, -1)
		delete(w.tasks, id)
		acts = append(acts, Abort{Task: id, Worker: t.worker, Count: t.aborts})
	}
	return s.dispatch(acts, now)
}

// Tick checks running tasks against fast abort at time now.
func (s *Scheduler) Tick(now time.Time) []Action {
	var acts []Action
	var slow []*task
	for _, t := range s.tasks {
		if t.state != running {
			continue
		}
		fa := s.fastAbort(t.Category)
		st := s.stats[t.Category]
		if !fa.enabled() || st == nil || st.n < fa.MinSamples || t.aborts >= fa.MaxAborts {
			continue
		}
		if now.Sub(t.started).Seconds() > threshold(fa, st, t.aborts) {
			slow = append(slow, t)
		}
	}
	sort.Slice(slow, func(i, j int) bool { return slow[i].ID < slow[j].ID })
	for _, t := range slow {
		if t.state != running { // its worker was dropped by an earlier abort
			continue
		}
		fa := s.fastAbort(t.Category)
		w := s.workers[t.worker]
		t.aborts++
		t.state = waiting
		if t.avoid == nil {
			t.avoid = map[WorkerID]bool{}
		}
		t.avoid[t.worker] = true
		acts = append(acts, Abort{Task: t.ID, Worker: t.worker, Count: t.aborts, Final: t.aborts >= fa.MaxAborts})
		s.queue = append([]TaskID{t.ID}, s.queue...)
		if w == nil {
			continue
		}
		w.used = w.used.add(t.alloc, -1)
		delete(w.tasks, t.ID)
		// Only a task's first abort marks the worker: later ones may be
		// the task's own fault.
		if t.aborts == 1 {
			if w.alarm {
				until := now.Add(fa.BlockFor)
				s.blocked[w.host] = until
				acts = append(acts, DropWorker{Worker: w.id, Until: until, Reason: "fast abort tripped twice"})
				acts = s.removeWorker(w.id, acts)
			} else {
				w.alarm = true
			}
		}
	}
	if len(acts) == 0 {
		return nil
	}
	return s.dispatch(acts, now)
}

// threshold is how long (seconds) a task may run before it is fast-aborted.
// Each earlier abort of the same task raises it by one mean, as CCTools
// does, so that a genuinely long task is not killed for ever.
func threshold(fa FastAbort, st *categoryStats, aborts int) float64 {
	mean := st.mean()
	limit := math.Inf(1)
	if fa.Multiplier >= 1 {
		limit = mean * (fa.Multiplier + float64(aborts))
	}
	if fa.Sigmas > 0 {
		limit = math.Min(limit, math.Max(mean+fa.Sigmas*st.stddev(), 2*mean)+float64(aborts)*mean)
	}
	return limit
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

// dispatch matches waiting tasks to workers: among the workers a task fits
// on, not those it was fast-aborted on (while others are connected), the
// most cached input bytes, then the fastest history, then the least loaded.
func (s *Scheduler) dispatch(acts []Action, now time.Time) []Action {
	if len(s.queue) == 0 || len(s.order) == 0 {
		return acts
	}
	kept := s.queue[:0]
	for i, id := range s.queue {
		if !s.anyFree() {
			kept = append(kept, s.queue[i:]...)
			break
		}
		t, ok := s.tasks[id]
		if !ok || t.state != waiting {
			continue // cancelled, or a stale duplicate entry
		}
		best, alloc := s.choose(t)
		if best == nil {
			kept = append(kept, id)
			continue
		}
		t.state, t.worker, t.alloc, t.started = running, best.id, alloc, now
		best.used = best.used.add(alloc, 1)
		best.tasks[id] = true
		for _, in := range t.Inputs {
			best.cached[in.Key] = true
		}
		acts = append(acts, Dispatch{Task: id, Worker: best.id, Alloc: alloc})
	}
	for i := len(kept); i < len(s.queue); i++ {
		s.queue[i] = 0
	}
	s.queue = kept
	return acts
}

func (s *Scheduler) anyFree() bool {
	for _, id := range s.order {
		w := s.workers[id]
		if free := w.total.add(w.used, -1); free.Cores > 1e-9 || free.GPUs > 0 {
			return true
		}
	}
	return false
}

func (s *Scheduler) choose(t *task) (*worker, Resources) {
	var (
		best      *worker
		bestAlloc Resources
		bestKey   [3]float64
	)
	// A task waits for another worker rather than go back to one it was
	// fast-aborted on, unless no other worker is connected.
	shun := false
	if len(t.avoid) > 0 {
		for _, id := range s.order {
			shun = shun || !t.avoid[id]
		}
	}
	for _, id := range s.order {
		if shun && t.avoid[id] {
			continue
		}
		w := s.workers[id]
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
		// Smaller is better in every position.
		key := [3]float64{-float64(cached), w.slowness(), float64(len(w.tasks))}
		if best == nil || less(key, bestKey) {
			best, bestAlloc, bestKey = w, n, key
		}
	}
	return best, bestAlloc
}

func less(a, b [3]float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// Counts is a snapshot of the queue.
type Counts struct {
	Waiting, Running, Workers int
	// Used and Total are summed over the connected workers.
	Used, Total Resources
}

// Counts returns how many tasks wait and run, and the workers' resources.
func (s *Scheduler) Counts() Counts {
	c := Counts{Workers: len(s.workers)}
	for _, t := range s.tasks {
		if t.state == running {
			c.Running++
		} else {
			c.Waiting++
		}
	}
	for _, w := range s.workers {
		c.Used = c.Used.add(w.used, 1)
		c.Total = c.Total.add(w.total, 1)
	}
	return c
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

// Forget tells the scheduler a worker's cache lost a file (the master
// unlinked it, or the worker reconnected empty).
func (s *Scheduler) Forget(id WorkerID, key string) {
	if w, ok := s.workers[id]; ok {
		delete(w.cached, key)
	}
}
