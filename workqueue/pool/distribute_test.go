package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/workqueue/factory"
)

// workedExample is seed 000's §4.4.2 example: pool ws1.nd.edu-100, policy
// max_workers 2000, proj1=500, proj2.*=1500.
var workedExample = []Master{
	// 2000 tasks, 200 workers of which 100 from this pool, capacity 1100.
	{Project: "proj1", Addr: "h:1", Tasks: 2000, Connected: 200, Received: 100, Capacity: 1100},
	// 1000 tasks, no worker, no capacity yet.
	{Project: "proj2-A", Addr: "h:2", Tasks: 1000},
	// 300 tasks, 100 workers from another pool, capacity 700.
	{Project: "proj2-B", Addr: "h:3", Tasks: 300, Connected: 100, Capacity: 700},
}

func examplePolicy(t *testing.T, decision string) *Policy {
	t.Helper()
	p, err := ParsePolicy(strings.NewReader("max_workers: 2000\ndistribution: proj1=500, proj2.*=1500\ndecision: "+decision+"\n"), "pool.conf")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWorkedExample checks the seed's numbers: needs 1000, 1000, 200, and
// the decision proj1:800, proj2-A:1000, proj2-B:200.
func TestWorkedExample(t *testing.T) {
	pol := examplePolicy(t, "D3")
	p, err := NewPlan(pol, Limits{}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	p.Observe(workedExample, time.Unix(0, 0))
	p.Next(time.Unix(0, 0))
	as := p.Decision()
	var needs []int
	for _, a := range as {
		needs = append(needs, a.Need)
	}
	if want := []int{1000, 1000, 200}; !equal(needs, want) {
		t.Errorf("W_max_needed %v, want %v", needs, want)
	}
	if got, want := FormatDecision(as), "proj1:800, proj2-A:1000, proj2-B:200"; got != want {
		t.Errorf("decision %q, want %q", got, want)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDistribute checks Eqs. 4.9–4.15 on their own.
func TestDistribute(t *testing.T) {
	shares := []Share{{Source: "a", Workers: 1}, {Source: "b.*", Workers: 3}, {Source: "c", Workers: 4}}
	for _, tc := range []struct {
		name  string
		share []int
		needs []int
		total int
		want  []int
	}{
		{"plenty: everyone gets its need", []int{0, 1}, []int{10, 20}, 100, []int{10, 20}},
		{"scarce: by the shares", []int{0, 1}, []int{100, 100}, 40, []int{10, 30}},
		{"one full, the rest to the other", []int{0, 1}, []int{2, 100}, 40, []int{2, 38}},
		// b's share split between its two masters; c matches no master,
		// so its share goes to the others (Eq. 4.10 scales): 17.5, 26.25,
		// 26.25, the half worker to the largest fraction.
		{"a share split, an entry unmatched", []int{0, 1, 1}, []int{100, 100, 100}, 70, []int{18, 26, 26}},
		// The second needs less than its share: the 65 left go 2:3.
		{"one under its share, the rest 2:3", []int{0, 1, 1}, []int{100, 5, 100}, 70, []int{26, 5, 39}},
		// Iteration: b's potential (60) is above its need (20), then a
		// gets all that is left.
		{"potential above need", []int{0, 1}, []int{100, 20}, 80, []int{60, 20}},
		{"remainders: the sum is the total", []int{1, 1, 1}, []int{10, 10, 10}, 10, []int{4, 3, 3}},
		{"nothing to give", []int{0}, []int{10}, 0, []int{0}},
		{"no masters", nil, nil, 10, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := distribute(shares, tc.share, tc.needs, tc.total)
			if !equal(got, tc.want) {
				t.Errorf("distribute(%v, %d) = %v, want %v", tc.needs, tc.total, got, tc.want)
			}
		})
	}
}

// TestNeed checks Eqs. 4.6–4.8 under each decision.
func TestNeed(t *testing.T) {
	unknown := Master{Tasks: 100, Connected: 10, Received: 4}
	known := Master{Tasks: 100, Connected: 10, Received: 4, Capacity: 30}
	falling := Master{Tasks: 100, Connected: 40, Received: 40, Capacity: 30}
	for _, tc := range []struct {
		m    Master
		d    factory.Policy
		tpw  int
		want int
	}{
		{unknown, factory.D1, 1, 94}, // 100 - 10 + 4
		{known, factory.D1, 1, 94},   // capacity ignored
		{known, factory.D2, 1, 94},   // capacity ignored
		{unknown, factory.D3, 1, 94}, // Eq. 4.7
		{known, factory.D3, 1, 24},   // Eq. 4.8: 30 - 10 + 4
		{unknown, factory.D4, 1, 14}, // default 20: 20 - 10 + 4
		{unknown, factory.D6, 1, 14}, // as D4
		{unknown, factory.D7, 1, 14}, // as D4
		{known, factory.D5, 1, 24},   // as D3
		{falling, factory.D3, 1, 40}, // never below what it has
		{known, factory.D1, 4, 19},   // 25 workers' tasks - 10 + 4
		{known, factory.D3, 4, 4},    // capacity 8 workers, 10 connected: none still needed
	} {
		if got := need(tc.m, tc.d, 20, tc.tpw); got != tc.want {
			t.Errorf("need(%+v, %v, tpw %d) = %d, want %d", tc.m, tc.d, tc.tpw, got, tc.want)
		}
	}
}
