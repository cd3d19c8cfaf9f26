package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/rightsize/rightsize/workqueue/sched"
)

// Masters splits a run among several masters, each with its own
// scheduler, network interface, task cost and share of the workers (dealt
// round robin): seed 001's distributed schedulers (MATRIX), against which a
// single master is the centralised dispatcher. With Steal, a master with
// idle cores and no task waiting takes half the waiting tasks of the most
// loaded of Neighbours other masters picked at random, polling again after
// Poll, doubled after every steal that finds nothing up to PollMax, and
// reset by one that does (seed 001's adaptive work stealing).
type Masters struct {
	Count int `json:"count"`
	// Submit is where tasks are submitted: "spread" (round robin, the
	// default) or "one" (all to the first master: the worst case, which
	// only stealing spreads).
	Submit string `json:"submit"`
	Steal  bool   `json:"steal"`
	// Neighbours asked at each steal (default √Count).
	Neighbours int `json:"neighbours"`
	// Poll and PollMax bound the interval between steals (defaults 0.001
	// and 1 s).
	Poll    float64 `json:"poll"`
	PollMax float64 `json:"poll_max"`
}

func (ms *Masters) check() error {
	if ms.Count < 1 {
		return fmt.Errorf("count %d", ms.Count)
	}
	switch ms.Submit {
	case "", "spread", "one":
	default:
		return fmt.Errorf("submit %q (spread or one)", ms.Submit)
	}
	if ms.Neighbours < 0 || ms.Poll < 0 || ms.PollMax < 0 {
		return errors.New("a negative neighbours or poll interval")
	}
	return nil
}

func (ms Masters) withDefaults() Masters {
	if ms.Neighbours == 0 {
		ms.Neighbours = max(1, int(math.Sqrt(float64(ms.Count))))
	}
	ms.Neighbours = min(ms.Neighbours, ms.Count-1)
	if ms.Poll == 0 {
		ms.Poll = 0.001
	}
	if ms.PollMax == 0 {
		ms.PollMax = 1
	}
	return ms
}

// master is one master of a simulated run.
type master struct {
	id       int
	s        *sched.Scheduler
	free     float64 // when it is done with the tasks it was given
	nicFree  float64 // when its network interface is
	cores    float64 // of its connected workers
	busy     float64 // cores its attempts hold
	waiting  []sched.TaskID
	nWaiting int // entries of waiting not yet dispatched nor stolen
	poll     float64
	polling  bool // a steal is due
}

func (m *master) idle() bool { return m.busy < m.cores-1e-9 }

// submitTo submits task id to master m.
func (e *engine) submitTo(m *master, id sched.TaskID, t sched.Task) {
	e.tasks[id-1].m = int32(m.id)
	m.waiting = append(m.waiting, id)
	m.nWaiting++
	e.apply(m.s.Submit(t, e.at(e.now)))
}

// dispatched notes that a waiting task of m has left its queue.
func (e *engine) dispatched(m *master, t *simTask) {
	if t.dispatched {
		return
	}
	t.dispatched = true
	m.nWaiting--
	// Entries are dropped lazily; the slice is compacted when most are
	// stale.
	if stale := len(m.waiting) - m.nWaiting; stale > 1024 && stale > m.nWaiting {
		e.compact(m)
	}
}

// compact drops from m.waiting the tasks no longer waiting there.
func (e *engine) compact(m *master) {
	keep := m.waiting[:0]
	for _, id := range m.waiting {
		if t := &e.tasks[id-1]; !t.dispatched && int(t.m) == m.id {
			keep = append(keep, id)
		}
	}
	m.waiting = keep
}

// hungry starts m stealing if it has idle cores and nothing waiting.
func (e *engine) hungry(m *master) {
	if ms := e.sc.Masters; ms == nil || !ms.Steal || len(e.masters) < 2 || m.polling || m.nWaiting > 0 || !m.idle() {
		return
	}
	m.polling = true
	m.poll = e.sc.Masters.Poll
	e.push(event{at: e.now, kind: evSteal, master: int32(m.id)})
}

// steal is master m's work stealing: see Masters. It goes on, backing off,
// while m has idle cores and nothing waiting.
func (e *engine) steal(m *master) {
	m.polling = false
	if m.nWaiting > 0 || !m.idle() || e.over() {
		return
	}
	ms := e.sc.Masters
	var victim *master
	asked := make(map[int]bool, ms.Neighbours)
	for len(asked) < ms.Neighbours {
		i := e.rng.IntN(len(e.masters) - 1)
		if i >= m.id {
			i++ // every master but m
		}
		if asked[i] {
			continue
		}
		asked[i] = true
		if v := e.masters[i]; victim == nil || v.nWaiting > victim.nWaiting {
			victim = v
		}
	}
	if victim.nWaiting > 0 {
		ids := e.take(victim, (victim.nWaiting+1)/2)
		e.res.Steals++
		m.poll = ms.Poll
		// A request for loads, their answers, the request for tasks and
		// the tasks: two round trips.
		e.push(event{at: e.now + 4*e.sc.Master.Latency, kind: evStolen, master: int32(m.id), ids: ids})
		return
	}
	e.res.StealsFailed++
	m.poll = math.Min(m.poll*2, ms.PollMax)
	m.polling = true
	e.push(event{at: e.now + m.poll, kind: evSteal, master: int32(m.id)})
}

// take removes the n newest waiting tasks from master v's queue.
func (e *engine) take(v *master, n int) []sched.TaskID {
	e.compact(v)
	k := len(v.waiting) - n
	ids := append([]sched.TaskID(nil), v.waiting[k:]...)
	v.waiting = v.waiting[:k]
	v.nWaiting -= n
	for _, id := range ids {
		v.s.Cancel(id, e.at(e.now)) // a waiting task: nothing to abort
		e.tasks[id-1].m = -1        // on the way
	}
	return ids
}
