package enforce

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// An Enforcer is a master's side of the pools' decisions (seed 000
// §4.5.1) as a state machine on logical time: the master tells it what
// happens — a pool's decision received (DecidedQuotas), a worker joined or gone
// (Joined, Left), the tasks a worker holds changed, a task done
// (Holds) — with the time it happened, and does the Actions it answers
// at once. So a worker beyond its pool's decision is drained (given no
// new task) as soon as the decision arrives, and released the moment its
// last task is done, not at the next advertising interval; and never
// while it holds a task.
//
// A worker that does not follow the pool's decision (ours with --stay)
// comes straight back to the master that released it. The Enforcer
// remembers each released worker, by its Key, for a window: one that
// joins again within it is not released again while beyond the decision,
// but kept drained, taking no task, until it leaves at its own idle
// timeout or the decision gives it room. A worker that follows the
// decision comes back within the window only if the master's catalog
// record, which tells the workers where there is room, has not changed
// since: the master's advertising interval is the window to take.
//
// An Enforcer is not safe for concurrent use.
type Enforcer struct {
	remember  time.Duration
	decisions map[string]Quota     // workers each pool gives the master
	workers   map[int]*tracked     // the pools' workers connected
	released  map[string]time.Time // a released worker's key → when
}

// tracked is a pool's worker as the Enforcer knows it.
type tracked struct {
	Worker
	key string
	// back: it joined again within the window of its release; it is
	// never released again, only drained.
	back bool
}

// NewEnforcer returns an Enforcer without decisions that remembers the
// workers it releases for the window remember.
func NewEnforcer(remember time.Duration) *Enforcer {
	return &Enforcer{remember: remember, decisions: map[string]Quota{}, workers: map[int]*tracked{},
		released: map[string]time.Time{}}
}

// Verb is what an Action does to a worker.
type Verb int

const (
	// Drain: give it no new task; it finishes those it holds.
	Drain Verb = iota + 1
	// Undrain: give it tasks again, the decision having room for it.
	Undrain
	// Release: let it go, to serve another master; it holds no task.
	Release
)

func (v Verb) String() string {
	switch v {
	case Drain:
		return "drain"
	case Undrain:
		return "undrain"
	case Release:
		return "release"
	}
	return fmt.Sprintf("Verb(%d)", int(v))
}

// An Action is what the master must do to one worker.
type Action struct {
	Verb   Verb
	Worker int
	// Pool is the worker's pool, Decision the workers it gives the
	// master, and Holds the tasks the worker holds, for the log.
	Pool     string
	Decision int
	Holds    int
	// Back says a Drain keeps a worker that came back within the window of
	// its release, instead of releasing it again.
	Back bool
}

// A Joining worker: its ID, its pool ("" for none: the Enforcer ignores
// it), Key, what identifies it across connections (its worker-id; ""
// if it says none: it is not remembered), the tasks it holds, and the
// cores it offers (0 if unknown), by which it counts against a decision
// in workers of more than one core (Weigh).
type Joining struct {
	ID    int
	Pool  string
	Key   string
	Holds int
	Cores float64
}

// DecidedQuotas records, at now, the workers each pool gives the master
// and the unit it counts them in (QuotasForMaster; a worker counts as the
// pool's workers its cores make): its decisions as the catalog has them
// now (a pool absent has none, and its workers are never beyond it).
func (e *Enforcer) DecidedQuotas(byPool map[string]Quota, now time.Time) []Action {
	e.decisions = maps.Clone(byPool)
	if e.decisions == nil {
		e.decisions = map[string]Quota{}
	}
	return e.step(now)
}

// Joined records that worker w joined at now.
func (e *Enforcer) Joined(w Joining, now time.Time) []Action {
	if w.Pool == "" {
		return nil
	}
	if _, ok := e.workers[w.ID]; ok {
		return e.Holds(w.ID, w.Holds, now)
	}
	t := &tracked{Worker: Worker{ID: w.ID, Pool: w.Pool, Holds: w.Holds, Joined: now, Cores: w.Cores}, key: w.Key}
	if at, ok := e.released[w.Key]; ok && w.Key != "" && now.Sub(at) < e.remember {
		t.back = true
	}
	e.workers[w.ID] = t
	return e.step(now)
}

// Left records that worker id is gone at now (it left, or the master
// dropped it); a worker the Enforcer released is gone already.
func (e *Enforcer) Left(id int, now time.Time) []Action {
	if _, ok := e.workers[id]; !ok {
		return nil
	}
	delete(e.workers, id)
	return e.step(now)
}

// Holds records that worker id holds n tasks (running, or sending their
// outputs) at now: tell it whenever that changes, as when a task is
// dispatched or done. It acts only when a worker beyond its pool's
// decision may go: a drained worker's tasks changed, or a worker of a
// pool with more workers than its decision holds none.
func (e *Enforcer) Holds(id, n int, now time.Time) []Action {
	w, ok := e.workers[id]
	if !ok || w.Holds == n {
		return nil
	}
	w.Holds = n
	if !w.Draining && (n > 0 || !e.beyond(w.Pool)) {
		return nil
	}
	return e.step(now)
}

// beyond reports whether pool has more workers here than its decision.
func (e *Enforcer) beyond(pool string) bool {
	q, ok := e.decisions[pool]
	if !ok {
		return false
	}
	n := 0
	for _, w := range e.workers {
		if w.Pool == pool {
			n += Weigh(w.Cores, q.WorkerCores)
		}
	}
	return n > q.Workers
}

// Active reports whether the Enforcer has anything to enforce: a pool's
// decision, or a worker still drained.
func (e *Enforcer) Active() bool {
	return len(e.decisions) > 0 || e.Draining() > 0
}

// Draining counts the workers drained.
func (e *Enforcer) Draining() int {
	n := 0
	for _, w := range e.workers {
		if w.Draining {
			n++
		}
	}
	return n
}

// step brings every worker in line with the decisions at now: the
// workers beyond them (Surplus) drained, and released once they hold no
// task unless they came back; the others not drained.
func (e *Enforcer) step(now time.Time) []Action {
	for k, at := range e.released {
		if now.Sub(at) >= e.remember {
			delete(e.released, k)
		}
	}
	ws := make([]Worker, 0, len(e.workers))
	for _, w := range e.workers {
		ws = append(ws, w.Worker)
	}
	surplus := map[int]bool{}
	for _, id := range Surplus(e.decisions, ws) {
		surplus[id] = true
	}
	var acts []Action
	for _, id := range slices.Sorted(maps.Keys(e.workers)) {
		w := e.workers[id]
		a := Action{Worker: id, Pool: w.Pool, Decision: e.decisions[w.Pool].Workers, Holds: w.Holds, Back: w.back}
		switch {
		case surplus[id] && w.Holds == 0 && !w.back:
			a.Verb = Release
			delete(e.workers, id)
			if w.key != "" {
				e.released[w.key] = now
			}
		case surplus[id] && !w.Draining:
			a.Verb = Drain
			w.Draining = true
		case !surplus[id] && w.Draining:
			a.Verb = Undrain
			w.Draining = false
		default:
			continue
		}
		acts = append(acts, a)
	}
	return acts
}
