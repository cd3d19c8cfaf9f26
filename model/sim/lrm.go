package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// LRM is a batch system with a number of slots (a local resource manager,
// as seed 004 calls it), for a factory whose requests must wait for room:
// the mock of seed 004's allocation experiment (Raicu et al., §4–5). A
// factory worker takes one slot; a request of k workers (Factory.Strategy)
// takes k, all at once.
//
//   - It accepts one submission every SubmitInterval (GRAM and PBS took
//     about one a second).
//   - Its scheduler runs at FirstPoll and every Poll after (PBS's polling
//     loop), and whenever slots are freed: a job ends or Slots rises. Each
//     pass goes through the requests in submission order and starts every
//     one that fits in the free slots, so smaller requests behind one that
//     does not fit are backfilled.
//   - It launches the jobs it starts one after another, Launch apart, and
//     each job's worker connects Startup after its launch.
//
// With the defaults, a request waits 5 to 65 s depending on where it lands
// in the polling loop, the first workers connect about 40 s after the first
// submission, and 48 requests of one worker are all running after about
// 105 s, as the seed measured.
type LRM struct {
	// Slots are the slots free for the factory over time, each step from
	// its At on (required; the first at 0).
	Slots []SlotStep `json:"slots"`
	// Poll is the scheduler's period (default 60); FirstPoll its first
	// pass (default 35).
	Poll      float64 `json:"poll"`
	FirstPoll float64 `json:"first_poll"`
	// SubmitInterval is the time between two submissions accepted
	// (default 1).
	SubmitInterval float64 `json:"submit_interval"`
	// Launch is the time the scheduler spends starting one job (default
	// 1.4: the seed's 47 further one-worker requests took 65 s).
	Launch float64 `json:"launch"`
	// Startup is how long a started job's worker takes to connect (default
	// uniform 0 to 5 s).
	Startup *Dist `json:"startup,omitempty"`
}

// SlotStep is the slots free from At on.
type SlotStep struct {
	At    float64 `json:"at"`
	Slots int     `json:"slots"`
}

func (l *LRM) check() error {
	if len(l.Slots) == 0 || l.Slots[0].At != 0 {
		return errors.New("slots: need a step at 0")
	}
	for i, s := range l.Slots {
		if s.Slots < 0 || i > 0 && s.At <= l.Slots[i-1].At {
			return fmt.Errorf("slots[%d]: steps must be in time order with slots >= 0", i)
		}
	}
	if l.Poll < 0 || l.FirstPoll < 0 || l.SubmitInterval < 0 || l.Launch < 0 {
		return errors.New("a negative poll, first_poll, submit_interval or launch")
	}
	if l.Startup != nil {
		if err := l.Startup.check(); err != nil {
			return fmt.Errorf("startup: %w", err)
		}
	}
	return nil
}

func (l LRM) withDefaults() LRM {
	if l.Poll == 0 {
		l.Poll = 60
	}
	if l.FirstPoll == 0 {
		l.FirstPoll = 35
	}
	if l.SubmitInterval == 0 {
		l.SubmitInterval = 1
	}
	if l.Launch == 0 {
		l.Launch = 1.4
	}
	if l.Startup == nil {
		l.Startup = &Dist{Kind: "uniform", Min: 0, Max: 5}
	}
	return l
}

// lrm is the state of a simulated LRM.
type lrm struct {
	conf     LRM
	startup  sampler
	queue    []*lrmJob // waiting, in submission order
	used     int       // slots held by started jobs
	accepted float64   // when the last submission was accepted
	launched float64   // when the scheduler is done launching
}

// lrmJob is one request in the LRM.
type lrmJob struct {
	worker   *simWorker
	slots    int
	accepted float64 // when it entered the queue
}

func newLRM(conf LRM, src rand.Source) *lrm {
	conf = conf.withDefaults()
	return &lrm{conf: conf, startup: conf.Startup.sampler(src), accepted: math.Inf(-1)}
}

// slots returns the slots free for the factory at t.
func (l *lrm) slots(t float64) int {
	i := sort.Search(len(l.conf.Slots), func(i int) bool { return l.conf.Slots[i].At > t }) - 1
	return l.conf.Slots[max(i, 0)].Slots
}

// submit queues a request of k slots for w at now and returns when it is
// accepted.
func (l *lrm) submit(w *simWorker, k int, now float64) float64 {
	at := math.Max(now, l.accepted+l.conf.SubmitInterval)
	l.accepted = at
	l.queue = append(l.queue, &lrmJob{worker: w, slots: k, accepted: at})
	return at
}

// free returns the slots that requests already queued do not claim, at t:
// what a batch system that says what it has free would say.
func (l *lrm) free(t float64) int {
	n := l.slots(t) - l.used
	for _, j := range l.queue {
		n -= j.slots
	}
	return max(n, 0)
}

// pass is one run of the scheduler at t: it starts the requests that fit,
// in submission order, and returns each started worker with when it
// connects.
func (l *lrm) pass(t float64) (started []*simWorker, at []float64) {
	free := l.slots(t) - l.used
	rest := l.queue[:0]
	for _, j := range l.queue {
		if j.accepted > t || j.slots > free {
			rest = append(rest, j)
			continue
		}
		free -= j.slots
		l.used += j.slots
		l.launched = math.Max(l.launched, t) + l.conf.Launch
		started = append(started, j.worker)
		at = append(at, l.launched+l.startup())
	}
	l.queue = rest
	return started, at
}

// release frees the k slots of a job that ended.
func (l *lrm) release(k int) { l.used -= k }

// rises returns the times at which Slots rises: the scheduler runs then.
func (l *lrm) rises() []float64 {
	var ts []float64
	for i := 1; i < len(l.conf.Slots); i++ {
		if l.conf.Slots[i].Slots > l.conf.Slots[i-1].Slots {
			ts = append(ts, l.conf.Slots[i].At)
		}
	}
	return ts
}
