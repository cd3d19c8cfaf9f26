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
	// instead, without dispatch or transfer (batch.Hybrid).
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
// with the longest predicted chain after it starts, on the cluster unless
// it must run here (or there is no cluster). Rules must come parents
// first; every rule takes one slot.
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
	free := [2]int{max(p.LocalSlots, 1), p.RemoteSlots}
	ready := [2]*flowQueue{{tail: tail}, {tail: tail}}
	side := func(id int) int {
		if remote && !rules[id].Here {
			return 1
		}
		return 0
	}
	for id := range rules {
		if pending[id] == 0 {
			heap.Push(ready[side(id)], id)
		}
	}
	var running flowEvents
	now := 0.0
	for done := 0; done < len(rules); {
		for s := range ready {
			for free[s] > 0 {
				q := ready[s]
				if q.Len() == 0 && s == 0 && p.Hybrid {
					q = ready[1] // a local slot takes a cluster rule
				}
				if q.Len() == 0 {
					break
				}
				id := heap.Pop(q).(int)
				free[s]--
				d := rules[id].Seconds
				if s == 1 {
					d = p.remoteTime(rules[id])
				}
				heap.Push(&running, flowEvent{at: now + d, id: id, side: s})
			}
		}
		if running.Len() == 0 {
			return math.Inf(1) // a cycle, or rules not parents first
		}
		ev := heap.Pop(&running).(flowEvent)
		now = ev.at
		free[ev.side]++
		done++
		for _, c := range children[ev.id] {
			if pending[c]--; pending[c] == 0 {
				heap.Push(ready[side(c)], c)
			}
		}
	}
	return now
}

// flowQueue holds ready rules, the longest tail first, then file order.
type flowQueue struct {
	ids  []int
	tail []float64
}

func (q flowQueue) Len() int { return len(q.ids) }
func (q flowQueue) Less(i, j int) bool {
	a, b := q.ids[i], q.ids[j]
	if q.tail[a] != q.tail[b] {
		return q.tail[a] > q.tail[b]
	}
	return a < b
}
func (q flowQueue) Swap(i, j int) { q.ids[i], q.ids[j] = q.ids[j], q.ids[i] }
func (q *flowQueue) Push(x any)   { q.ids = append(q.ids, x.(int)) }
func (q *flowQueue) Pop() any {
	x := q.ids[len(q.ids)-1]
	q.ids = q.ids[:len(q.ids)-1]
	return x
}

type flowEvent struct {
	at   float64
	id   int
	side int
}

// flowEvents are the running rules, the first to end first.
type flowEvents []flowEvent

func (e flowEvents) Len() int           { return len(e) }
func (e flowEvents) Less(i, j int) bool { return e[i].at < e[j].at }
func (e flowEvents) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *flowEvents) Push(x any)        { *e = append(*e, x.(flowEvent)) }
func (e *flowEvents) Pop() any {
	x := (*e)[len(*e)-1]
	*e = (*e)[:len(*e)-1]
	return x
}
