package pool

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
)

func policy(t *testing.T, text string) *Policy {
	t.Helper()
	p, err := ParsePolicy(strings.NewReader(text), "pool.conf")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// submitAll submits what d says, as a driver would, with job IDs j1, j2…
func submitAll(p *Plan, d Decision, next *int) map[string]int {
	per := map[string]int{}
	for _, r := range d.Submit {
		*next++
		id := fmt.Sprintf("j%d", *next)
		p.Submitted(id, r.Addr, r.Workers)
		p.Started(id)
		per[r.Addr] += r.Workers
	}
	return per
}

// TestPlanSteps drives a plan on logical time through a run of two
// masters, checking what it submits for each at each step.
func TestPlanSteps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at      time.Duration
		masters []Master
		want    map[string]int // workers submitted at this step, by master
	}
	for _, tc := range []struct {
		name   string
		policy string
		steps  []step
	}{
		{
			name:   "D1: every task, shared 1:3 when scarce",
			policy: "max_workers: 8\ndistribution: a=1, b=3\ndecision: D1\n",
			steps: []step{
				{0, []Master{{Project: "a", Addr: "A", Tasks: 10, Received: -1}, {Project: "b", Addr: "B", Tasks: 10, Received: -1}},
					map[string]int{"A": 2, "B": 6}},
				// a finishes: its workers stay until idle, b gets no more
				// than max_workers allows.
				{time.Minute, []Master{{Project: "a", Addr: "A", Connected: 2, Received: 2}, {Project: "b", Addr: "B", Tasks: 10, Connected: 6, Received: 6}},
					map[string]int{}},
			},
		},
		{
			name:   "D3: capped by capacity, unknown capacity is no cap",
			policy: "max_workers: 100\ndistribution: .*=1\ndecision: D3\n",
			steps: []step{
				{0, []Master{{Project: "a", Addr: "A", Tasks: 10, Received: -1, Capacity: 3}, {Project: "b", Addr: "B", Tasks: 5, Received: -1}},
					map[string]int{"A": 3, "B": 5}},
				// Capacity falls: nothing removed, nothing added.
				{time.Minute, []Master{{Project: "a", Addr: "A", Tasks: 10, Connected: 3, Received: 3, Capacity: 1}, {Project: "b", Addr: "B", Tasks: 5, Connected: 5, Received: 5}},
					map[string]int{}},
			},
		},
		{
			name:   "D6: default capacity, rising by max_change a minute",
			policy: "max_workers: 100\ndistribution: .*=1\ndecision: D6\nmax_change: 10\ndefault_capacity: 50\n",
			steps: []step{
				{0, []Master{{Project: "a", Addr: "A", Tasks: 100, Received: -1}}, map[string]int{}},
				{30 * time.Second, []Master{{Project: "a", Addr: "A", Tasks: 100, Received: -1}}, map[string]int{"A": 5}},
				{90 * time.Second, []Master{{Project: "a", Addr: "A", Tasks: 100, Connected: 5, Received: 5}}, map[string]int{"A": 10}},
				// Its capacity reported: 20.
				{10 * time.Minute, []Master{{Project: "a", Addr: "A", Tasks: 100, Connected: 15, Received: 15, Capacity: 20}}, map[string]int{"A": 5}},
			},
		},
		{
			name:   "masters no policy entry matches are not served",
			policy: "max_workers: 10\ndistribution: a=1\ndecision: D1\n",
			steps: []step{
				{0, []Master{{Project: "ab", Addr: "X", Tasks: 10, Received: -1}, {Project: "a", Addr: "A", Tasks: 1, Received: -1}}, map[string]int{"A": 1}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(policy(t, tc.policy), Limits{}, t0)
			if err != nil {
				t.Fatal(err)
			}
			jobs := 0
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				p.Observe(s.masters, now)
				got := submitAll(p, p.Next(now), &jobs)
				if fmt.Sprint(got) != fmt.Sprint(s.want) {
					t.Errorf("step %d: submitted %v, want %v (decision %s)", i, got, s.want, FormatDecision(p.Decision()))
				}
			}
		})
	}
}

// TestPlanEndsAndFailures: a worker that ends is replaced for its master;
// a rejected job pauses submissions; nothing is submitted while the
// masters cannot be asked.
func TestPlanEndsAndFailures(t *testing.T) {
	t0 := time.Unix(0, 0)
	p, err := NewPlan(policy(t, "max_workers: 4\ndistribution: a=1\ndecision: D1\n"), Limits{Backoff: time.Minute}, t0)
	if err != nil {
		t.Fatal(err)
	}
	ms := []Master{{Project: "a", Addr: "A", Tasks: 2, Received: -1}}
	p.Observe(ms, t0)
	jobs := 0
	if got := submitAll(p, p.Next(t0), &jobs); got["A"] != 2 {
		t.Fatalf("submitted %v", got)
	}
	p.Ended(batch.Event{ID: "j1", Status: batch.Status{State: batch.Done, ExitCode: 137}}, t0)
	d := p.Next(t0)
	if len(d.Submit) != 1 || d.Submit[0] != (Request{Addr: "A", Workers: 1}) {
		t.Fatalf("after a kill: %+v", d)
	}
	p.SubmitFailed(errors.New("sbatch: error: too many jobs"), t0)
	if d := p.Next(t0); d.Retry != time.Minute {
		t.Fatalf("after a rejection: %+v", d)
	}
	if d := p.Next(t0.Add(time.Minute)); len(d.Submit) != 1 {
		t.Fatalf("a minute later: %+v", d)
	}
	p.Unobserved()
	if d := p.Next(t0.Add(time.Minute)); len(d.Submit) != 0 {
		t.Fatalf("masters unknown: %+v", d)
	}
	c, ours := p.Counts()
	if c.Running != 1 || ours["A"] != 1 {
		t.Errorf("counts %+v %v", c, ours)
	}
}

// TestPlanPolicyReload: a new policy takes effect at the next decision.
func TestPlanPolicyReload(t *testing.T) {
	t0 := time.Unix(0, 0)
	p, err := NewPlan(policy(t, "max_workers: 2\ndistribution: a=1\ndecision: D1\n"), Limits{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	p.Observe([]Master{{Project: "a", Addr: "A", Tasks: 10, Received: -1}}, t0)
	jobs := 0
	if got := submitAll(p, p.Next(t0), &jobs); got["A"] != 2 {
		t.Fatalf("submitted %v", got)
	}
	p.SetPolicy(policy(t, "max_workers: 5\ndistribution: a=1\ndecision: D1\n"))
	if got := submitAll(p, p.Next(t0), &jobs); got["A"] != 3 {
		t.Fatalf("after the reload, submitted %v", got)
	}
}

// TestPlanLetsWorkersMove: when the shares change, the master that loses
// workers releases them to the one that gains (package enforce): the plan
// submits none for the move, counting each master's workers by what it
// says it has from the pool, and submits again once the pool is short in
// all.
func TestPlanLetsWorkersMove(t *testing.T) {
	t0 := time.Unix(0, 0)
	p, err := NewPlan(policy(t, "max_workers: 4\ndistribution: a=1, b=1\ndecision: D1\n"), Limits{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	p.Observe([]Master{{Project: "a", Addr: "A", Tasks: 10, Received: 0}, {Project: "b", Addr: "B", Tasks: 10, Received: 0}}, t0)
	jobs := 0
	if got := submitAll(p, p.Next(t0), &jobs); got["A"] != 2 || got["B"] != 2 {
		t.Fatalf("submitted %v, want A:2 B:2", got)
	}
	p.SetPolicy(policy(t, "max_workers: 4\ndistribution: a=1, b=3\ndecision: D1\n"))
	// A still has its two; B its two: the decision is a:1, b:3.
	p.Observe([]Master{{Project: "a", Addr: "A", Tasks: 10, Connected: 2, Received: 2}, {Project: "b", Addr: "B", Tasks: 10, Connected: 2, Received: 2}}, t0)
	if d := p.Next(t0); len(d.Submit) != 0 || FormatDecision(p.Decision()) != "a:1, b:3" {
		t.Fatalf("decision %s, submitted %v; want a:1, b:3 and none submitted", FormatDecision(p.Decision()), d.Submit)
	}
	// A released one, which B now has.
	p.Observe([]Master{{Project: "a", Addr: "A", Tasks: 10, Connected: 1, Received: 1}, {Project: "b", Addr: "B", Tasks: 10, Connected: 3, Received: 3}}, t0)
	if d := p.Next(t0); len(d.Submit) != 0 {
		t.Fatalf("after the move, submitted %v", d.Submit)
	}
	// A worker of B's ends: one is submitted, for B.
	p.Ended(batch.Event{ID: "j4", Status: batch.Status{State: batch.Done}}, t0)
	p.Observe([]Master{{Project: "a", Addr: "A", Tasks: 10, Connected: 1, Received: 1}, {Project: "b", Addr: "B", Tasks: 10, Connected: 2, Received: 2}}, t0)
	if d := p.Next(t0); len(d.Submit) != 1 || d.Submit[0].Addr != "B" {
		t.Fatalf("after a worker ended, submitted %v, want [B]", d.Submit)
	}
}

// TestPlanStrategy: the policy's strategy splits each master's share into
// batch requests, counted as their workers; optimal asks for no more than
// the batch system has free.
func TestPlanStrategy(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := []Master{{Project: "a", Addr: "A", Tasks: 10, Received: -1}, {Project: "b", Addr: "B", Tasks: 3, Received: -1}}
	p, err := NewPlan(policy(t, "max_workers: 100\ndistribution: a=50, b=50\ndecision: D1\nstrategy: additive"), Limits{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	p.Observe(ms, t0)
	d := p.Next(t0)
	want := []Request{{"A", 1}, {"A", 2}, {"A", 3}, {"A", 4}, {"B", 1}, {"B", 2}}
	if fmt.Sprint(d.Submit) != fmt.Sprint(want) {
		t.Fatalf("requests %v, want %v", d.Submit, want)
	}
	jobs := 0
	submitAll(p, d, &jobs)
	if d := p.Next(t0); len(d.Submit) != 0 {
		t.Errorf("asked again for %v", d.Submit)
	}
	if _, ours := p.Counts(); ours["A"] != 10 || ours["B"] != 3 {
		t.Errorf("workers by master %v", ours)
	}

	p, err = NewPlan(policy(t, "max_workers: 100\ndistribution: a=50\ndecision: D1\nstrategy: optimal"), Limits{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	p.Observe(ms[:1], t0)
	p.ObserveFree(4)
	if d := p.Next(t0); fmt.Sprint(d.Submit) != fmt.Sprint([]Request{{"A", 4}}) {
		t.Errorf("optimal with 4 free: %v", d.Submit)
	}
}
