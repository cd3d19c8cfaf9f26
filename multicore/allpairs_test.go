package multicore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/multicore"
)

func TestPlanCoversRegionOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 300; trial++ {
		n, m := 1+rng.IntN(30), 1+rng.IntN(30)
		symmetric := rng.IntN(3) == 0
		if symmetric {
			m = n
		}
		r := multicore.Region{X: rng.IntN(n), Y: rng.IntN(m)}
		r.W = rng.IntN(n - r.X + 1)
		r.H = rng.IntN(m - r.Y + 1)
		p := multicore.Plan{Region: r, BlockSize: rng.IntN(n + 2), Symmetric: symmetric, Cores: 1 + rng.IntN(8)}
		if rng.IntN(2) == 0 {
			p.BSizes = make([]int64, m)
			for j := range p.BSizes {
				p.BSizes[j] = int64(rng.IntN(100))
			}
			p.CacheBytes = int64(rng.IntN(300))
		}

		seen := map[[2]int]int{}
		next := r.X
		for b := range p.Blocks() {
			if b.I0 != next || b.I1 <= b.I0 || (p.BlockSize > 0 && b.I1-b.I0 > p.BlockSize) {
				t.Fatalf("%+v: bad block %+v after row %d", p, b, next)
			}
			next = b.I1
			for _, u := range p.Units(b) {
				if u.I0 < b.I0 || u.I1 > b.I1 || u.I0 >= u.I1 || u.J0 >= u.J1 || u.J0 < r.Y || u.J1 > r.Y+r.H {
					t.Fatalf("%+v: unit %+v outside block %+v", p, u, b)
				}
				var bytes int64
				for j := u.J0; j < u.J1 && p.BSizes != nil; j++ {
					bytes += p.BSizes[j]
				}
				if u.J1-u.J0 > 1 && bytes > p.CacheBytes {
					t.Fatalf("%+v: unit %+v holds %d bytes of B, more than %d", p, u, bytes, p.CacheBytes)
				}
				for i := u.I0; i < u.I1; i++ {
					for j := u.J0; j < u.J1; j++ {
						if !symmetric || i <= j {
							seen[[2]int{i, j}]++
						}
					}
				}
			}
		}
		want := 0
		for i := r.X; i < r.X+r.W; i++ {
			for j := r.Y; j < r.Y+r.H; j++ {
				if symmetric && i > j {
					continue
				}
				want++
				if seen[[2]int{i, j}] != 1 {
					t.Fatalf("%+v: cell (%d,%d) computed %d times", p, i, j, seen[[2]int{i, j}])
				}
			}
		}
		if len(seen) != want || r.Cells(symmetric) != int64(want) {
			t.Fatalf("%+v: %d cells planned, Cells() = %d, want %d", p, len(seen), r.Cells(symmetric), want)
		}
	}
}

// randomFiles writes n files of random lengths (some empty) into dir.
func randomFiles(t *testing.T, rng *rand.Rand, dir string, n int) []string {
	t.Helper()
	paths := make([]string, n)
	for i := range paths {
		data := make([]byte, rng.IntN(4000))
		for k := range data {
			data[k] = byte(rng.IntN(3))
		}
		paths[i] = filepath.Join(dir, fmt.Sprintf("f%03d", i))
		if err := os.WriteFile(paths[i], data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// naive computes the expected matrix with a plain double loop.
func naive(t *testing.T, a, b []string, symmetric bool) map[[2]int]string {
	want := map[[2]int]string{}
	for i := range a {
		for j := range b {
			if symmetric && i > j {
				continue
			}
			x, _ := os.ReadFile(a[i])
			y, _ := os.ReadFile(b[j])
			v, _ := funcs.ByteDiff(x, y)
			want[[2]int{i, j}] = string(v)
		}
	}
	return want
}

func run(t *testing.T, ap *multicore.AllPairs) map[[2]int]string {
	t.Helper()
	got := map[[2]int]string{}
	ap.Results = func(rs []multicore.CellResult) {
		for _, r := range rs {
			if r.Err != nil {
				t.Errorf("cell (%d,%d): %v", r.I, r.J, r.Err)
			}
			k := [2]int{r.I, r.J}
			if _, dup := got[k]; dup {
				t.Errorf("cell (%d,%d) delivered twice", r.I, r.J)
			}
			got[k] = string(r.Value)
		}
	}
	if err := ap.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestAllPairsAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	a := randomFiles(t, rng, dir, 13)
	b := randomFiles(t, rng, t.TempDir(), 7)
	reg := funcs.NewRegistry()
	prog := testutil.BuildProgram(t, "testdata/bytediff_prog.c")
	lib := testutil.BuildSharedLib(t, "../funcs/testdata/bytediff.c")

	for _, spec := range []string{"builtin:bytediff", lib, prog} {
		f, err := reg.OpenPair(spec, funcs.Options{})
		if errors.Is(err, funcs.ErrNoCgo) {
			t.Logf("skipping %s: %v", spec, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name      string
			a, b      []string
			symmetric bool
			block     int
			cores     int
			cache     int64
		}{
			{"one block", a, b, false, 0, 2, 0},
			{"one column per unit", a, b, false, 3, 2, -1},
			{"tiles of a few columns", a, b, false, 4, 3, 6000},
			{"blocks of 1, one core", a, b, false, 1, 1, 0},
			{"symmetric", a, a, true, 5, 2, 0},
			{"symmetric tiles", a, a, true, 5, 2, 6000},
		} {
			t.Run(filepath.Base(spec)+"/"+tc.name, func(t *testing.T) {
				got := run(t, &multicore.AllPairs{A: tc.a, B: tc.b, Func: f, Cores: tc.cores, BlockSize: tc.block, Symmetric: tc.symmetric, CacheBytes: tc.cache})
				want := naive(t, tc.a, tc.b, tc.symmetric)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("engine and naive loop differ:\n got %v\nwant %v", got, want)
				}
			})
		}
		f.Close()
	}
}

// TestAllPairsBlocks: a function that computes blocks of cells is given
// up to 4 rows at a time, with rows big enough to be mapped and small ones
// read, and every cell comes out once with the value of a call per cell,
// symmetric or not, in tiles or not.
func TestAllPairsBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	dir := t.TempDir()
	var items []string
	for i, size := range []int{300 << 10, 5000, 0, 300<<10 + 7, 1, 270 << 10, 40000, 300 << 10, 9} {
		data := make([]byte, size)
		for k := range data {
			data[k] = byte(rng.IntN(3))
		}
		items = append(items, filepath.Join(dir, fmt.Sprintf("f%d", i)))
		if err := os.WriteFile(items[i], data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var blocks, maxRows int
	reg := funcs.NewRegistry()
	reg.RegisterPairBlock("counted", funcs.ByteDiff, func(a, b [][]byte) ([][]byte, error) {
		mu.Lock()
		blocks++
		maxRows = max(maxRows, len(a))
		mu.Unlock()
		return funcs.ByteDiffBlock(a, b)
	})
	f, err := reg.OpenPair("builtin:counted", funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		name      string
		a, b      []string
		symmetric bool
		cache     int64
	}{
		{"one tile", items, items[:5], false, 0},
		{"a column per tile", items, items[:5], false, -1},
		{"symmetric", items, items, true, 0},
		{"symmetric tiles", items, items, true, 700 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blocks, maxRows = 0, 0
			got := run(t, &multicore.AllPairs{A: tc.a, B: tc.b, Func: f, Cores: 2, Symmetric: tc.symmetric, CacheBytes: tc.cache})
			if want := naive(t, tc.a, tc.b, tc.symmetric); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("engine and naive loop differ:\n got %v\nwant %v", got, want)
			}
			if blocks == 0 || maxRows < 2 || maxRows > 4 {
				t.Errorf("%d block calls of at most %d rows; want some, of 2 to 4 rows", blocks, maxRows)
			}
		})
	}
}

// TestAllPairsDone: the cells Done reports are not computed, and every
// other cell is, once.
func TestAllPairsDone(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	a := randomFiles(t, rng, t.TempDir(), 9)
	f, _ := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	defer f.Close()
	for _, symmetric := range []bool{false, true} {
		want := naive(t, a, a, symmetric)
		done := func(i, j int) bool { return (i*7+j*3)%4 == 0 || i < 3 } // the first block, and more
		for k := range want {
			if done(k[0], k[1]) {
				delete(want, k)
			}
		}
		got := run(t, &multicore.AllPairs{A: a, B: a, Func: f, Cores: 2, BlockSize: 3, Symmetric: symmetric, Done: done})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("symmetric=%v: with cells done, computed\n%v\nwant\n%v", symmetric, got, want)
		}
	}
}

func TestAllPairsFailingCells(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, name := range []string{"ok1", "bad", "ok2"} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(name), 0o644)
		files = append(files, p)
	}
	prog := testutil.WriteScript(t, t.TempDir(), "f", `case "$1$2" in *bad*) echo "cannot compare $1" >&2; exit 4;; esac; echo ok`)
	f, err := funcs.NewRegistry().OpenPair(prog, funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ok, failed int
	ap := &multicore.AllPairs{A: files, B: files, Func: f, Cores: 2, Results: func(rs []multicore.CellResult) {
		for _, r := range rs {
			var ce *funcs.CallError
			switch {
			case r.Err == nil && string(r.Value) == "ok":
				ok++
			case errors.As(r.Err, &ce) && ce.ExitCode == 4 && strings.Contains(string(ce.Stderr), "cannot compare"):
				failed++
			default:
				t.Errorf("cell (%d,%d) = %q, %v", r.I, r.J, r.Value, r.Err)
			}
		}
	}}
	if err := ap.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok != 4 || failed != 5 {
		t.Errorf("ok %d, failed %d; want 4 and 5", ok, failed)
	}
}

// TestAllPairsUnreadableItems: an in-memory function's cells whose item
// cannot be read fail with the read's error, naming the file; the others are
// computed; and an item that only done cells need makes no cell fail.
func TestAllPairsUnreadableItems(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	dir := t.TempDir()
	a := randomFiles(t, rng, dir, 6)
	b := randomFiles(t, rng, t.TempDir(), 5)
	missingA, missingB, doneOnly := filepath.Join(dir, "gone-a"), filepath.Join(dir, "gone-b"), filepath.Join(dir, "gone-done")
	a[2], b[3], a[4] = missingA, missingB, doneOnly
	f, _ := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	defer f.Close()
	for _, cache := range []int64{0, -1} {
		var ok, failed int
		ap := &multicore.AllPairs{A: a, B: b, Func: f, Cores: 2, BlockSize: 2, CacheBytes: cache,
			Done: func(i, j int) bool { return i == 4 },
			Results: func(rs []multicore.CellResult) {
				for _, r := range rs {
					var pe *os.PathError
					switch {
					case r.I == 4:
						t.Errorf("done cell (%d,%d) computed", r.I, r.J)
					case r.I == 2 || r.J == 3:
						want := missingA
						if r.I != 2 {
							want = missingB
						}
						if !errors.As(r.Err, &pe) || pe.Path != want {
							t.Errorf("cell (%d,%d): %v, want the read error of %s", r.I, r.J, r.Err, want)
						}
						failed++
					case r.Err != nil:
						t.Errorf("cell (%d,%d): %v", r.I, r.J, r.Err)
					default:
						ok++
					}
				}
			}}
		if err := ap.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		// 5 rows not done × 5 columns: row 2 and column 3 fail.
		if ok != 16 || failed != 9 {
			t.Errorf("cache %d: %d cells ok, %d failed; want 16 and 9", cache, ok, failed)
		}
	}
}

func TestAllPairsCancel(t *testing.T) {
	dir := t.TempDir()
	files := randomFiles(t, rand.New(rand.NewPCG(1, 1)), dir, 20)
	prog := testutil.WriteScript(t, t.TempDir(), "f", "sleep 0.05; echo 1")
	f, _ := funcs.NewRegistry().OpenPair(prog, funcs.Options{})
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := 0
	ap := &multicore.AllPairs{A: files, B: files, Func: f, Cores: 2, Results: func(rs []multicore.CellResult) {
		for _, r := range rs {
			if r.Err != nil {
				t.Errorf("cancelled call delivered as a result: %v", r.Err)
			}
			done++
		}
	}}
	time.AfterFunc(300*time.Millisecond, cancel)
	if err := ap.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if done == 0 || done >= 400 {
		t.Errorf("%d cells done before the cancel, want some but not all", done)
	}
}

// TestAllPairsCancelBlock: a block call during which the run is cancelled
// delivers none of its cells, and Run returns the cancellation; the blocks
// before it are delivered.
func TestAllPairsCancelBlock(t *testing.T) {
	files := randomFiles(t, rand.New(rand.NewPCG(2, 2)), t.TempDir(), 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	reg := funcs.NewRegistry()
	reg.RegisterPairBlock("cancelling", funcs.ByteDiff, func(a, b [][]byte) ([][]byte, error) {
		if calls++; calls == 2 {
			cancel()
		}
		return funcs.ByteDiffBlock(a, b)
	})
	f, _ := reg.OpenPair("builtin:cancelling", funcs.Options{})
	got := map[[2]int]bool{}
	ap := &multicore.AllPairs{A: files, B: files[:3], Func: f, Cores: 1, Results: func(rs []multicore.CellResult) {
		for _, r := range rs {
			got[[2]int{r.I, r.J}] = true
		}
	}}
	if err := ap.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	// One core: the first unit is rows 0-3, one block of 4×3 cells; the
	// second call is cancelled.
	if len(got) != 12 || !got[[2]int{3, 2}] || calls != 2 {
		t.Errorf("%d block calls delivered %d cells (%v); want the first block's 12", calls, len(got), got)
	}
}

func TestAllPairsBadRegion(t *testing.T) {
	f, _ := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	ap := &multicore.AllPairs{A: []string{"a"}, B: []string{"b"}, Func: f, Region: multicore.Region{X: 0, Y: 0, W: 2, H: 1}, Results: func([]multicore.CellResult) {}}
	if err := ap.Run(context.Background()); err == nil {
		t.Error("Run with a region outside the matrix succeeded")
	}
}

// TestAllPairsTimed: the units Timed reports cover the region's cells once.
func TestAllPairsTimed(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	a := randomFiles(t, rng, t.TempDir(), 9)
	f, _ := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	defer f.Close()
	var mu sync.Mutex
	cells := 0
	run(t, &multicore.AllPairs{A: a, B: a, Func: f, Cores: 2, BlockSize: 4, Timed: func(u multicore.Unit, started, ended time.Time) {
		mu.Lock()
		defer mu.Unlock()
		cells += (u.I1 - u.I0) * (u.J1 - u.J0)
		if ended.Before(started) {
			t.Errorf("unit %+v ended before it started", u)
		}
	}})
	if cells != 81 {
		t.Errorf("timed units of %d cells, want 81", cells)
	}
}
