package makeflow

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rightsize/rightsize/lifecycle"
)

// RuleState is where a rule stands. The values are the node states of the
// CCTools transaction log.
type RuleState int

const (
	Waiting  RuleState = 0 // not started: waiting for inputs, or for a free slot
	Running  RuleState = 1
	Complete RuleState = 2
	Failed   RuleState = 3 // failed with no retries left
	Aborted  RuleState = 4 // cancelled while running
)

func (s RuleState) String() string {
	switch s {
	case Waiting:
		return "waiting"
	case Running:
		return "running"
	case Complete:
		return "complete"
	case Failed:
		return "failed"
	case Aborted:
		return "aborted"
	}
	return fmt.Sprintf("RuleState(%d)", int(s))
}

// Limits bound what may run at once in one place: this machine, or a batch
// system.
type Limits struct {
	Jobs int // most jobs at once; at least 1

	// Capacity; 0 means the resource is not limited. A rule that declares
	// more than the capacity runs when nothing else runs there.
	Cores    int64
	MemoryMB int64
	DiskMB   int64
	GPUs     int64
}

// SchedulerConfig configures a Scheduler.
type SchedulerConfig struct {
	// Local bounds the rules that run on this machine.
	Local Limits
	// Remote, if set, bounds the rules that run elsewhere: every rule but
	// those marked LOCAL and nested workflows. If nil, every rule runs
	// locally.
	Remote *Limits
	// Retries is how many more times a failed rule is tried
	// (lifecycle.Retries; default none).
	Retries lifecycle.Retries
	// Done marks the rules an earlier run completed (from the log); nil
	// means none. A done rule is not run again.
	Done []bool
	// Cost, if set, is each rule's predicted running time in seconds:
	// ready rules then start in order of the longest predicted time after
	// them (the critical path by time), not of the most rules after them.
	Cost []float64
	// Here, if set, marks rules that run on this machine although the
	// workflow runs elsewhere: those automatic placement finds so short
	// that their dispatch would cost more than they run.
	Here []bool
	// Storage, if set, holds the run to a disk budget: a rule starts only
	// when its declared outputs fit (see StorageType), intermediate files
	// are collected as soon as no rule is left to read them (StorageFreed
	// says which), and StoragePeak measures the most held at once.
	Storage *Storage
}

// A Start tells the driver to start a rule.
type Start struct {
	Rule    int
	Attempt int  // 1 for the first try
	Remote  bool // run it on the remote executor, not locally
}

// Counts is how many rules are in each state.
type Counts struct {
	Waiting, Running, Complete, Failed, Aborted, Total int
}

// A Scheduler decides when each rule of a workflow runs. It is a state
// machine with no I/O and no clock: the driver tells it what happened
// (Ended, Abort, SetLimits) and it answers which rules to start. A rule
// starts once every rule that makes one of its inputs is complete and its
// pool has a free job slot and the resources the rule declared. Among ready
// rules the one with the longest chain of rules after it goes first (the
// critical path; in predicted seconds with SchedulerConfig.Cost), then the
// earliest in the file.
//
// When a rule fails for good, the rules that need its outputs stay waiting
// and everything else keeps running; Finished reports when nothing more
// can start and nothing runs.
//
// A Scheduler is not safe for concurrent use.
type Scheduler struct {
	g        *graph
	state    []RuleState
	pending  []int32 // unfinished parents
	attempts []int32
	level    []float64
	here     []bool
	retries  int32
	remote   bool
	halted   bool
	pools    [2]pool // local, remote
	storage  *storage
	counts   Counts
	out      []Start
}

type pool struct {
	limits Limits
	jobs   int
	used   Resources
	shapes map[Resources]int // resource request -> index in ready
	ready  []*readyHeap      // ready rules, one heap per resource request
}

// NewScheduler returns a Scheduler for w. It fails if w has a cycle or a
// file made by two rules (Workflow.Check reports those in detail) or if a
// limit is not positive.
func NewScheduler(w *Workflow, cfg SchedulerConfig) (*Scheduler, error) {
	return newScheduler(newGraph(w), cfg)
}

func newScheduler(g *graph, cfg SchedulerConfig) (*Scheduler, error) {
	if len(g.errs) > 0 {
		return nil, g.errs
	}
	order, stuck := g.topoOrder()
	if len(stuck) > 0 {
		return nil, g.cycles(stuck)
	}
	if cfg.Local.Jobs < 1 || (cfg.Remote != nil && cfg.Remote.Jobs < 1) {
		return nil, errors.New("makeflow: job limits must be at least 1")
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"Done", len(cfg.Done)}, {"Cost", len(cfg.Cost)}, {"Here", len(cfg.Here)}} {
		if f.n != 0 && f.n != len(g.w.Rules) {
			return nil, fmt.Errorf("makeflow: SchedulerConfig.%s has %d entries for %d rules", f.name, f.n, len(g.w.Rules))
		}
	}
	n := len(g.w.Rules)
	s := &Scheduler{
		g:        g,
		state:    make([]RuleState, n),
		pending:  make([]int32, n),
		attempts: make([]int32, n),
		level:    g.levels(order, cfg.Cost),
		here:     cfg.Here,
		retries:  int32(cfg.Retries.Limit(0)),
		remote:   cfg.Remote != nil,
	}
	s.pools[0] = pool{limits: cfg.Local, shapes: map[Resources]int{}}
	if cfg.Remote != nil {
		s.pools[1] = pool{limits: *cfg.Remote, shapes: map[Resources]int{}}
	}
	s.counts.Total = n
	if cfg.Storage != nil {
		s.storage = newStorage(g, *cfg.Storage, cfg.Done)
		if t := cfg.Storage.Type; t == StorageMin || t == StorageMax {
			// Depth first: the rules made ready last go first, which
			// frees their inputs soonest.
			s.level = make([]float64, n)
		}
	}
	copy(s.pending, g.parents)
	for id := range n {
		if cfg.Done != nil && cfg.Done[id] {
			s.state[id] = Complete
			s.counts.Complete++
			for _, c := range g.children[id] {
				s.pending[c]--
			}
		}
	}
	s.counts.Waiting = n - s.counts.Complete
	for id := range n {
		if s.state[id] == Waiting && s.pending[id] == 0 {
			s.push(id)
		}
	}
	return s, nil
}

// Next returns the rules to start now. The slice is reused by the next call.
func (s *Scheduler) Next() []Start {
	s.out = s.out[:0]
	return s.fill()
}

// Ended records that a running rule ended, successfully (ok, the rule is
// then Complete: done) or not, and returns the rules to start now (the
// slice is reused by the next call). A failed rule with retries left goes
// back to waiting and may be among them.
func (s *Scheduler) Ended(id int, ok bool) []Start {
	s.out = s.out[:0]
	if s.state[id] != Running {
		return s.out
	}
	s.release(id)
	if st := s.storage; st != nil {
		st.ended(s.g.w.Rules[id], ok)
		st.seq++
	}
	switch {
	case ok:
		s.set(id, Complete)
		for _, c := range s.g.children[id] {
			if s.pending[c]--; s.pending[c] == 0 && s.state[c] == Waiting {
				s.push(int(c))
			}
		}
	case s.attempts[id] <= s.retries && !s.halted:
		s.set(id, Waiting)
		s.push(id)
	default:
		s.set(id, Failed)
	}
	return s.fill()
}

// Abort records that a running rule was cancelled. Aborted rules are not
// retried.
func (s *Scheduler) Abort(id int) {
	if s.state[id] != Running {
		return
	}
	s.release(id)
	if s.storage != nil {
		s.storage.ended(s.g.w.Rules[id], false)
	}
	s.set(id, Aborted)
}

// Halt stops the scheduler from starting anything more; running rules are
// still reported with Ended or Abort.
func (s *Scheduler) Halt() { s.halted = true }

// SetLimits changes a pool's limits (for instance when workers join a batch
// system) and returns the rules to start now. remote selects the pool.
func (s *Scheduler) SetLimits(remote bool, l Limits) []Start {
	s.out = s.out[:0]
	if l.Jobs < 1 {
		l.Jobs = 1
	}
	p := &s.pools[0]
	if remote {
		p = &s.pools[1]
	}
	p.limits = l
	return s.fill()
}

// State returns the state of a rule.
func (s *Scheduler) State(id int) RuleState { return s.state[id] }

// Attempts returns how many times a rule has been started.
func (s *Scheduler) Attempts(id int) int { return int(s.attempts[id]) }

// Counts returns how many rules are in each state.
func (s *Scheduler) Counts() Counts { return s.counts }

// Finished reports whether nothing runs and nothing more can start: every
// rule is done, or the rest wait on rules that failed or were aborted, or
// the scheduler was halted.
func (s *Scheduler) Finished() bool {
	if s.counts.Running > 0 {
		return false
	}
	if s.halted || (s.storage != nil && s.storage.stuckOn >= 0) {
		return true
	}
	for i := range s.pools {
		for _, h := range s.pools[i].ready {
			if h.len() > 0 {
				return false
			}
		}
	}
	return true
}

// Blocked returns the waiting rules that can never start because a rule
// they depend on failed or was aborted (or the scheduler was halted).
func (s *Scheduler) Blocked() []int {
	var ids []int
	for id, st := range s.state {
		if st == Waiting {
			ids = append(ids, id)
		}
	}
	return ids
}

func (s *Scheduler) set(id int, st RuleState) {
	*s.countOf(s.state[id])--
	*s.countOf(st)++
	s.state[id] = st
}

func (s *Scheduler) countOf(st RuleState) *int {
	switch st {
	case Running:
		return &s.counts.Running
	case Complete:
		return &s.counts.Complete
	case Failed:
		return &s.counts.Failed
	case Aborted:
		return &s.counts.Aborted
	}
	return &s.counts.Waiting
}

func (s *Scheduler) poolOf(id int) *pool {
	if s.remote && !s.g.w.Rules[id].onThisMachine() && (s.here == nil || !s.here[id]) {
		return &s.pools[1]
	}
	return &s.pools[0]
}

// request is what a rule needs from a pool. Wall time is a limit, not
// something the rule holds, so it does not count.
func (s *Scheduler) request(id int) Resources {
	r := s.g.w.Rules[id].Resources
	r.WallTimeS = 0
	return r
}

// push adds a ready rule to its pool's queue for its resource request.
func (s *Scheduler) push(id int) {
	p := s.poolOf(id)
	req := s.request(id)
	if s.storage != nil && (s.storage.Type == StorageMin || s.storage.Type == StorageMax) {
		s.level[id] = s.storage.seq
	}
	k, ok := p.shapes[req]
	if !ok {
		k = len(p.ready)
		p.shapes[req] = k
		p.ready = append(p.ready, &readyHeap{level: s.level})
	}
	p.ready[k].push(int32(id))
}

// fill starts ready rules while their pools have room, appending to s.out.
func (s *Scheduler) fill() []Start {
	if s.halted {
		return s.out
	}
	st := s.storage
	blocked := -1
	for pi := range s.pools {
		p := &s.pools[pi]
		for p.jobs < p.limits.Jobs {
			if st != nil && st.Type == StorageMin && s.counts.Running > 0 {
				break // one rule at a time
			}
			// The best ready rule that fits: each resource request's queue
			// offers its best, so this costs one look per distinct request.
			best, bestID := -1, int32(-1)
			for k, h := range p.ready {
				if h.len() == 0 {
					continue
				}
				id := h.top()
				if !p.fits(s.request(int(id))) {
					continue
				}
				if st != nil && !st.fits(s.g.w.Rules[id]) {
					if blocked < 0 || h.before(id, int32(blocked)) {
						blocked = int(id)
					}
					// The best of this request does not fit the storage
					// limit: the next that does, which may free space.
					if id = st.bestFitting(h, s.g.w.Rules); id < 0 {
						continue
					}
				}
				if best < 0 || h.before(id, bestID) {
					best, bestID = k, id
				}
			}
			if best < 0 {
				break
			}
			id := int(p.ready[best].remove(bestID))
			req := s.request(id)
			p.jobs++
			p.used.Cores += req.Cores
			p.used.MemoryMB += req.MemoryMB
			p.used.DiskMB += req.DiskMB
			p.used.GPUs += req.GPUs
			s.attempts[id]++
			if st != nil {
				st.started(s.g.w.Rules[id])
			}
			s.set(id, Running)
			s.out = append(s.out, Start{Rule: id, Attempt: int(s.attempts[id]), Remote: pi == 1})
		}
	}
	if st != nil && blocked >= 0 && s.counts.Running == 0 {
		// Nothing runs to free space, and the best ready rule does not
		// fit: the limit is too small for the workflow.
		st.stuckOn = blocked
	}
	return s.out
}

func (s *Scheduler) release(id int) {
	p := s.poolOf(id)
	req := s.request(id)
	p.jobs--
	p.used.Cores -= req.Cores
	p.used.MemoryMB -= req.MemoryMB
	p.used.DiskMB -= req.DiskMB
	p.used.GPUs -= req.GPUs
}

// fits reports whether a request fits next to what runs in the pool. A
// request larger than the whole pool fits only an empty pool, so that it
// runs alone rather than never.
func (p *pool) fits(req Resources) bool {
	if p.jobs == 0 {
		return true
	}
	ok := func(used, want, capacity int64) bool {
		return capacity <= 0 || want <= 0 || used+want <= capacity
	}
	return ok(p.used.Cores, req.Cores, p.limits.Cores) &&
		ok(p.used.MemoryMB, req.MemoryMB, p.limits.MemoryMB) &&
		ok(p.used.DiskMB, req.DiskMB, p.limits.DiskMB) &&
		ok(p.used.GPUs, req.GPUs, p.limits.GPUs)
}

// A readyHeap holds ready rule ids, the one with the longest chain after it
// first, then the lowest id.
type readyHeap struct {
	ids   []int32
	level []float64
}

func (h *readyHeap) len() int   { return len(h.ids) }
func (h *readyHeap) top() int32 { return h.ids[0] }
func (h *readyHeap) before(a, b int32) bool {
	if h.level[a] != h.level[b] {
		return h.level[a] > h.level[b]
	}
	return a < b
}

func (h *readyHeap) push(id int32) {
	h.ids = append(h.ids, id)
	i := len(h.ids) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h.before(h.ids[i], h.ids[parent]) {
			break
		}
		h.ids[i], h.ids[parent] = h.ids[parent], h.ids[i]
		i = parent
	}
}

// remove takes id out of the heap and returns it.
func (h *readyHeap) remove(id int32) int32 {
	i := slices.Index(h.ids, id)
	last := len(h.ids) - 1
	h.ids[i] = h.ids[last]
	h.ids = h.ids[:last]
	if i < last {
		h.fix(i)
	}
	return id
}

// fix restores the heap order after the id at i changed.
func (h *readyHeap) fix(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.before(h.ids[i], h.ids[parent]) {
			break
		}
		h.ids[i], h.ids[parent] = h.ids[parent], h.ids[i]
		i = parent
	}
	h.down(i)
}

func (h *readyHeap) down(i int) {
	n := len(h.ids)
	for {
		l, r := 2*i+1, 2*i+2
		m := i
		if l < n && h.before(h.ids[l], h.ids[m]) {
			m = l
		}
		if r < n && h.before(h.ids[r], h.ids[m]) {
			m = r
		}
		if m == i {
			return
		}
		h.ids[i], h.ids[m] = h.ids[m], h.ids[i]
		i = m
	}
}
