package multicore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/wavefront"
)

type xy struct{ x, y int }

// memOut collects the cells a run writes and notices a cell written twice.
type memOut struct {
	mu    sync.Mutex
	cells map[xy][]byte
	twice []xy
	fail  int // fail the append after this many cells; 0 never
}

func newMemOut() *memOut { return &memOut{cells: map[xy][]byte{}} }

func (m *memOut) Append(x, y int, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail > 0 && len(m.cells) >= m.fail {
		return errors.New("disk full")
	}
	if _, ok := m.cells[xy{x, y}]; ok {
		m.twice = append(m.twice, xy{x, y})
	}
	m.cells[xy{x, y}] = bytes.Clone(v)
	return nil
}

// hashCell is an order-sensitive Go cell: swapping two inputs changes it.
func hashCell(l, b, d []byte) ([]byte, error) {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s|%s|%s", l, b, d)
	return []byte(strconv.FormatUint(uint64(h.Sum32()), 16)), nil
}

// boundaryValue is R[x,0] and R[0,y] for the tests.
func boundaryValue(x, y int) []byte { return []byte(fmt.Sprintf("%d", 3*x+7*y)) }

// reference computes w×h cells sequentially by calling cell directly.
func reference(t *testing.T, cell funcs.Cell, w, h int) map[xy][]byte {
	t.Helper()
	r := map[xy][]byte{}
	for i := 0; i <= w; i++ {
		r[xy{i, 0}] = boundaryValue(i, 0)
	}
	for j := 0; j <= h; j++ {
		r[xy{0, j}] = boundaryValue(0, j)
	}
	for y := 1; y <= h; y++ {
		for x := 1; x <= w; x++ {
			v, err := cell.Call(context.Background(), funcs.Input{Data: r[xy{x - 1, y}]}, funcs.Input{Data: r[xy{x, y - 1}]}, funcs.Input{Data: r[xy{x - 1, y - 1}]})
			if err != nil {
				t.Fatalf("reference (%d,%d): %v", x, y, err)
			}
			r[xy{x, y}] = v
		}
	}
	return r
}

// from returns a Value function reading the given cells.
func from(cells map[xy][]byte) func(x, y int) (funcs.Input, error) {
	return func(x, y int) (funcs.Input, error) {
		v, ok := cells[xy{x, y}]
		if !ok {
			return funcs.Input{}, fmt.Errorf("cell (%d,%d) is missing", x, y)
		}
		return funcs.Input{Data: v}, nil
	}
}

func openCells(t *testing.T) map[string]funcs.Cell {
	t.Helper()
	reg := funcs.NewRegistry()
	reg.RegisterCell("hash", hashCell)
	prog := testutil.WriteScript(t, t.TempDir(), "cat3", `printf '%s.%s.%s' "$(cat "$1")" "$(cat "$2")" "$(cat "$3")" | cksum | cut -d' ' -f1`)
	specs := map[string]string{
		"go":      "builtin:hash",
		"program": prog,
		"so":      testutil.BuildSharedLib(t, "../funcs/testdata/sum.c"),
	}
	cells := map[string]funcs.Cell{}
	for name, spec := range specs {
		c, err := reg.OpenCell(spec, funcs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cells[name] = c
	}
	return cells
}

func TestWavefrontAgainstSequential(t *testing.T) {
	cells := openCells(t)
	tests := []struct {
		kind   string
		region wavefront.Rect
		block  int
		cores  int
		done   func(x, y int) bool
		spill  bool // the caller's SpillDir, not a directory in TempDir
	}{
		{kind: "go", region: wavefront.Rect{X: 1, Y: 1, W: 30, H: 20}, cores: 3},
		{kind: "go", region: wavefront.Rect{X: 1, Y: 1, W: 30, H: 20}, block: 7, cores: 2},
		{kind: "go", region: wavefront.Rect{X: 1, Y: 1, W: 1, H: 40}, cores: 4},
		{kind: "go", region: wavefront.Rect{X: 4, Y: 6, W: 9, H: 5}, block: 2, cores: 2},
		{kind: "go", region: wavefront.Rect{X: 1, Y: 1, W: 25, H: 25}, cores: 2, done: func(x, y int) bool { return x+y < 20 }},
		{kind: "go", region: wavefront.Rect{X: 1, Y: 1, W: 25, H: 25}, block: 4, cores: 2, done: func(x, y int) bool { return x < 10 || y < 3 }},
		{kind: "program", region: wavefront.Rect{X: 1, Y: 1, W: 7, H: 6}, cores: 2},
		{kind: "program", region: wavefront.Rect{X: 3, Y: 2, W: 4, H: 4}, block: 2, cores: 2, done: func(x, y int) bool { return x == 3 }},
		{kind: "program", region: wavefront.Rect{X: 1, Y: 1, W: 5, H: 4}, cores: 2, spill: true},
		{kind: "so", region: wavefront.Rect{X: 1, Y: 1, W: 20, H: 20}, cores: 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v block %d spill %v", tt.kind, tt.region, tt.block, tt.spill), func(t *testing.T) {
			cell := cells[tt.kind]
			lx, ly := tt.region.Last()
			want := reference(t, cell, lx, ly)
			known := map[xy][]byte{}
			for k, v := range want {
				if !tt.region.Contains(k.x, k.y) || (tt.done != nil && tt.done(k.x, k.y)) {
					known[k] = v
				}
			}
			out := newMemOut()
			tmp, spill := t.TempDir(), ""
			if tt.spill {
				spill = t.TempDir()
			}
			var outside atomic.Int32 // inputs given as files elsewhere than spill
			if tt.spill {
				cell = spyCell{cell, func(in funcs.Input) {
					if filepath.Dir(in.Path) != spill {
						outside.Add(1)
					}
				}}
			}
			states := wavefront.NewStateGrid(tt.region)
			res, err := multicore.RunWavefront(context.Background(), multicore.Wavefront{
				Cell: cell, Region: tt.region, Value: from(known), Done: tt.done, Out: out,
				Cores: tt.cores, Block: tt.block, TempDir: tmp, SpillDir: spill, States: states,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Computed+res.Skipped != tt.region.Cells() || res.Computed != len(out.cells) || len(out.twice) > 0 {
				t.Fatalf("result %+v, %d cells written, written twice: %v", res, len(out.cells), out.twice)
			}
			for y := tt.region.Y; y < tt.region.Y+tt.region.H; y++ {
				for x := tt.region.X; x < tt.region.X+tt.region.W; x++ {
					got, computed := out.cells[xy{x, y}]
					if skip := tt.done != nil && tt.done(x, y); skip == computed {
						t.Fatalf("cell (%d,%d): computed %v, done before %v", x, y, computed, skip)
					}
					if computed && !bytes.Equal(got, want[xy{x, y}]) {
						t.Fatalf("R[%d,%d] = %q, want %q", x, y, got, want[xy{x, y}])
					}
					if s := states.At(x, y); s != wavefront.Complete {
						t.Fatalf("state of (%d,%d) = %v, want Complete", x, y, s)
					}
				}
			}
			if n := outside.Load(); n > 0 {
				t.Errorf("%d inputs were not files in the spill directory", n)
			}
			for _, dir := range []string{tmp, spill} {
				if entries, _ := os.ReadDir(dir); dir != "" && len(entries) != 0 {
					t.Errorf("temporary files left behind in %s: %v", dir, entries)
				}
			}
		})
	}
}

// spyCell shows each input of every call to see.
type spyCell struct {
	funcs.Cell
	see func(funcs.Input)
}

func (c spyCell) Call(ctx context.Context, x, y, d funcs.Input) ([]byte, error) {
	for _, in := range []funcs.Input{x, y, d} {
		c.see(in)
	}
	return c.Cell.Call(ctx, x, y, d)
}

func TestWavefrontFiles(t *testing.T) {
	cell := openCells(t)["program"]
	dir, err := wavefront.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := reference(t, cell, 4, 3)
	out := newMemOut()
	region := wavefront.Rect{X: 1, Y: 1, W: 4, H: 3}
	if _, err := multicore.RunWavefront(context.Background(), multicore.Wavefront{
		Cell: cell, Region: region, Value: from(want), Out: out, Files: dir, Cores: 2,
	}); err != nil {
		t.Fatal(err)
	}
	for y := 1; y <= 3; y++ {
		for x := 1; x <= 4; x++ {
			data, err := os.ReadFile(dir.CellPath(x, y))
			if err != nil || !bytes.Equal(data, want[xy{x, y}]) {
				t.Errorf("R.%d.%d = %q, %v; want %q", x, y, data, err, want[xy{x, y}])
			}
		}
	}
}

func TestWavefrontFailure(t *testing.T) {
	reg := funcs.NewRegistry()
	reg.RegisterCell("picky", func(l, b, d []byte) ([]byte, error) {
		if string(b) == "poison" {
			return nil, errors.New("cannot digest poison")
		}
		return hashCell(l, b, d)
	})
	goCell, _ := reg.OpenCell("builtin:picky", funcs.Options{})
	prog := testutil.WriteScript(t, t.TempDir(), "picky", `if grep -q poison "$2"; then echo "bad input in $2" >&2; exit 3; fi; cat "$1"`)
	progCell, err := reg.OpenCell(prog, funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer progCell.Close()
	for _, cell := range []funcs.Cell{goCell, progCell} {
		t.Run(cell.Info().Kind.String(), func(t *testing.T) {
			// R[5,0] is poison: cell (5,1) fails, and with it every cell x ≥ 5.
			known := map[xy][]byte{}
			for i := 0; i <= 8; i++ {
				known[xy{i, 0}], known[xy{0, i}] = boundaryValue(i, 0), boundaryValue(0, i)
			}
			known[xy{5, 0}] = []byte("poison")
			out := newMemOut()
			tmp := t.TempDir()
			_, err := multicore.RunWavefront(context.Background(), multicore.Wavefront{
				Cell: cell, Region: wavefront.Rect{X: 1, Y: 1, W: 8, H: 8}, Value: from(known), Out: out, Cores: 2, TempDir: tmp,
			})
			var fe *wavefront.FailedError
			if !errors.As(err, &fe) {
				t.Fatalf("error = %v, want *FailedError", err)
			}
			if len(fe.Failed) != 1 || fe.Failed[0].X != 5 || fe.Failed[0].Y != 1 || fe.NotRun != 4*8-1 {
				t.Fatalf("failures = %v, not run %d; want cell (5,1) and 31", fe.Failed, fe.NotRun)
			}
			var ce *funcs.CallError
			if !errors.As(fe.Failed[0], &ce) {
				t.Fatalf("failure %v is not a *CallError", fe.Failed[0])
			}
			if cell.Info().Kind == funcs.Program && (ce.ExitCode != 3 || !strings.Contains(string(ce.Stderr), "bad input")) {
				t.Errorf("program failure = %v, want exit 3 and its stderr", ce)
			}
			if len(out.cells) != 4*8 {
				t.Errorf("%d cells written, want the 32 with x < 5", len(out.cells))
			}
			for k := range out.cells {
				if k.x >= 5 {
					t.Errorf("cell %v depends on the failed cell but was written", k)
				}
			}
			if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
				t.Errorf("temporary files left behind: %v", entries)
			}
		})
	}
}

func TestWavefrontStops(t *testing.T) {
	reg := funcs.NewRegistry()
	slow, err := reg.OpenCell(testutil.WriteScript(t, t.TempDir(), "slow", "sleep 0.05; cat \"$1\""), funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	known := map[xy][]byte{}
	for i := 0; i <= 50; i++ {
		known[xy{i, 0}], known[xy{0, i}] = []byte("1"), []byte("1")
	}
	region := wavefront.Rect{X: 1, Y: 1, W: 50, H: 50}

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		out := newMemOut()
		res, err := multicore.RunWavefront(ctx, multicore.Wavefront{Cell: slow, Region: region, Value: from(known), Out: out, Cores: 2})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
		if res.Computed == 0 || res.Computed != len(out.cells) || res.Computed >= region.Cells() {
			t.Errorf("computed %d, written %d: want some but not all, and the same", res.Computed, len(out.cells))
		}
	})
	t.Run("write error", func(t *testing.T) {
		out := newMemOut()
		out.fail = 3
		_, err := multicore.RunWavefront(context.Background(), multicore.Wavefront{Cell: slow, Region: region, Value: from(known), Out: out, Cores: 2})
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("error = %v, want the write error", err)
		}
	})
	t.Run("missing input", func(t *testing.T) {
		_, err := multicore.RunWavefront(context.Background(), multicore.Wavefront{Cell: slow, Region: wavefront.Rect{X: 60, Y: 1, W: 2, H: 2}, Value: from(known), Out: newMemOut()})
		if err == nil || !strings.Contains(err.Error(), "cell (59,0) is missing") {
			t.Fatalf("error = %v, want the missing cell", err)
		}
	})
}

func ExampleRunWavefront() {
	// R[i,0] = i, R[0,j] = j and F = the sum of the three: R[9,9] = 1854882.
	cell, _ := funcs.NewRegistry().OpenCell("builtin:sum", funcs.Options{})
	out := newMemOut()
	_, err := multicore.RunWavefront(context.Background(), multicore.Wavefront{
		Cell:   cell,
		Region: wavefront.Rect{X: 1, Y: 1, W: 9, H: 9},
		Value: func(x, y int) (funcs.Input, error) {
			return funcs.Input{Data: []byte(strconv.Itoa(x + y))}, nil // the boundary
		},
		Out: out,
	})
	fmt.Println(string(out.cells[xy{9, 9}]), err)
	// Output: 1854882 <nil>
}

// TestWavefrontTimed: Timed hears of every block once.
func TestWavefrontTimed(t *testing.T) {
	cell := openCells(t)["go"]
	region := wavefront.Rect{X: 1, Y: 1, W: 5, H: 4}
	known := reference(t, cell, 5, 4)
	var mu sync.Mutex
	blocks, failed := map[wavefront.Rect]int{}, 0
	_, err := multicore.RunWavefront(context.Background(), multicore.Wavefront{
		Cell: cell, Region: region, Value: from(known), Out: newMemOut(), Cores: 2, Block: 2,
		Timed: func(b wavefront.Rect, started, ended time.Time, bad bool) {
			mu.Lock()
			defer mu.Unlock()
			blocks[b]++
			if bad || ended.Before(started) {
				failed++
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Blocks of 2×2 over 5×4: three across, two up.
	if len(blocks) != 6 || failed != 0 {
		t.Errorf("timed %v, %d failed or ended before they started; want 6 blocks, none", blocks, failed)
	}
	for b, n := range blocks {
		if n != 1 {
			t.Errorf("block %v timed %d times", b, n)
		}
	}
}
