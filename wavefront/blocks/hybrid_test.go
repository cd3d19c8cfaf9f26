package blocks_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/wavefront/blocks"
)

// TestHybridPolicy drives a Hybrid step by step on small regions and
// checks each decision: cells of blocks here first, an untouched block's
// cell only when there is none, blocks to the cluster only once their
// inputs are done and no core has started them, taken back on demand.
func TestHybridPolicy(t *testing.T) {
	// Steps: "cell x,y" (NextCell must hand out that cell), "cell -"
	// (none), "done x,y" (CellDone), "block b" / "block -" (NextBlock),
	// "back b" (TakeBack), "away b" (BlockDone), "fail x,y" (CellFailed),
	// "resize side" (Resize), "undone n".
	for _, tc := range []struct {
		name          string
		w, h, side    int
		done          []cell // finished by an earlier run
		steps         string
		here, sent    int
		back, awayCnt int
	}{
		{
			name: "one core alone takes every cell, its block's first", w: 3, h: 2, side: 2,
			steps: "cell 1,1; done 1,1; cell 2,1; done 2,1; cell 1,2; done 1,2; cell 2,2; done 2,2; cell 3,1; done 3,1; cell 3,2; done 3,2; cell -; block -; undone 0",
			here:  6,
		},
		{
			// With one core busy in block 0, blocks 1 and 2 get their
			// inputs and go to the cluster; with nothing left here, the
			// core takes back block 2, and block 3 follows block 1's
			// return.
			name: "blocks ready while the core is busy go to the cluster", w: 4, h: 4, side: 2,
			steps: "cell 1,1; block -; done 1,1; cell 2,1; done 2,1; cell 1,2; done 1,2; cell 2,2; block -; done 2,2; " +
				"block 1; block 2; block -; cell -; back 2; cell 1,3; done 1,3; cell 2,3; done 2,3; cell 1,4; done 1,4; cell 2,4; done 2,4; " +
				"cell -; block -; away 1; block 3; cell -; away 3; undone 0",
			here: 8, sent: 3, back: 1, awayCnt: 8,
		},
		{
			name: "a cell of a block here before one of an untouched block", w: 4, h: 2, side: 2,
			steps: "cell 1,1; done 1,1; cell 2,1; cell 1,2; done 2,1; cell 3,1; done 1,2; cell 2,2",
			here:  5,
		},
		{
			name: "a failed cell stops the cells after it", w: 2, h: 2, side: 1,
			steps: "cell 1,1; fail 1,1; cell -; block -; undone 4",
			here:  1,
		},
		{
			// Cut in 1×1 blocks while no cluster was known, then in 2×2
			// once one is: the block a core has touched stays here, the
			// others go to the cluster once their inputs are done.
			name: "blocks cut again keep the cells' states", w: 4, h: 4, side: 1,
			steps: "cell 1,1; done 1,1; cell 2,1; resize 2; cell 1,2; block -; done 2,1; done 1,2; block -; cell 2,2; block -; " +
				"done 2,2; block 1; block 2; block -; cell -; away 1; away 2; block 3; cell -; away 3; undone 0",
			here: 4, sent: 3, awayCnt: 12,
		},
		{
			name: "an earlier run's cells are skipped", w: 2, h: 2, side: 2, done: []cell{{1, 1}, {2, 1}},
			steps: "cell 1,2; done 1,2; cell 2,2; done 2,2; cell -; undone 0",
			here:  2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var isDone func(x, y int) bool
			if tc.done != nil {
				isDone = func(x, y int) bool {
					for _, c := range tc.done {
						if c == (cell{x, y}) {
							return true
						}
					}
					return false
				}
			}
			h, err := blocks.NewHybrid(blocks.Rect{X: 1, Y: 1, W: tc.w, H: tc.h}, tc.side, isDone)
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range strings.Split(tc.steps, "; ") {
				op, arg, _ := strings.Cut(step, " ")
				var x, y int
				if strings.Contains(arg, ",") {
					fmt.Sscanf(arg, "%d,%d", &x, &y)
				}
				var n int
				fmt.Sscanf(arg, "%d", &n)
				switch op {
				case "cell":
					gx, gy, ok := h.NextCell()
					got := "-"
					if ok {
						got = fmt.Sprintf("%d,%d", gx, gy)
					}
					if got != arg {
						t.Fatalf("step %d (%s): NextCell gave %s", i, step, got)
					}
				case "block":
					b, ok := h.NextBlock()
					got := "-"
					if ok {
						got = fmt.Sprint(b)
					}
					if got != arg {
						t.Fatalf("step %d (%s): NextBlock gave %s", i, step, got)
					}
				case "done":
					h.CellDone(x, y)
				case "fail":
					h.CellFailed(x, y)
				case "back":
					h.TakeBack(n)
				case "away":
					h.BlockDone(n)
				case "resize":
					if err := h.Resize(n); err != nil {
						t.Fatalf("step %d (%s): %v", i, step, err)
					}
				case "undone":
					if h.Undone() != n {
						t.Fatalf("step %d: %d cells undone, want %d", i, h.Undone(), n)
					}
				default:
					t.Fatalf("step %d: unknown %q", i, step)
				}
			}
			c := h.Counts()
			want := blocks.HybridCounts{CellsHere: tc.here, Sent: tc.sent, TakenBack: tc.back, CellsAway: tc.awayCnt}
			if strings.Contains(tc.steps, "fail") {
				want.FailedHere = 1
			}
			if c != want {
				t.Errorf("counts %+v, want %+v", c, want)
			}
		})
	}
}

// TestHybridAgainstSequential runs random regions with a random number of
// cores here and blocks away that come back in random order, some taken
// back, and checks that every cell is computed once, from inputs already
// computed, with the sequential recurrence's value.
func TestHybridAgainstSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := range 200 {
		w, hh, side := 1+rng.IntN(15), 1+rng.IntN(15), 1+rng.IntN(5)
		want := sequential(w, hh)
		got := map[cell]uint64{}
		for k, v := range want {
			if k.x == 0 || k.y == 0 {
				got[k] = v
			}
		}
		h, err := blocks.NewHybrid(blocks.Rect{X: 1, Y: 1, W: w, H: hh}, side, nil)
		if err != nil {
			t.Fatal(err)
		}
		compute := func(x, y int) {
			l, okl := got[cell{x - 1, y}]
			b, okb := got[cell{x, y - 1}]
			d, okd := got[cell{x - 1, y - 1}]
			if !okl || !okb || !okd {
				t.Fatalf("trial %d: cell (%d,%d) handed out before its inputs", trial, x, y)
			}
			if _, twice := got[cell{x, y}]; twice {
				t.Fatalf("trial %d: cell (%d,%d) computed twice", trial, x, y)
			}
			got[cell{x, y}] = f(l, b, d)
		}
		cores := 1 + rng.IntN(4)
		var running []cell
		var away []int
		// Half the trials cut the blocks again once, at a moment no
		// block is away.
		resize := trial%2 == 0
		for h.Undone() > 0 {
			if resize && len(away) == 0 && rng.IntN(3) == 0 {
				if err := h.Resize(1 + rng.IntN(5)); err != nil {
					t.Fatalf("trial %d: %v", trial, err)
				}
				resize = false
			}
			for len(running) < cores {
				x, y, ok := h.NextCell()
				if !ok {
					break
				}
				running = append(running, cell{x, y})
			}
			for {
				b, ok := h.NextBlock()
				if !ok {
					break
				}
				away = append(away, b)
			}
			switch {
			case len(away) > 0 && rng.IntN(4) == 0:
				i := rng.IntN(len(away))
				h.TakeBack(away[i])
				away = append(away[:i], away[i+1:]...)
			case len(away) > 0 && (len(running) == 0 || rng.IntN(2) == 0):
				i := rng.IntN(len(away))
				r := h.Block(away[i])
				// The cluster computes the block in order.
				for y := r.Y; y < r.Y+r.H; y++ {
					for x := r.X; x < r.X+r.W; x++ {
						compute(x, y)
					}
				}
				h.BlockDone(away[i])
				away = append(away[:i], away[i+1:]...)
			case len(running) > 0:
				i := rng.IntN(len(running))
				c := running[i]
				running = append(running[:i], running[i+1:]...)
				compute(c.x, c.y)
				h.CellDone(c.x, c.y)
			default:
				t.Fatalf("trial %d: %d cells undone and nothing runs", trial, h.Undone())
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("trial %d: cell %v = %d, want %d", trial, k, got[k], v)
			}
		}
	}
}

// TestHybridResizeRefused: blocks are not cut again while one is away,
// nor into blocks of no cell.
func TestHybridResizeRefused(t *testing.T) {
	h, err := blocks.NewHybrid(blocks.Rect{X: 1, Y: 1, W: 4, H: 4}, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Resize(0); err == nil {
		t.Error("Resize(0) accepted")
	}
	if b, ok := h.NextBlock(); !ok || b != 0 {
		t.Fatalf("NextBlock = %d, %v; want block 0", b, ok)
	}
	if err := h.Resize(1); err == nil {
		t.Error("Resize(1) with block 0 away accepted")
	}
	if h.Blocks() != 4 {
		t.Errorf("%d blocks after a refused Resize, want 4", h.Blocks())
	}
}
