package model

import (
	"math"
	"testing"
)

// TestWavefrontHybrid checks the hybrid simulation against what can be
// worked out by hand: with no cluster, or one whose dispatch never ends,
// it is this machine's cores at cell granularity (one core: every cell in
// turn; as many cores as the widest anti-diagonal: the critical path);
// in these cases a cluster makes it no slower than that, and nothing
// makes it faster than the critical path; and on the placement benchmark's crossover (a 20×20 Wavefront of
// 50 ms cells, 2 cores here, 16 slots a second away) it beats the
// multicore model, which a hybrid in blocks could only match; on Work
// Queue's workers, whose dispatch is microseconds, it halves it.
func TestWavefrontHybrid(t *testing.T) {
	const tau = 0.05
	for _, tc := range []struct {
		name     string
		in       WavefrontHybridInputs
		want     float64 // exact, if not 0
		below    float64 // strictly less than, if not 0
		sentAway bool    // some block came back from the cluster
	}{
		{"one core, no cluster", WavefrontHybridInputs{W: 7, H: 5, Block: 2, LocalCores: 1, CellTime: tau}, 35 * tau, 0, false},
		{"wide here, no cluster", WavefrontHybridInputs{W: 7, H: 5, Block: 2, LocalCores: 5, CellTime: tau}, 11 * tau, 0, false},
		{"a dispatch that never ends", WavefrontHybridInputs{W: 7, H: 5, Block: 2, LocalCores: 1, Slots: 16, CellTime: tau, Dispatch: 1e9}, 35 * tau, 0, false},
		{"the crossover", WavefrontHybridInputs{W: 20, H: 20, Block: 4, LocalCores: 2, Slots: 16, CellTime: tau, Dispatch: 1, JobCost: 0.05}, 0, WavefrontMulticore(20, 20, 2, tau) * 0.95, true},
		{"costly cells", WavefrontHybridInputs{W: 20, H: 20, Block: 2, LocalCores: 2, Slots: 16, CellTime: 0.2, Dispatch: 1, JobCost: 0.05}, 0, WavefrontMulticore(20, 20, 2, 0.2) * 0.8, true},
		// Work Queue: a dispatch of microseconds (nothing to take back),
		// eight one-core workers, as in the placement bench's wq rows.
		{"work queue workers", WavefrontHybridInputs{W: 20, H: 20, Block: 1, LocalCores: 2, Slots: 8, CellTime: tau, Dispatch: 1e-5, JobCost: 0.03}, 0, WavefrontMulticore(20, 20, 2, tau) * 0.5, true},
		// Work Queue's workers connecting once, after Start: never, and
		// soon.
		{"workers that never connect", WavefrontHybridInputs{W: 7, H: 5, Block: 1, LocalCores: 1, Slots: 8, CellTime: tau, JobCost: 0.03, Start: 1e9}, 35 * tau, 0, false},
		{"workers that connect soon", WavefrontHybridInputs{W: 20, H: 20, Block: 1, LocalCores: 2, Slots: 8, CellTime: tau, JobCost: 0.03, Start: 0.03}, 0, WavefrontMulticore(20, 20, 2, tau) * 0.5, true},
		{"work queue, no worker connected", WavefrontHybridInputs{W: 7, H: 5, Block: 1, LocalCores: 5, Slots: 0, CellTime: tau, Dispatch: 1e-5, JobCost: 0.03}, 11 * tau, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := WavefrontHybrid(tc.in)
			if tc.want != 0 && math.Abs(run.Seconds-tc.want) > 1e-9 {
				t.Errorf("%.3f s, want %.3f s", run.Seconds, tc.want)
			}
			if tc.below != 0 && run.Seconds >= tc.below {
				t.Errorf("%.3f s, want below %.3f s", run.Seconds, tc.below)
			}
			if critical := float64(tc.in.W+tc.in.H-1) * tc.in.CellTime; run.Seconds < critical-1e-9 {
				t.Errorf("%.3f s, below the critical path %.3f s", run.Seconds, critical)
			}
			if got := run.CellsAway > 0; got != tc.sentAway {
				t.Errorf("%d cells computed away, want some: %v (%+v)", run.CellsAway, tc.sentAway, run.HybridCounts)
			}
			if run.CellsHere+run.CellsAway != tc.in.W*tc.in.H {
				t.Errorf("%d cells here and %d away, of %d", run.CellsHere, run.CellsAway, tc.in.W*tc.in.H)
			}
			alone := WavefrontHybrid(WavefrontHybridInputs{W: tc.in.W, H: tc.in.H, Block: tc.in.Block, LocalCores: tc.in.LocalCores, CellTime: tc.in.CellTime})
			if run.Seconds > alone.Seconds+1e-9 {
				t.Errorf("%.3f s with the cluster, %.3f s without", run.Seconds, alone.Seconds)
			}
		})
	}
}

// TestWavefrontHybridStart checks that a cluster joining once, after
// Start, is predicted as waiting for it once: no faster than joining at
// once, no slower than joining at once and then finishing Start later,
// and faster than the same wait charged to every block as its Dispatch.
func TestWavefrontHybridStart(t *testing.T) {
	const tau, cost, wait = 0.05, 0.03, 0.032
	for _, tc := range []struct {
		name         string
		w, block     int
		local, slots int
	}{
		{"12×12 of 1×1 blocks, eight workers", 12, 1, 2, 8},
		{"20×20 of 2×2 blocks, eight workers", 20, 2, 2, 8},
		{"20×20 of 1×1 blocks, one worker", 20, 1, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := WavefrontHybridInputs{W: tc.w, H: tc.w, Block: tc.block, LocalCores: tc.local, Slots: tc.slots, CellTime: tau, JobCost: cost}
			now := WavefrontHybrid(in).Seconds
			in.Start = wait
			joined := WavefrontHybrid(in).Seconds
			in.Start, in.Dispatch = 0, wait
			each := WavefrontHybrid(in).Seconds
			if joined < now-1e-9 || joined > now+wait+1e-9 {
				t.Errorf("joining after %.3f s: %.3f s, want %.3f to %.3f s", wait, joined, now, now+wait)
			}
			if joined >= each {
				t.Errorf("joining after %.3f s: %.3f s, want below %.3f s with that wait for every block", wait, joined, each)
			}
		})
	}
}
