package model

import (
	"math"
	"testing"
)

// TestWavefrontDistributedEvents checks the event-driven distributed
// model against what can be worked out by hand: on one slot every block
// runs in turn, each paying its dispatch; with a slot for every block of
// the widest anti-diagonal and blocks all alike it is the lock-step model,
// since every block of an anti-diagonal starts together either way; and
// with fewer slots than an anti-diagonal has blocks it is faster than the
// lock-step model, never faster than the critical path of blocks or than
// the work spread on every slot.
func TestWavefrontDistributedEvents(t *testing.T) {
	const tau, delta = 0.05, 0.03
	for _, tc := range []struct {
		name             string
		n, b, nodes, cpn int
		want             float64 // exact, if not 0
		belowLockStep    bool
		criticalBlocks   int // blocks on the critical path
		blockCells, jobs int // cells of a whole block, blocks in all
	}{
		{name: "one slot", n: 5, b: 2, nodes: 1, cpn: 1, want: 25*tau + 9*delta, criticalBlocks: 5, blockCells: 4, jobs: 9},
		{name: "one slot, two cores a job", n: 4, b: 2, nodes: 1, cpn: 2, want: 4*3*tau + 4*delta, criticalBlocks: 3, blockCells: 4, jobs: 4},
		{name: "a slot for every block", n: 12, b: 3, nodes: 4, cpn: 1, want: WavefrontDistributed(12, 3, 4, 1, tau, delta), criticalBlocks: 7, blockCells: 9, jobs: 16},
		{name: "eight workers, 1×1 blocks of a 20×20", n: 20, b: 1, nodes: 8, cpn: 1, belowLockStep: true, criticalBlocks: 39, blockCells: 1, jobs: 400},
		{name: "eight workers, 2×2 blocks of a 20×20", n: 20, b: 2, nodes: 8, cpn: 1, belowLockStep: true, criticalBlocks: 19, blockCells: 4, jobs: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := WavefrontDistributedEvents(tc.n, tc.b, tc.nodes, tc.cpn, tau, delta)
			lock := WavefrontDistributed(tc.n, tc.b, tc.nodes, tc.cpn, tau, delta)
			if tc.want != 0 && math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("%.3f s, want %.3f s", got, tc.want)
			}
			if got > lock+1e-9 {
				t.Errorf("%.3f s, slower than the lock-step model's %.3f s", got, lock)
			}
			if tc.belowLockStep && got >= lock-1e-9 {
				t.Errorf("%.3f s, want below the lock-step model's %.3f s", got, lock)
			}
			block := WavefrontMulticore(tc.b, tc.b, tc.cpn, tau) + delta
			if critical := float64(tc.criticalBlocks) * block; got < critical-1e-9 {
				t.Errorf("%.3f s, below the critical path of blocks %.3f s", got, critical)
			}
			if spread := float64(tc.n*tc.n)*tau/float64(tc.nodes*tc.cpn) + float64(tc.jobs)*delta/float64(tc.nodes); got < spread-1e-9 {
				t.Errorf("%.3f s, below the work spread on every slot %.3f s", got, spread)
			}
		})
	}
}

// TestBestWavefrontDistributed checks that the block side chosen is the
// fastest the event-driven model finds, and that a region cut into more
// blocks than it schedules one by one is predicted by the lock-step
// model.
func TestBestWavefrontDistributed(t *testing.T) {
	const tau, delta = 0.05, 0.03
	for _, tc := range []struct {
		name            string
		n, limit, nodes int
		events          bool
	}{
		{name: "work queue's eight workers", n: 20, limit: 20, nodes: 8, events: true},
		{name: "sixteen slots, a second's dispatch", n: 12, limit: 12, nodes: 16, events: true},
		{name: "too many blocks to schedule", n: 300, limit: 1, nodes: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, b := BestWavefrontDistributed(tc.n, tc.limit, tc.nodes, 1, tau, delta)
			if b < 1 || b > min(tc.n, tc.limit) {
				t.Fatalf("block side %d, want 1 to %d", b, min(tc.n, tc.limit))
			}
			want := WavefrontDistributed(tc.n, b, tc.nodes, 1, tau, delta)
			if tc.events {
				want = WavefrontDistributedEvents(tc.n, b, tc.nodes, 1, tau, delta)
				for other := 1; other <= min(tc.n, tc.limit); other++ {
					if v := WavefrontDistributedEvents(tc.n, other, tc.nodes, 1, tau, delta); v < got-1e-9 {
						t.Errorf("blocks of %d: %.3f s, faster than the chosen %d's %.3f s", other, v, b, got)
					}
				}
			}
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("%.3f s in blocks of %d, want %.3f s", got, b, want)
			}
		})
	}
}
