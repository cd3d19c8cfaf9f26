package factory

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/lifecycle"
)

// Limits say how many workers a Plan keeps and how it meets failure. The
// zero value of each field but Max means its documented default.
type Limits struct {
	// Min and Max bound the workers submitted and not yet ended: never
	// fewer than Min, never more than Max (at least 1, and at least Min).
	Min, Max int
	// TasksPerWorker is how many of the masters' tasks one worker serves at
	// once, usually its cores (default 1).
	TasksPerWorker int
	// MaxPending bounds the workers submitted and not yet running, so that
	// a batch system that is slow to start them is not flooded; 0 means no
	// bound but Max.
	MaxPending int
	// Retries is how many failures in a row (see Outcome) the plan meets by
	// submitting again, after a backoff; the next one makes it give up
	// (lifecycle.Retries; default 4: it gives up at the fifth).
	Retries lifecycle.Retries
	// Backoff is how long submissions pause after a failure, doubled with
	// every further failure in a row up to MaxBackoff (defaults 1 s and
	// 5 min), so that a batch system that refuses the job is not asked
	// again at once.
	Backoff, MaxBackoff time.Duration
	// NoMaster, if positive, makes the plan give up once no master has been
	// seen for that long (CCTools' --factory-timeout).
	NoMaster time.Duration

	// Policy is how the masters' tasks and capacities become a number of
	// workers (default D3: no more than the masters can keep busy).
	Policy Policy
	// MaxChange bounds how fast D2, D5 and D6 raise the number of workers,
	// in workers a minute (default 60).
	MaxChange float64
	// DefaultCapacity is D4's and D6's capacity of a master that has not
	// reported one yet, in tasks (default 20).
	DefaultCapacity int

	// Strategy is how a deficit of workers becomes batch requests (default
	// OneAtATime: a job per worker).
	Strategy Strategy
}

// Policy is a pool decision of seed 000 (§4.4.4, Eqs. 4.16–4.21): how many
// workers the masters get, from their tasks waiting and running (need) and
// their capacities, the tasks each can keep running at once before its own
// sending, receiving and bookkeeping hold the workers back (package
// model/capacity, advertised as capacity_tasks).
type Policy int

const (
	D1 Policy = iota + 1 // need
	D2                   // need, rising by at most MaxChange a minute
	D3                   // need, each master's at most its capacity (none while unknown)
	D4                   // as D3, with DefaultCapacity while unknown
	D5                   // D3, rising by at most MaxChange a minute
	D6                   // D4, rising by at most MaxChange a minute
	// D7 is D6 whose workers leave only near the end of a billing cycle
	// (Eq. 4.22): a worker pool's decision (package workqueue/pool), since
	// the cycle is the pool's.
	D7
)

var policyNames = [...]string{"", "D1", "D2", "D3", "D4", "D5", "D6", "D7"}

func (p Policy) String() string {
	if p > 0 && int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy reads a policy's name, D1 to D7.
func ParsePolicy(name string) (Policy, error) {
	for i, n := range policyNames {
		if i > 0 && strings.EqualFold(n, name) {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown decision %q: D1 (tasks), D2 (tasks, ramped), D3 (tasks capped by capacity), D4 (as D3, a default capacity while unknown), D5 (D3 ramped), D6 (D4 ramped) or D7 (D6, released at the end of a billing cycle; a pool's)", name)
}

func (l *Limits) validate() error {
	switch {
	case l.Min < 0:
		return fmt.Errorf("factory: minimum workers %d is negative", l.Min)
	case l.Max < 1:
		return fmt.Errorf("factory: maximum workers %d is less than 1", l.Max)
	case l.Min > l.Max:
		return fmt.Errorf("factory: minimum workers %d is more than the maximum %d", l.Min, l.Max)
	case l.TasksPerWorker < 0 || l.MaxPending < 0 || l.Backoff < 0 || l.MaxBackoff < 0 || l.NoMaster < 0:
		return errors.New("factory: negative limit")
	}
	if l.TasksPerWorker == 0 {
		l.TasksPerWorker = 1
	}
	if l.Backoff == 0 {
		l.Backoff = time.Second
	}
	if l.MaxBackoff == 0 {
		l.MaxBackoff = 5 * time.Minute
	}
	l.MaxBackoff = max(l.MaxBackoff, l.Backoff)
	if l.Policy == 0 {
		l.Policy = D3
	}
	if l.Policy == D7 {
		return errors.New("factory: D7 needs a billing cycle: use a worker pool (workqueue pool)")
	}
	if l.Policy < D1 || l.Policy > D6 {
		return fmt.Errorf("factory: unknown %v", l.Policy)
	}
	if l.MaxChange <= 0 {
		l.MaxChange = 60
	}
	if l.DefaultCapacity <= 0 {
		l.DefaultCapacity = 20
	}
	if l.Strategy < OneAtATime || l.Strategy > Optimal {
		return fmt.Errorf("factory: unknown %v", l.Strategy)
	}
	return nil
}

// Demand is what the masters a factory serves said of themselves, summed
// over them.
type Demand struct {
	Masters int // masters found
	Tasks   int // tasks waiting, plus tasks running on workers
	Workers int // workers connected, the factory's own included
	// Cores is the cores of the workers connected (their cores_total), 0
	// if the masters do not say. Where known, the workers connected count
	// as the tasks their cores serve over TasksPerWorker, so that a worker
	// started with --cores 4 is not taken for one of TasksPerWorker 1.
	Cores float64
	// Capacities holds, for each master that has reported its capacity,
	// its tasks (as counted in Tasks) and that capacity; the other
	// masters' capacities are not known yet.
	Capacities []MasterCapacity
}

// MasterCapacity is one master's tasks and capacity, in tasks.
type MasterCapacity struct {
	Tasks, Capacity int
}

// Outcome is how a worker job ended, as the plan counts it.
type Outcome int

const (
	// Exited: the worker exited 0, at its idle timeout or told to by its
	// master. It is replaced if still needed, and shows that workers work.
	Exited Outcome = iota
	// Killed: something outside the worker ended it — a signal, the batch
	// system (cancelled, wall-time limit, lost node), an operator. It is
	// replaced without delay.
	Killed
	// Crashed: the worker exited with an error of its own — it could not
	// start, or could not reach a master for its whole timeout. A failure.
	Crashed
	// Rejected: the batch system refused the job, or holds it where it will
	// never run. A failure.
	Rejected
	// Removed: the factory removed it.
	Removed
)

func (o Outcome) String() string {
	switch o {
	case Exited:
		return "exited"
	case Killed:
		return "killed"
	case Crashed:
		return "crashed"
	case Rejected:
		return "rejected"
	case Removed:
		return "removed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Classify says how a job that ended with st counts.
func Classify(st batch.Status) Outcome {
	switch {
	case st.State == batch.Done && st.ExitCode == 0:
		return Exited
	case st.State == batch.Done && st.ExitCode > 128:
		// 128+n: the worker died of signal n.
		return Killed
	case st.State == batch.Done:
		return Crashed
	case errors.Is(st.Err, batch.ErrRejected):
		return Rejected
	case errors.Is(st.Err, batch.ErrRemoved):
		return Removed
	case errors.Is(st.Err, batch.ErrVanished), errors.Is(st.Err, batch.ErrTimeLimit):
		return Killed
	}
	// The job could not even be started.
	return Crashed
}

// Counts is a snapshot of a plan. Workers are counted as the plan counts
// them: a request of k workers (see Strategy) is k.
type Counts struct {
	Queued, Running int // workers submitted and not started; started and not ended
	Target          int // workers the plan wants now, submitted or running
	Demand          Demand
	Known           bool             // whether Demand comes from the masters (else the plan keeps Min)
	Submitted       int              // workers submitted so far
	Requests        int              // batch jobs submitted so far
	Ended           [Removed + 1]int // batch jobs ended so far, by Outcome
	Failures        int              // failures in a row
}

// Decision is what the plan says to do now.
type Decision struct {
	// Submit is how many workers to submit now, in the batch requests
	// Requests says: their sizes in workers, in order, as Limits.Strategy
	// splits Submit. Submit them in that order, telling the plan of each
	// (Submitted or SubmitFailed), and ask Next again once all are
	// submitted or one has failed: asking before would split what remains
	// afresh.
	Submit   int
	Requests []int
	// Retry, when positive, is how long submissions are paused after
	// failures: ask Next again then.
	Retry time.Duration
	// Err, when set, says the plan has given up: remove every worker and
	// stop. It stays set.
	Err error
}

// A Plan decides how many Work Queue workers to keep submitted to a batch
// system for a set of masters, and in what batch requests (Limits.Strategy). It is a state machine without I/O: the
// caller tells it what happened — jobs submitted, started and ended, what
// the masters said — with the time it happened, and asks Next what to do.
//
// It wants enough workers for the masters' tasks, waiting and running,
// TasksPerWorker to a worker, as Limits.Policy decides from their tasks and
// capacities (by default no master more than it can keep busy), less the
// workers connected to them that are not its own; never fewer than Min,
// never more than Max. When it cannot learn what the masters need, it
// keeps Min. It never removes a worker that is no longer needed: workers
// leave at their idle timeout. It asks for the workers it lacks in batch
// requests of one worker or several, as Limits.Strategy splits them; a
// request of k workers counts as k, queued or running, until it ends.
//
// Failures — a job the batch system rejects, a worker that exits with an
// error — pause submissions for a backoff that doubles with each failure in
// a row, and after Limits.Retries in a row the plan gives up with the
// last failure's message. A worker that exits on its own, with any status,
// ends a run of rejections: the batch system does run the jobs. (Being seen
// running does not: Grid Engine shows a job running for a moment before it
// puts it in its error state.) A worker that exits 0 ends a run of crashes:
// workers do reach a master and leave at their idle timeout. Workers
// connected to the masters prove nothing, since they may be someone else's.
//
// A Plan is not safe for concurrent use.
type Plan struct {
	lim  Limits
	jobs map[string]job // jobs not ended
	free int            // workers the batch system could start now; -1: not known

	queued, running int
	demand          Demand
	known           bool
	lastMaster      time.Time // when masters were last seen
	submitted       int
	requests        int
	ended           [Removed + 1]int

	rejections, crashes int       // failures in a row of each kind
	lastFailure         error     // the most recent failure
	pausedUntil         time.Time // no submissions before
	err                 error     // given up

	decided   int       // the last decision, in workers
	decidedAt time.Time // when it was taken
}

// NewPlan returns a plan with limits l that starts at now, or an error if
// l is not valid.
func NewPlan(l Limits, now time.Time) (*Plan, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &Plan{lim: l, jobs: make(map[string]job), free: -1, lastMaster: now, decidedAt: now}, nil
}

// job is one batch request that has not ended.
type job struct {
	workers int
	started bool
}

// Submitted records that job id, a request of workers workers (at least
// 1), was accepted by the batch system.
func (p *Plan) Submitted(id string, workers int) {
	if _, ok := p.jobs[id]; ok {
		return
	}
	workers = max(workers, 1)
	p.jobs[id] = job{workers: workers}
	p.queued += workers
	p.submitted += workers
	p.requests++
	if p.free > 0 {
		// They take what was free until the batch system says again.
		p.free = max(p.free-workers, 0)
	}
}

// ObserveFree records how many workers the batch system could start now,
// for the Optimal strategy; a negative n means it cannot say. Submitted
// requests are taken from it until it is observed again.
func (p *Plan) ObserveFree(n int) { p.free = n }

// SubmitFailed records that the batch system refused a submission, with
// err saying why.
func (p *Plan) SubmitFailed(err error, now time.Time) {
	p.rejections++
	p.fail(fmt.Errorf("submitting a worker: %w", err), now)
}

// Started records that job id is running.
func (p *Plan) Started(id string) {
	j, ok := p.jobs[id]
	if !ok || j.started {
		return
	}
	p.jobs[id] = job{workers: j.workers, started: true}
	p.queued -= j.workers
	p.running += j.workers
}

// Ended records the final event of job ev.ID and returns how it counts.
func (p *Plan) Ended(ev batch.Event, now time.Time) Outcome {
	o := Classify(ev.Status)
	j, ok := p.jobs[ev.ID]
	if !ok {
		return o
	}
	delete(p.jobs, ev.ID)
	if j.started {
		p.running -= j.workers
	} else {
		p.queued -= j.workers
	}
	p.ended[o]++
	switch o {
	case Exited:
		p.rejections, p.crashes = 0, 0
	case Crashed:
		p.rejections = 0
		p.crashes++
		p.fail(fmt.Errorf("worker job %s %s%s", ev.ID, describe(ev.Status), crashReason(ev.Stderr)), now)
	case Rejected:
		p.rejections++
		p.fail(fmt.Errorf("worker job %s: %w", ev.ID, ev.Err), now)
	}
	return o
}

// describe says how a crashed job ended.
func describe(st batch.Status) string {
	if st.State == batch.Done {
		return fmt.Sprintf("exited with status %d", st.ExitCode)
	}
	return fmt.Sprintf("failed: %v", st.Err)
}

// crashReason says, from a crashed worker's standard error, why it crashed
// — the line of a Go panic or fatal error, else the last line but for the
// pointer to --help that follows a usage error — as ": line", or "" if it
// wrote nothing.
func crashReason(stderr []byte) string {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	s := lines[len(lines)-1]
	if len(lines) > 1 && strings.HasPrefix(s, "Run '") && strings.HasSuffix(s, "--help' for usage.") {
		s = lines[len(lines)-2]
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			s = l
			break
		}
	}
	const most = 400
	if len(s) > most {
		s = "..." + s[len(s)-most:]
	}
	if s == "" {
		return ""
	}
	return ": " + s
}

func (p *Plan) fail(err error, now time.Time) {
	p.lastFailure = err
	n := max(p.rejections, p.crashes)
	if n > p.lim.Retries.Limit(4) {
		return // Next gives up
	}
	delay := p.lim.Backoff
	for i := 1; i < n && delay < p.lim.MaxBackoff; i++ {
		delay *= 2
	}
	p.pausedUntil = now.Add(min(delay, p.lim.MaxBackoff))
}

// Observe records what the masters said at now.
func (p *Plan) Observe(d Demand, now time.Time) {
	p.demand, p.known = d, true
	if d.Masters > 0 {
		p.lastMaster = now
	}
}

// Unobserved records that the masters could not be asked: the plan keeps
// Min until they can.
func (p *Plan) Unobserved() {
	p.demand, p.known = Demand{}, false
}

// decide takes the policy's decision at now: how many workers the masters
// should have, in all.
func (p *Plan) decide(now time.Time) int {
	tasks := p.demand.Tasks
	if p.lim.Policy >= D3 {
		known := 0
		for _, m := range p.demand.Capacities {
			tasks -= m.Tasks - min(m.Tasks, max(m.Capacity, 0))
			known += m.Tasks
		}
		if unknown := p.demand.Masters - len(p.demand.Capacities); unknown > 0 && (p.lim.Policy == D4 || p.lim.Policy == D6) {
			rest := p.demand.Tasks - known
			tasks -= rest - min(rest, unknown*p.lim.DefaultCapacity)
		}
	}
	tpw := p.lim.TasksPerWorker
	d := (tasks + tpw - 1) / tpw
	switch p.lim.Policy {
	case D2, D5, D6:
		// Only a rise is bounded: a fall is the masters' to make, as
		// their workers go idle and leave.
		step := int(now.Sub(p.decidedAt).Minutes() * p.lim.MaxChange)
		if d > p.decided+step {
			if step == 0 {
				return p.decided // not a whole worker's worth of time yet
			}
			d = p.decided + step
		}
	}
	p.decided, p.decidedAt = d, now
	return d
}

// target is how many workers the plan wants, submitted or running, given
// decision d.
func (p *Plan) target(d int) int {
	want := 0
	if p.known {
		// Workers connected beyond those of ours that run are someone
		// else's, and serve the same tasks.
		others := max(0, p.connected()-p.running)
		want = d - others
	}
	return min(max(want, p.lim.Min), p.lim.Max)
}

// connected is the workers the masters have, the factory's own included,
// in workers of TasksPerWorker tasks: by their cores where the masters say
// them (a core serves a task), rounded up as a request of several
// workers counts (shape.Workers); else one a connection.
func (p *Plan) connected() int {
	if p.demand.Cores > 0 {
		return int(math.Ceil(p.demand.Cores/float64(p.lim.TasksPerWorker) - 1e-9))
	}
	return p.demand.Workers
}

// Next says what to do at now.
func (p *Plan) Next(now time.Time) Decision {
	if p.err == nil {
		switch n := max(p.rejections, p.crashes); {
		case n > p.lim.Retries.Limit(4):
			p.err = fmt.Errorf("factory: giving up after %d failures in a row; the last: %w", n, p.lastFailure)
		case p.lim.NoMaster > 0 && now.Sub(p.lastMaster) >= p.lim.NoMaster:
			p.err = fmt.Errorf("factory: no master seen for %v", p.lim.NoMaster)
		}
	}
	if p.err != nil {
		return Decision{Err: p.err}
	}
	d := p.decided
	if p.known {
		d = p.decide(now)
	}
	n := p.target(d) - p.queued - p.running
	if p.lim.MaxPending > 0 {
		n = min(n, p.lim.MaxPending-p.queued)
	}
	if n <= 0 {
		return Decision{}
	}
	if now.Before(p.pausedUntil) {
		return Decision{Retry: p.pausedUntil.Sub(now)}
	}
	reqs := p.lim.Strategy.Split(n, p.free)
	total := 0
	for _, k := range reqs {
		total += k
	}
	if total == 0 {
		return Decision{}
	}
	return Decision{Submit: total, Requests: reqs}
}

// Room returns how many more workers Limits.Max allows: a request may
// count as no more.
func (p *Plan) Room() int { return max(0, p.lim.Max-p.queued-p.running) }

// Counts returns a snapshot of the plan.
func (p *Plan) Counts() Counts {
	return Counts{
		Queued: p.queued, Running: p.running, Target: p.target(p.decided),
		Demand: p.demand, Known: p.known, Submitted: p.submitted, Requests: p.requests, Ended: p.ended,
		Failures: max(p.rejections, p.crashes),
	}
}

// Jobs returns the IDs of the jobs that have not ended.
func (p *Plan) Jobs() []string {
	ids := make([]string, 0, len(p.jobs))
	for id := range p.jobs {
		ids = append(ids, id)
	}
	return ids
}
