package blocks_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/rightsize/rightsize/wavefront/blocks"
)

type cell struct{ x, y int }

// f is a cheap recurrence whose value depends on the order of its inputs,
// so that a cell computed from the wrong neighbours shows.
func f(left, below, diag uint64) uint64 {
	h := fnv.New64a()
	fmt.Fprint(h, left, ",", below, ",", diag)
	return h.Sum64()
}

// sequential computes the recurrence the plain way: boundary R[i,0] = i,
// R[0,j] = 1000+j.
func sequential(w, h int) map[cell]uint64 {
	r := map[cell]uint64{}
	for i := 0; i <= w; i++ {
		r[cell{i, 0}] = uint64(i)
	}
	for j := 0; j <= h; j++ {
		r[cell{0, j}] = uint64(1000 + j)
	}
	for y := 1; y <= h; y++ {
		for x := 1; x <= w; x++ {
			r[cell{x, y}] = f(r[cell{x - 1, y}], r[cell{x, y - 1}], r[cell{x - 1, y - 1}])
		}
	}
	return r
}

// TestSchedulerAgainstSequential drives the scheduler with blocks finishing
// in random order, from random checkpoints, with random failures, and checks
// that every block runs only once its inputs exist, that the values equal
// the sequential recurrence, and that exactly the blocks downstream of a
// failure are left undone.
func TestSchedulerAgainstSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	trials := 400
	if testing.Short() {
		trials = 100
	}
	for trial := range trials {
		w, h := 1+rng.IntN(25), 1+rng.IntN(25)
		bw, bh := 1+rng.IntN(6), 1+rng.IntN(6)
		want := sequential(w, h)
		region := blocks.Rect{X: 1, Y: 1, W: w, H: h}

		// A checkpoint: a staircase of finished cells, as a crashed run leaves.
		got := map[cell]uint64{}
		for k, v := range want {
			if k.x == 0 || k.y == 0 {
				got[k] = v
			}
		}
		if rng.IntN(2) == 0 {
			stair := 0
			for y := h; y >= 1; y-- {
				stair = max(stair, rng.IntN(w+1))
				for x := 1; x <= stair; x++ {
					got[cell{x, y}] = want[cell{x, y}]
				}
			}
		}
		checkpoint := len(got)
		isDone := func(x, y int) bool { _, ok := got[cell{x, y}]; return ok }
		s, err := blocks.NewScheduler(region, bw, bh, isDone)
		if err != nil {
			t.Fatal(err)
		}
		failRate := 0.0
		if rng.IntN(3) == 0 {
			failRate = 0.05
		}
		var running []blocks.Rect
		var failedBlocks []blocks.Rect
		for !s.Finished() {
			// Take a random number of ready blocks, then finish a random one.
			for n := rng.IntN(4); n >= 0; n-- {
				b, ok := s.Next()
				if !ok {
					break
				}
				running = append(running, b)
			}
			if len(running) == 0 {
				t.Fatalf("trial %d: nothing running and nothing ready, but not finished: %+v", trial, s.Counts())
			}
			k := rng.IntN(len(running))
			b := running[k]
			running = append(running[:k], running[k+1:]...)
			if rng.Float64() < failRate {
				s.Failed(b)
				failedBlocks = append(failedBlocks, b)
				continue
			}
			for y := b.Y; y < b.Y+b.H; y++ {
				for x := b.X; x < b.X+b.W; x++ {
					if isDone(x, y) {
						continue
					}
					l, ok1 := got[cell{x - 1, y}]
					d, ok2 := got[cell{x, y - 1}]
					g, ok3 := got[cell{x - 1, y - 1}]
					if !ok1 || !ok2 || !ok3 {
						t.Fatalf("trial %d (%dx%d in %dx%d): block %v ran before the inputs of (%d,%d) existed", trial, w, h, bw, bh, b, x, y)
					}
					got[cell{x, y}] = f(l, d, g)
				}
			}
			s.Done(b)
			s.Done(b) // a duplicate report changes nothing
		}
		c := s.Counts()
		if c.Running != 0 || c.Ready != 0 || c.Done+c.Failed+c.Waiting != s.Blocks() {
			t.Fatalf("trial %d: counts %+v of %d blocks", trial, c, s.Blocks())
		}
		// Every cell not downstream of a failed block is computed, right.
		for y := 1; y <= h; y++ {
			for x := 1; x <= w; x++ {
				v, ok := got[cell{x, y}]
				blocked := false
				for _, fb := range failedBlocks {
					if x >= fb.X && y >= fb.Y {
						blocked = true
					}
				}
				switch {
				case ok && v != want[cell{x, y}]:
					t.Fatalf("trial %d: R[%d,%d] = %d, want %d", trial, x, y, v, want[cell{x, y}])
				case !ok && !blocked:
					t.Fatalf("trial %d: R[%d,%d] was never computed (failed blocks %v)", trial, x, y, failedBlocks)
				}
			}
		}
		if len(failedBlocks) == 0 && (c.Done != s.Blocks() || len(got) != (w+1)*(h+1)) {
			t.Fatalf("trial %d: %d of %d blocks done, %d cells (checkpoint %d)", trial, c.Done, s.Blocks(), len(got), checkpoint)
		}
	}
}

// idealTime is seed 000's multicore model in units of τ: Σ over the
// anti-diagonals of ⌈s_k/P⌉.
func idealTime(w, h, p int) int {
	total := 0
	for k := 2; k <= w+h; k++ {
		s := min(k-1, w, h, w+h+1-k)
		total += (s + p - 1) / p
	}
	return total
}

// TestSchedulerMeetsModel runs unit-time cells on P simulated cores and
// checks that the scheduler's makespan never exceeds the model's lock-step
// time: releasing cells as their inputs finish can only help.
func TestSchedulerMeetsModel(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4, 7} {
		for _, size := range [][2]int{{1, 1}, {2, 2}, {3, 3}, {9, 9}, {30, 30}, {40, 7}, {5, 33}} {
			w, h := size[0], size[1]
			s, err := blocks.NewScheduler(blocks.Rect{X: 1, Y: 1, W: w, H: h}, 1, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			steps := 0
			for !s.Finished() {
				var batch []blocks.Rect
				for len(batch) < p {
					b, ok := s.Next()
					if !ok {
						break
					}
					batch = append(batch, b)
				}
				for _, b := range batch {
					s.Done(b)
				}
				steps++
			}
			if ideal := idealTime(w, h, p); steps > ideal {
				t.Errorf("%dx%d on %d cores: %d steps, model says %d", w, h, p, steps, ideal)
			}
		}
	}
}

func TestNewSchedulerErrors(t *testing.T) {
	for _, tt := range []struct {
		r      blocks.Rect
		bw, bh int
	}{
		{blocks.Rect{X: 0, Y: 1, W: 3, H: 3}, 1, 1},
		{blocks.Rect{X: 1, Y: 1, W: 0, H: 3}, 1, 1},
		{blocks.Rect{X: 1, Y: 1, W: 3, H: 3}, 0, 1},
	} {
		if _, err := blocks.NewScheduler(tt.r, tt.bw, tt.bh, nil); err == nil {
			t.Errorf("NewScheduler(%v, %d, %d) succeeded", tt.r, tt.bw, tt.bh)
		}
	}
}

func ExampleScheduler() {
	// A 4×4 sub-problem at (15, 20), in blocks of 2×2, on one core.
	s, _ := blocks.NewScheduler(blocks.Rect{X: 15, Y: 20, W: 4, H: 4}, 2, 2, nil)
	for !s.Finished() {
		b, _ := s.Next()
		fmt.Println("run", b)
		s.Done(b)
	}
	// Output:
	// run x 15…16, y 20…21
	// run x 17…18, y 20…21
	// run x 15…16, y 22…23
	// run x 17…18, y 22…23
}
