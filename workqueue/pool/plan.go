package pool

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/factory"
)

// Limits say how a Plan meets failure and how many tasks a worker serves;
// how many workers it keeps is the Policy's. The zero value of each field
// means its documented default.
type Limits struct {
	// TasksPerWorker is how many tasks one worker serves at once, usually
	// its cores (default 1).
	TasksPerWorker int
	// WorkerCores is the cores of one of the pool's workers: the unit of
	// max_workers and of the decision (0: not known, as when the workers
	// take a whole machine; each worker then counts as one). A worker of
	// k times as many — a request of k workers is one worker of k times
	// the cores — counts as k (enforce.Weigh), as the masters count it.
	WorkerCores int
	// MaxPending bounds the workers submitted and not yet running; 0 means
	// no bound but the policy's max_workers.
	MaxPending int
	// Retries, Backoff, MaxBackoff and NoMaster are factory.Limits': how
	// failures in a row pause submissions and when the plan gives up.
	Retries             lifecycle.Retries
	Backoff, MaxBackoff time.Duration
	NoMaster            time.Duration
}

// Decision is what the plan says to do now.
type Decision struct {
	// Submit holds the batch requests to submit now: for which master, and
	// how many workers each (as the policy's strategy splits each master's
	// share). Submit them in order, telling the plan of each (Submitted or
	// SubmitFailed), and ask Next again once all are submitted or one has
	// failed.
	Submit []Request
	// Retry, when positive, is how long submissions are paused after
	// failures: ask Next again then.
	Retry time.Duration
	// Err, when set, says the plan has given up: remove every worker and
	// stop.
	Err error
}

// A Request is one batch request of a pool: Workers workers (one worker
// job offering Workers times a worker's resources, factory.Worker.Request)
// for the master at Addr.
type Request struct {
	Addr    string
	Workers int
}

// A Plan decides how many workers a pool keeps for each master: the
// distribution decision of seed 000 (Eqs. 4.6–4.15) under the policy's
// pool decision (D1–D7, Eqs. 4.16–4.22). It is a state machine without
// I/O, driven with logical time as factory.Plan is, whose job bookkeeping
// and failure handling it uses.
//
// Each worker is submitted for one master, its first; after that it
// serves the masters as package enforce says. The plan submits a worker
// for a master whose decision is more than the workers it has from the
// pool (its workers_by_pool) and those submitted for it and not started,
// while the pool has fewer jobs than its decision in all and max_workers.
// It never removes a worker: a master releases those of its workers beyond
// its decision once they hold no task, and they move to another master or
// leave at their idle timeout (or, with a billing cycle, near the end of
// their cycle).
//
// A Plan is not safe for concurrent use.
type Plan struct {
	policy *Policy
	tpw    int
	unit   int // Limits.WorkerCores
	jobs   *factory.Plan

	master  map[string]string // job → the master it was submitted for
	size    map[string]int    // job → its workers
	running map[string]bool   // jobs started
	ours    map[string]int    // master → its workers in jobs not ended
	total   int               // workers in jobs not ended

	masters   []Master
	received  map[string]int // master → its workers from this pool, as it says (-1: it does not)
	known     bool
	free      int // workers the batch system could start now; -1: not known
	decision  []Assignment
	decided   int // the last pool decision, in workers
	decidedAt time.Time
}

// NewPlan returns a plan under policy pol and limits l that starts at now.
func NewPlan(pol *Policy, l Limits, now time.Time) (*Plan, error) {
	tpw := max(l.TasksPerWorker, 1)
	// The inner plan is told exactly how many workers to have (D1, one
	// task to a worker); it keeps the jobs and meets failures.
	jobs, err := factory.NewPlan(factory.Limits{
		Max: math.MaxInt32, Policy: factory.D1, TasksPerWorker: 1, MaxPending: l.MaxPending,
		Retries: l.Retries, Backoff: l.Backoff, MaxBackoff: l.MaxBackoff, NoMaster: l.NoMaster,
	}, now)
	if err != nil {
		return nil, err
	}
	return &Plan{policy: pol, tpw: tpw, unit: l.WorkerCores, jobs: jobs, master: map[string]string{}, size: map[string]int{},
		running: map[string]bool{}, ours: map[string]int{}, free: -1, decidedAt: now}, nil
}

// ObserveFree records how many workers the batch system could start now,
// for the optimal strategy; a negative n means it cannot say.
func (p *Plan) ObserveFree(n int) { p.free = n }

// SetPolicy replaces the policy, as when its file changes.
func (p *Plan) SetPolicy(pol *Policy) { p.policy = pol }

// Policy returns the policy in force.
func (p *Plan) Policy() *Policy { return p.policy }

// Observe records what the masters said at now.
func (p *Plan) Observe(ms []Master, now time.Time) {
	p.masters, p.known = ms, true
	n := 0
	if len(ms) > 0 {
		n = 1
	}
	// Only whether masters were seen counts for the inner plan's NoMaster.
	p.jobs.Observe(factory.Demand{Masters: n}, now)
}

// Unobserved records that the masters could not be asked: the plan keeps
// its last decision but submits nothing until they can.
func (p *Plan) Unobserved() {
	p.known = false
	p.jobs.Unobserved()
}

// decide takes the decision at now.
func (p *Plan) decide(now time.Time) {
	pol := p.policy
	var ms []Master
	var share, needs []int
	want := 0
	p.received = map[string]int{}
	masters := slices.Clone(p.masters)
	slices.SortStableFunc(masters, func(a, b Master) int {
		return cmp.Or(strings.Compare(a.Project, b.Project), strings.Compare(a.Addr, b.Addr))
	})
	for _, m := range masters {
		e := pol.shareOf(m.Project)
		if e < 0 {
			continue // not this pool's
		}
		m = p.inUnits(m)
		p.received[m.Addr] = m.Received
		if m.Received < 0 {
			// A guess: those of ours running, as far as it says
			// workers are connected.
			m.Received = min(p.runningFor(m.Addr), m.Connected)
		}
		ms = append(ms, m)
		share = append(share, e)
		n := need(m, pol.Decision, pol.DefaultCapacity, p.tpw)
		needs = append(needs, n)
		want += n
	}
	total := min(want, pol.MaxWorkers)
	switch pol.Decision {
	case factory.D2, factory.D5, factory.D6, factory.D7:
		// Only a rise is bounded (Eqs. 4.17, 4.20, 4.21): a fall is the
		// masters', as their workers go idle and leave.
		step := int(now.Sub(p.decidedAt).Minutes() * pol.MaxChange)
		if total > p.decided+step {
			total = p.decided + step
			if step == 0 {
				break // not a whole worker's worth of time yet
			}
		}
		p.decidedAt = now
	default:
		p.decidedAt = now
	}
	dec := distribute(pol.Distribution, share, needs, total)
	p.decision = make([]Assignment, len(ms))
	p.decided = 0
	for i, m := range ms {
		p.decision[i] = Assignment{Project: m.Project, Addr: m.Addr, Name: m.Name, Port: m.Port, Need: needs[i], Workers: dec[i]}
		p.decided += dec[i]
	}
}

// inUnits returns m with its workers counted as the plan counts them, in
// workers of its unit, where its record says their cores (Master.Cores,
// PoolCores): a master's worker of k times a worker's cores, one of this
// pool's requests of k workers or a worker started by hand with more
// cores, counts as k; its connected workers as the tasks their cores
// serve, over TasksPerWorker.
func (p *Plan) inUnits(m Master) Master {
	if m.Cores > 0 {
		m.Connected = enforce.Weigh(m.Cores, p.tpw)
	}
	if p.unit > 0 && m.PoolCores > 0 {
		// At least one a worker, as the master weighs each.
		m.Received = max(m.Received, enforce.Weigh(m.PoolCores, p.unit))
	}
	return m
}

// runningFor counts the workers submitted for master addr that run.
func (p *Plan) runningFor(addr string) int {
	n := 0
	for id, m := range p.master {
		if m == addr && p.running[id] {
			n += p.size[id]
		}
	}
	return n
}

// has counts the workers master addr has from this pool or will have: those
// it says are connected and the jobs submitted for it that have not
// started; for a master that does not say (no workers_by_pool), the jobs
// submitted for it.
func (p *Plan) has(addr string) int {
	r, ok := p.received[addr]
	if !ok || r < 0 {
		return p.ours[addr]
	}
	for id, m := range p.master {
		if m == addr && !p.running[id] {
			r += p.size[id]
		}
	}
	return r
}

// Next says what to do at now.
func (p *Plan) Next(now time.Time) Decision {
	if p.known {
		p.decide(now)
	}
	// Each master short of its decision, by how many.
	type short struct {
		addr string
		n    int
	}
	var shorts []short
	want := 0
	if p.known {
		for _, a := range p.decision {
			if n := a.Workers - p.has(a.Addr); n > 0 {
				shorts = append(shorts, short{a.Addr, n})
				want += n
			}
		}
		// Workers move between masters (package enforce): never more
		// jobs than the decision in all, so that a master's excess,
		// released, serves the others before new workers are
		// submitted.
		want = min(want, p.decided-p.total)
	}
	// Never more than max_workers in all, whoever they were for.
	want = max(0, min(want, p.policy.MaxWorkers-p.total))
	if p.policy.Strategy == factory.Optimal {
		want = min(want, max(p.free, 0))
	}
	c := p.jobs.Counts()
	p.jobs.Observe(factory.Demand{Masters: c.Demand.Masters, Tasks: c.Queued + c.Running + want}, now)
	if !p.known {
		p.jobs.Unobserved()
	}
	d := p.jobs.Next(now)
	if d.Err != nil || d.Retry > 0 || d.Submit == 0 {
		return Decision{Retry: d.Retry, Err: d.Err}
	}
	// Hand the workers out one at a time to the master most short, then
	// split each master's into requests.
	given := map[string]int{}
	var order []string
	for range min(d.Submit, want) {
		sort.SliceStable(shorts, func(i, j int) bool { return shorts[i].n > shorts[j].n })
		if given[shorts[0].addr] == 0 {
			order = append(order, shorts[0].addr)
		}
		given[shorts[0].addr]++
		shorts[0].n--
	}
	var out []Request
	for _, addr := range order {
		for _, k := range p.policy.Strategy.Split(given[addr], given[addr]) {
			out = append(out, Request{Addr: addr, Workers: k})
		}
	}
	return Decision{Submit: out}
}

// Submitted records that job id, a request of workers workers for master
// addr, was accepted by the batch system.
func (p *Plan) Submitted(id, addr string, workers int) {
	if _, ok := p.master[id]; ok {
		return
	}
	workers = max(workers, 1)
	p.jobs.Submitted(id, workers)
	p.master[id] = addr
	p.size[id] = workers
	p.ours[addr] += workers
	p.total += workers
}

// SubmitFailed records that the batch system refused a submission.
func (p *Plan) SubmitFailed(err error, now time.Time) { p.jobs.SubmitFailed(err, now) }

// Started records that job id is running.
func (p *Plan) Started(id string) {
	if _, ok := p.master[id]; ok {
		p.running[id] = true
		p.jobs.Started(id)
	}
}

// Ended records the final event of job ev.ID and returns how it counts.
func (p *Plan) Ended(ev batch.Event, now time.Time) factory.Outcome {
	if addr, ok := p.master[ev.ID]; ok {
		k := p.size[ev.ID]
		delete(p.master, ev.ID)
		delete(p.running, ev.ID)
		delete(p.size, ev.ID)
		p.ours[addr] -= k
		if p.ours[addr] == 0 {
			delete(p.ours, addr)
		}
		p.total -= k
	}
	return p.jobs.Ended(ev, now)
}

// Room returns how many more workers max_workers allows: a request may
// count as no more.
func (p *Plan) Room() int { return max(0, p.policy.MaxWorkers-p.total) }

// Decision returns the last distribution decision, one assignment per
// master the policy serves, by project and address.
func (p *Plan) Decision() []Assignment { return append([]Assignment(nil), p.decision...) }

// Counts returns a snapshot of the plan: its jobs, and for each master
// the workers submitted for it and not ended.
func (p *Plan) Counts() (factory.Counts, map[string]int) {
	ours := make(map[string]int, len(p.ours))
	for k, v := range p.ours {
		ours[k] = v
	}
	c := p.jobs.Counts()
	c.Target = p.decided
	return c, ours
}

// Jobs returns the IDs of the jobs that have not ended.
func (p *Plan) Jobs() []string { return p.jobs.Jobs() }
