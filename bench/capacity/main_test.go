package main

import (
	"math"
	"testing"
)

func TestClosedNetwork(t *testing.T) {
	// One worker is never queued: a cycle is z + d. Many workers saturate
	// the link: the throughput tends to 1/d from below.
	const d, z = 0.2, 1.0
	xs := closedNetwork(d, z, 200)
	if got, want := xs[0], 1/(z+d); math.Abs(got-want) > 1e-12 {
		t.Errorf("X(1) = %v, want %v", got, want)
	}
	// Two workers: R(2) = d(1 + d/(z+d)).
	r2 := d * (1 + d/(z+d))
	if got, want := xs[1], 2/(z+r2); math.Abs(got-want) > 1e-12 {
		t.Errorf("X(2) = %v, want %v", got, want)
	}
	for k := 1; k < len(xs); k++ {
		if xs[k] < xs[k-1]-1e-12 || xs[k] > 1/d+1e-12 {
			t.Fatalf("X(%d) = %v after X(%d) = %v: not rising towards 1/d = %v", k+1, xs[k], k, xs[k-1], 1/d)
		}
	}
	if got := xs[len(xs)-1]; got < 0.99/d {
		t.Errorf("X(200) = %v, want within 1%% of 1/d = %v", got, 1/d)
	}
}
