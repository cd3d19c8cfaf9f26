package model

import (
	"container/heap"
	"math"
)

// A FlowRule is one rule of a workflow as the makespan model sees it.
type FlowRule struct {
	Seconds float64 // predicted running time
	Parents []int   // the rules that make its inputs
	// Here says the rule runs on this machine whatever the placement:
	// LOCAL rules, nested workflows, rules kept here as too short.
	Here bool
	// Bytes are the inputs a run elsewhere must receive.
	Bytes float64
	// Cores is how many of this machine's slots the rule holds (its
	// cores= request; 0 means 1). A rule asking for more than there are
	// runs alone, as Makeflow's scheduler runs it. On the cluster every
	// rule is one job, one slot.
	Cores int
}

// FlowPlaces are where a workflow's rules may run: this machine's slots
// and, if RemoteSlots > 0, a cluster's, each remote rule paying Dispatch
// seconds and its Bytes over Bandwidth.
type FlowPlaces struct {
	LocalSlots  int
	RemoteSlots int
	Dispatch    float64
	Bandwidth   float64 // bytes/s; zero means 125e6
	// Hybrid lets a rule bound for the cluster start on a free local slot
	// instead, without dispatch or transfer, as batch.Hybrid does: a rule
	// not yet sent, or one sent but still in its dispatch (the earliest
	// sent first).
	Hybrid bool
}

// remoteTime is what rule r costs on the cluster.
func (p FlowPlaces) remoteTime(r FlowRule) float64 {
	b := p.Bandwidth
	if b <= 0 {
		b = 125e6
	}
	return r.Seconds + p.Dispatch + r.Bytes/b
}

// CriticalPath returns the longest chain of predicted seconds through the
// rules, and for each rule the longest chain from it to the end. Rules
// must be in an order where parents come first (a workflow's topological
// order).
func CriticalPath(rules []FlowRule) (float64, []float64) {
	children := make([][]int, len(rules))
	for id, r := range rules {
		for _, p := range r.Parents {
			children[p] = append(children[p], id)
		}
	}
	tail := make([]float64, len(rules))
	longest := 0.0
	for id := len(rules) - 1; id >= 0; id-- {
		best := 0.0
		for _, c := range children[id] {
			best = math.Max(best, tail[c])
		}
		tail[id] = best + rules[id].Seconds
		longest = math.Max(longest, tail[id])
	}
	return longest, tail
}

// TotalWork returns the rules' predicted seconds added up.
func TotalWork(rules []FlowRule) float64 {
	total := 0.0
	for _, r := range rules {
		total += r.Seconds
	}
	return total
}

// Makespan predicts a workflow's running time under list scheduling, as
// Makeflow's scheduler does it: whenever a slot is free, the ready rule
// with the longest predicted chain after it that fits starts, on the
// cluster unless it must run here (or there is no cluster). Rules must
// come parents first.
func Makespan(rules []FlowRule, p FlowPlaces) float64 {
	if len(rules) == 0 {
		return 0
	}
	_, tail := CriticalPath(rules)
	children := make([][]int, len(rules))
	pending := make([]int, len(rules))
	for id, r := range rules {
		pending[id] = len(r.Parents)
		for _, par := range r.Parents {
			children[par] = append(children[par], id)
		}
	}
	remote := p.RemoteSlots > 0
	local := max(p.LocalSlots, 1)
	pools := [2]*flowPool{newFlowPool(local, tail), newFlowPool(p.RemoteSlots, tail)}
	// need is what rule id holds of a pool's slots.
	need := func(id, side int) int {
		if side == 1 {
			return 1
		}
		return min(max(rules[id].Cores, 1), local)
	}
	side := func(id int) int {
		if remote && !rules[id].Here {
			return 1
		}
		return 0
	}
	for id := range rules {
		if pending[id] == 0 {
			pools[side(id)].push(id, need(id, side(id)))
		}
	}
	var running endings[flowEvent]
	moved := make([]bool, len(rules)) // taken here from the cluster's queue
	// dispatching returns the running event of the rule sent to the
	// cluster earliest that is still in its dispatch and fits in free
	// local slots, or -1.
	dispatching := func(now float64, free int) int {
		best := -1
		for i, ev := range running {
			if ev.side == 1 && !moved[ev.id] && ev.sent+p.Dispatch > now && need(ev.id, 0) <= free &&
				(best < 0 || ev.sent < running[best].sent) {
				best = i
			}
		}
		return best
	}
	now := 0.0
	for done := 0; done < len(rules); {
		for s, pl := range pools {
			for {
				from := pl
				id := pl.best()
				if id < 0 && s == 0 && p.Hybrid {
					from, id = pools[1], pools[1].bestFitting(pl.free, func(id int) int { return need(id, 0) })
				}
				if id < 0 && s == 0 && p.Hybrid {
					if i := dispatching(now, pl.free); i >= 0 {
						// Taken from the cluster's queue: its event
						// there is dropped when it comes up.
						id, from = running[i].id, nil
						moved[id] = true
						pools[1].free += running[i].slots
					}
				}
				if id < 0 {
					break
				}
				if from != nil {
					from.remove(id)
				}
				n := need(id, s)
				pl.free -= n
				d := rules[id].Seconds
				if s == 1 {
					d = p.remoteTime(rules[id])
				}
				heap.Push(&running, flowEvent{at: now + d, sent: now, id: id, side: s, slots: n})
			}
		}
		if running.Len() == 0 {
			return math.Inf(1) // a cycle, or rules not parents first
		}
		ev := heap.Pop(&running).(flowEvent)
		if ev.side == 1 && moved[ev.id] {
			continue
		}
		now = ev.at
		pools[ev.side].free += ev.slots
		done++
		for _, c := range children[ev.id] {
			if pending[c]--; pending[c] == 0 {
				pools[side(c)].push(c, need(c, side(c)))
			}
		}
	}
	return now
}

// A flowPool is one place's slots and its ready rules, a queue for each
// number of slots a rule holds, as the scheduler keeps one for each
// resource request.
type flowPool struct {
	size, free int
	tail       []float64
	queues     map[int]*flowQueue // by slots held
}

func newFlowPool(size int, tail []float64) *flowPool {
	return &flowPool{size: size, free: size, tail: tail, queues: map[int]*flowQueue{}}
}

func (p *flowPool) push(id, slots int) {
	q := p.queues[slots]
	if q == nil {
		q = &flowQueue{tail: p.tail, slots: slots}
		p.queues[slots] = q
	}
	heap.Push(q, id)
}

// best returns the ready rule to start on a free slot of p, or -1: the
// first of those that fit, longest tail first. A rule holding the whole
// pool fits only when it is idle.
func (p *flowPool) best() int {
	return p.bestFitting(p.free, func(int) int { return 0 })
}

// bestFitting returns the first ready rule of p that fits in free slots,
// each holding need(id) of them (or its queue's slots if need says 0).
func (p *flowPool) bestFitting(free int, need func(int) int) int {
	best := -1
	for _, q := range p.queues {
		if q.Len() == 0 {
			continue
		}
		id := q.ids[0]
		n := need(id)
		if n == 0 {
			n = q.slots
		}
		if n > free {
			continue
		}
		if best < 0 || q.before(id, best) {
			best = id
		}
	}
	return best
}

// remove takes rule id, the head of one of p's queues, out of it.
func (p *flowPool) remove(id int) {
	for _, q := range p.queues {
		if q.Len() > 0 && q.ids[0] == id {
			heap.Pop(q)
			return
		}
	}
}

// flowQueue holds ready rules, the longest tail first, then file order.
type flowQueue struct {
	ids   []int
	tail  []float64
	slots int
}

func (q flowQueue) before(a, b int) bool {
	if q.tail[a] != q.tail[b] {
		return q.tail[a] > q.tail[b]
	}
	return a < b
}

func (q flowQueue) Len() int           { return len(q.ids) }
func (q flowQueue) Less(i, j int) bool { return q.before(q.ids[i], q.ids[j]) }
func (q flowQueue) Swap(i, j int)      { q.ids[i], q.ids[j] = q.ids[j], q.ids[i] }
func (q *flowQueue) Push(x any)        { q.ids = append(q.ids, x.(int)) }
func (q *flowQueue) Pop() any {
	x := q.ids[len(q.ids)-1]
	q.ids = q.ids[:len(q.ids)-1]
	return x
}

type flowEvent struct {
	at    float64
	sent  float64 // when it started, or was sent to the cluster
	id    int
	side  int
	slots int // held until it ends
}

func (f flowEvent) end() float64 { return f.at }

// endings are things that end at a time, a container/heap of them the
// first to end first: rules or cells running.
type endings[E interface{ end() float64 }] []E

func (e endings[E]) Len() int           { return len(e) }
func (e endings[E]) Less(i, j int) bool { return e[i].end() < e[j].end() }
func (e endings[E]) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *endings[E]) Push(x any)        { *e = append(*e, x.(E)) }
func (e *endings[E]) Pop() any {
	x := (*e)[len(*e)-1]
	*e = (*e)[:len(*e)-1]
	return x
}
