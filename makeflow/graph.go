package makeflow

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rightsize/rightsize/internal/suggest"
)

// A graph is the DAG of a workflow: which rule makes each file and which
// rules must finish before each rule can start. It is built once per run,
// in time linear in the size of the workflow.
type graph struct {
	w        *Workflow
	producer map[string]int // file -> the rule that makes it
	children [][]int32      // rule -> rules that read something it makes
	parents  []int32        // rule -> how many distinct rules it waits for
	errs     ErrorList      // files made by two rules
}

func newGraph(w *Workflow) *graph {
	n := len(w.Rules)
	g := &graph{
		w:        w,
		producer: make(map[string]int, n),
		children: make([][]int32, n),
		parents:  make([]int32, n),
	}
	for _, r := range w.Rules {
		for _, f := range r.Targets {
			if other, ok := g.producer[f.Name]; ok {
				g.errs = append(g.errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf("%s is also made by the rule at %s; a file can be made by one rule only",
					quoteName(f.Name), w.Rules[other].Pos)})
				continue
			}
			g.producer[f.Name] = r.ID
		}
	}
	// seen[p] == r+1 marks that the edge p->r exists already, so that a
	// rule reading several files of one parent counts that parent once.
	seen := make([]int, n)
	for _, r := range w.Rules {
		for _, f := range r.Sources {
			p, ok := g.producer[f.Name]
			if !ok || seen[p] == r.ID+1 {
				continue
			}
			seen[p] = r.ID + 1
			g.children[p] = append(g.children[p], int32(r.ID))
			g.parents[r.ID]++
		}
	}
	return g
}

// topoOrder returns the rules in an order where every rule comes after the
// rules it waits for, and the rules that are on or behind a cycle (which
// have no such place).
func (g *graph) topoOrder() (order, stuck []int) {
	n := len(g.w.Rules)
	pending := make([]int32, n)
	copy(pending, g.parents)
	order = make([]int, 0, n)
	for id := range n {
		if pending[id] == 0 {
			order = append(order, id)
		}
	}
	for i := 0; i < len(order); i++ {
		for _, c := range g.children[order[i]] {
			if pending[c]--; pending[c] == 0 {
				order = append(order, int(c))
			}
		}
	}
	if len(order) < n {
		for id := range n {
			if pending[id] > 0 {
				stuck = append(stuck, id)
			}
		}
	}
	return order, stuck
}

// levels returns, for every rule, the length of the longest path from it
// to the end of the workflow: in rules (1 for a rule nothing depends on),
// or, with cost, in predicted seconds. Starting rules with long tails
// first keeps the critical path moving.
func (g *graph) levels(order []int, cost []float64) []float64 {
	lv := make([]float64, len(g.w.Rules))
	for i := len(order) - 1; i >= 0; i-- {
		id := order[i]
		best := 0.0
		for _, c := range g.children[id] {
			best = max(best, lv[c])
		}
		lv[id] = best + 1
		if cost != nil {
			lv[id] = best + cost[id]
		}
	}
	return lv
}

// cycles describes each dependency cycle among the stuck rules once.
func (g *graph) cycles(stuck []int) ErrorList {
	const maxCycles = 10
	inStuck := make(map[int]bool, len(stuck))
	for _, id := range stuck {
		inStuck[id] = true
	}
	const (
		white = iota
		grey
		black
	)
	color := make(map[int]int, len(stuck))
	var errs ErrorList
	type frame struct{ id, next int }
	for _, start := range stuck {
		if color[start] != white || len(errs) >= maxCycles {
			continue
		}
		stack := []frame{{start, 0}}
		color[start] = grey
		for len(stack) > 0 && len(errs) < maxCycles {
			top := &stack[len(stack)-1]
			kids := g.children[top.id]
			if top.next == len(kids) {
				color[top.id] = black
				stack = stack[:len(stack)-1]
				continue
			}
			c := int(kids[top.next])
			top.next++
			if !inStuck[c] {
				continue
			}
			switch color[c] {
			case white:
				color[c] = grey
				stack = append(stack, frame{c, 0})
			case grey:
				var path []int
				for i := len(stack) - 1; i >= 0; i-- {
					path = append(path, stack[i].id)
					if stack[i].id == c {
						break
					}
				}
				// path runs from the newest frame back to c; reverse it.
				for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				errs = append(errs, g.cycleError(path))
			}
		}
	}
	return errs
}

// cycleError describes the cycle path[0] -> path[1] -> ... -> path[0],
// where each rule reads a file the previous one makes.
func (g *graph) cycleError(path []int) *Error {
	rules := g.w.Rules
	first := rules[path[0]]
	if len(path) == 1 {
		return &Error{Pos: first.Pos, Msg: fmt.Sprintf("dependency cycle: the rule reads %s, which it makes itself",
			quoteName(g.link(path[0], path[0])))}
	}
	var b strings.Builder
	b.WriteString("dependency cycle: this rule makes ")
	for i, id := range path {
		next := path[(i+1)%len(path)]
		if i > 0 {
			fmt.Fprintf(&b, ", which the rule at line %d reads to make ", rules[id].Pos.Line)
		}
		b.WriteString(quoteName(g.link(id, next)))
	}
	b.WriteString(", which this rule reads")
	return &Error{Pos: first.Pos, Msg: b.String()}
}

// link returns a file that rule from makes and rule to reads.
func (g *graph) link(from, to int) string {
	for _, f := range g.w.Rules[to].Sources {
		if p, ok := g.producer[f.Name]; ok && p == from {
			return f.Name
		}
	}
	return "?"
}

// quoteName quotes a file name for a message when it has spaces or is empty.
func quoteName(name string) string {
	if name == "" || strings.ContainsAny(name, " \t\"'") {
		return fmt.Sprintf("%q", name)
	}
	return name
}

// Check reports what would stop the workflow from running, each at its
// file:line:column: dependency cycles, files made by more than one rule,
// and inputs that no rule makes and that do not exist. exists tells whether
// such an input is present (relative names are relative to the workflow's
// directory); with a nil exists, inputs are not looked for.
//
// The error, if any, is an ErrorList.
func (w *Workflow) Check(exists func(name string) bool) error {
	g := newGraph(w)
	return g.check(exists).err()
}

func (g *graph) check(exists func(string) bool) ErrorList {
	errs := append(ErrorList(nil), g.errs...)
	if _, stuck := g.topoOrder(); len(stuck) > 0 {
		errs = append(errs, g.cycles(stuck)...)
	}
	if exists != nil {
		var made []string // for the "did you mean" of a missing input
		missing := map[string]bool{}
		for _, r := range g.w.Rules {
			for _, f := range r.Sources {
				if _, made := g.producer[f.Name]; made {
					continue
				}
				gone, seen := missing[f.Name]
				if !seen {
					gone = !exists(f.Name)
					missing[f.Name] = gone
				}
				if gone && len(errs) <= maxErrors {
					msg := fmt.Sprintf("input %s does not exist and no rule makes it", quoteName(f.Name))
					if made == nil {
						made = slices.Sorted(maps.Keys(g.producer))
					}
					if near := suggest.Nearest(f.Name, made); near != "" {
						msg += fmt.Sprintf(" (did you mean %s, which a rule makes?)", quoteName(near))
					}
					errs = append(errs, &Error{Pos: f.Pos, Msg: msg})
				}
			}
		}
	}
	sortErrors(errs)
	return errs
}

// Parents returns, for each rule by ID, the IDs of the rules that make the
// files it reads, each once.
func (w *Workflow) Parents() [][]int {
	g := newGraph(w)
	parents := make([][]int, len(w.Rules))
	for p, cs := range g.children {
		for _, c := range cs {
			parents[c] = append(parents[c], p)
		}
	}
	return parents
}
