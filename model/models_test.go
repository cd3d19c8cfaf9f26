package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestAllPairsClusterTime(t *testing.T) {
	in := AllPairsInputs{N: 4000, M: 4000, CellTime: 1, ItemBytes: 1 << 20, Bandwidth: 1000e6 / 8, Dispatch: 10, MaxJobTime: 7200}
	// By hand: 4000 jobs of 4000 cells on 400 hosts: 4000·(10+4000)/400 +
	// 10·400 + (8000·2^20/125e6)·log2(400).
	want := 4000*(10+4000.0)/400 + 4000 + (8000*float64(1<<20)/125e6)*math.Log2(400)
	if got := AllPairsClusterTime(in, 4000, 400); math.Abs(got-want) > 1e-6 {
		t.Errorf("T(4000, 400) = %f, want %f", got, want)
	}
	for _, bad := range [][2]int{{0, 1}, {1, 0}, {1, 401}, {4000 * 4000, 2}, {4000, 5000}} {
		if got := AllPairsClusterTime(in, bad[0], bad[1]); !math.IsInf(got, 1) {
			t.Errorf("T(%d, %d) = %f, want +Inf", bad[0], bad[1], got)
		}
	}
}

// TestChooseAllPairsAgainstBruteForce checks the one-dimensional search
// against an exhaustive search over every c and h of small problems.
func TestChooseAllPairsAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 100; trial++ {
		in := AllPairsInputs{
			N: 1 + rng.IntN(40), M: 1 + rng.IntN(40),
			CellTime: rng.Float64() * 5, ItemBytes: rng.Float64() * 1e7,
			Dispatch: rng.Float64() * 30, MaxHosts: 1 + rng.IntN(60), MaxJobTime: 10 + rng.Float64()*500,
			LocalCores: 1 + rng.IntN(8),
		}
		got := ChooseAllPairs(in)
		best := math.Inf(1)
		for c := 1; c <= in.N*in.M; c++ {
			for h := 1; h <= in.MaxHosts; h++ {
				best = math.Min(best, AllPairsClusterTime(in, c, h))
			}
		}
		if math.Abs(got.Cluster-best) > 1e-9*math.Max(1, best) {
			t.Fatalf("%+v: ChooseAllPairs found %f (c=%d h=%d), brute force %f", in, got.Cluster, got.JobCells, got.Hosts, best)
		}
		if got.Distribute != (got.Cluster < got.Local) {
			t.Fatalf("%+v: Distribute = %v with cluster %f, local %f", in, got.Distribute, got.Cluster, got.Local)
		}
	}
}

func TestChooseAllPairsExtremes(t *testing.T) {
	// Tiny fast problem: stay here. Huge slow problem: distribute.
	small := ChooseAllPairs(AllPairsInputs{N: 100, M: 100, CellTime: 1e-4, ItemBytes: 1e4, Dispatch: 10, LocalCores: 2})
	if small.Distribute {
		t.Errorf("small problem distributed: %v", small)
	}
	big := ChooseAllPairs(AllPairsInputs{N: 4000, M: 4000, CellTime: 1, ItemBytes: 1 << 20, Dispatch: 10, LocalCores: 2})
	if !big.Distribute || big.Hosts < 100 {
		t.Errorf("big problem: %v", big)
	}
}

// naiveMulticore simulates the lock-step schedule: each anti-diagonal in
// rounds of p cells.
func naiveMulticore(x, y, p int, tau float64) float64 {
	total := 0.0
	for k := 0; k <= x+y-2; k++ {
		cells := 0
		for i := 0; i < x; i++ {
			if j := k - i; j >= 0 && j < y {
				cells++
			}
		}
		total += math.Ceil(float64(cells)/float64(p)) * tau
	}
	return total
}

func TestWavefrontMulticore(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		x, y, p := 1+rng.IntN(30), 1+rng.IntN(30), 1+rng.IntN(6)
		if got, want := WavefrontMulticore(x, y, p, 0.5), naiveMulticore(x, y, p, 0.5); got != want {
			t.Fatalf("T_mc(%d, %d, %d) = %f, want %f", x, y, p, got, want)
		}
	}
	// With one core the time is every cell; with n cores, the 2n-1 diagonals.
	if got := WavefrontMulticore(10, 10, 1, 1); got != 100 {
		t.Errorf("T_mc(10, 1) = %f, want 100", got)
	}
	if got := WavefrontMulticore(10, 10, 10, 1); got != 19 {
		t.Errorf("T_mc(10, 10) = %f, want 19", got)
	}
}

func TestWavefrontBlocks(t *testing.T) {
	for _, tc := range []struct{ n, b, cpn int }{{1, 1, 1}, {7, 3, 1}, {20, 4, 2}, {10, 10, 4}, {5, 8, 1}} {
		rules := WavefrontBlocks(tc.n, tc.b, tc.cpn, 1)
		nb := (tc.n + tc.b - 1) / tc.b
		if len(rules) != nb*nb {
			t.Fatalf("n=%d b=%d: %d blocks, want %d", tc.n, tc.b, len(rules), nb*nb)
		}
		cells := 0.0
		for id, r := range rules {
			i, j := id/nb, id%nb
			rows, cols := min(tc.b, tc.n-i*tc.b), min(tc.b, tc.n-j*tc.b)
			cells += float64(rows * cols)
			if want := WavefrontMulticore(rows, cols, tc.cpn, 1); r.Seconds != want {
				t.Errorf("n=%d b=%d block (%d,%d): %v s, want %v", tc.n, tc.b, i, j, r.Seconds, want)
			}
			if want := min(i, 1) + min(j, 1); len(r.Parents) != want {
				t.Errorf("n=%d b=%d block (%d,%d): parents %v", tc.n, tc.b, i, j, r.Parents)
			}
			for _, p := range r.Parents {
				if p >= id {
					t.Errorf("n=%d b=%d block %d: parent %d not first", tc.n, tc.b, id, p)
				}
			}
		}
		if cells != float64(tc.n*tc.n) {
			t.Errorf("n=%d b=%d: %v cells in the blocks", tc.n, tc.b, cells)
		}
		// One slot, no dispatch: the blocks take the cells' time.
		if got, want := Makespan(rules, FlowPlaces{LocalSlots: 1}), WavefrontMulticore(tc.n, tc.n, 1, 1); tc.cpn == 1 && got != want {
			t.Errorf("n=%d b=%d: makespan on one core %v, want %v", tc.n, tc.b, got, want)
		}
	}
}

func TestWavefrontDistributedTable(t *testing.T) {
	// Values of the model for N = 1000, τ = 1 s, one core per node and
	// 1000 nodes, from the reference digest's table.
	tests := []struct {
		b     int
		delta float64
		want  float64
	}{
		{1, 0, 1999}, {2, 0, 3996}, {5, 1, 10374}, {1, 30, 61969}, {5, 30, 21945},
		// 167 blocks of 6 (the last one partial): 333 rounds of 36+30 s.
		// CCTools truncates 1000/6 to 166 blocks, leaving cells out, and
		// so prefers 6; counting every cell, 5 is best.
		{6, 30, 333 * 66},
	}
	if c := ChooseWavefront(1000, 2, 1000, 1, 1, 30); c.Block != 5 || c.Cluster != 21945 {
		t.Errorf("best for δ=30: block %d at %f s, want 5 at 21945", c.Block, c.Cluster)
	}
	for _, tt := range tests {
		if got := WavefrontDistributed(1000, tt.b, 1000, 1, 1, tt.delta); got != tt.want {
			t.Errorf("T_dist(B=%d, δ=%v) = %f, want %f", tt.b, tt.delta, got, tt.want)
		}
	}
}

func TestChooseWavefront(t *testing.T) {
	// Seconds-long cells on a big problem: distribute; millisecond cells:
	// stay on this machine.
	if c := ChooseWavefront(500, 2, 100, 2, 7, 5); !c.Distribute {
		t.Errorf("500×500 at 7 s per cell: %v", c)
	}
	if c := ChooseWavefront(500, 2, 100, 2, 0.001, 5); c.Distribute {
		t.Errorf("500×500 at 1 ms per cell: %v", c)
	}
}
