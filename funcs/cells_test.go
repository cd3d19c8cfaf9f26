package funcs_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/funcs"
)

// solve runs the recurrence sequentially over the boundary
// r[i][0], r[0][j] and returns the grid.
func solve(t *testing.T, f funcs.CellFunc, r [][][]byte) [][][]byte {
	t.Helper()
	for x := 1; x < len(r); x++ {
		for y := 1; y < len(r[0]); y++ {
			v, err := f(r[x-1][y], r[x][y-1], r[x-1][y-1])
			if err != nil {
				t.Fatalf("cell (%d,%d): %v", x, y, err)
			}
			r[x][y] = v
		}
	}
	return r
}

func grid(nx, ny int) [][][]byte {
	r := make([][][]byte, nx+1)
	for i := range r {
		r[i] = make([][]byte, ny+1)
	}
	return r
}

// chunks cuts s into n pieces of random, non-zero lengths.
func chunks(rng *rand.Rand, s []byte, n int) [][]byte {
	cuts := []int{0}
	for _, c := range rng.Perm(len(s) - 1)[:n-1] {
		cuts = append(cuts, c+1)
	}
	cuts = append(cuts, len(s))
	slices.Sort(cuts)
	var out [][]byte
	for k := 1; k < len(cuts); k++ {
		out = append(out, s[cuts[k-1]:cuts[k]])
	}
	return out
}

// TestSWCellEqualsWholeAlignment aligns random related sequences cut into
// random chunks and checks the last cell's best score against SWAlign on
// the whole sequences.
func TestSWCellEqualsWholeAlignment(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for trial := range 40 {
		a := make([]byte, 20+rng.IntN(200))
		for i := range a {
			a[i] = "ACGT"[rng.IntN(4)]
		}
		b := bytes.Clone(a[rng.IntN(len(a)/2):])
		for i := range b {
			if rng.IntN(5) == 0 {
				b[i] = "ACGT"[rng.IntN(4)]
			}
		}
		b = append(b, "GATTACA"...)
		nx, ny := 1+rng.IntN(min(8, len(a))), 1+rng.IntN(min(8, len(b)))
		r := grid(nx, ny)
		r[0][0] = []byte{}
		for i, c := range chunks(rng, a, nx) {
			r[i+1][0] = []byte(fmt.Sprintf(">chunk %d of A\n%s\n", i+1, strings.ToLower(string(c))))
		}
		for j, c := range chunks(rng, b, ny) {
			r[0][j+1] = c
		}
		solve(t, funcs.SWCell, r)
		last := r[nx][ny]
		want, _ := funcs.SWAlign(a, b)
		if got, _, _ := bytes.Cut(last, []byte("\n")); string(got) != "swcell best "+string(want) {
			t.Fatalf("trial %d (%d×%d chunks of %d×%d letters): last cell says %q, SWAlign says %s", trial, nx, ny, len(a), len(b), got, want)
		}
	}
}

func TestSWCellErrors(t *testing.T) {
	good, err := funcs.SWCell([]byte("ACG"), []byte("GGT"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name              string
		left, below, diag string
		want              string
	}{
		{"empty chunk", "", "ACGT", "", "left input: empty sequence chunk"},
		{"truncated cell", "ACG", "swcell best 3\na GGT\n", "", "not a complete swcell result"},
		{"bad score", "ACG", "swcell best x", "", "bad best score"},
		{"strange line", "ACG", string(good) + "\nextra 1", "", "unexpected line"},
		{"scores missing", "ACG", "swcell best 0\na GG\nb A\ntop 0\nright 0", "", "a score for every letter"},
	}
	for _, tt := range tests {
		if _, err := funcs.SWCell([]byte(tt.left), []byte(tt.below), []byte(tt.diag)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func rdValues(t *testing.T, v []byte) []float64 {
	t.Helper()
	var out []float64
	for _, f := range strings.Fields(string(v)) {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil {
			t.Fatalf("value %q: %v", v, err)
		}
		out = append(out, x)
	}
	return out
}

// TestRDGame solves a race and checks what an equilibrium must satisfy:
// each firm's effort is a best response to the other's, symmetric firms get
// mirrored results, and the firm ahead is worth more.
func TestRDGame(t *testing.T) {
	for _, prize := range []int{1, 100} {
		t.Run(fmt.Sprint("prize ", prize), func(t *testing.T) { testRDGame(t, prize) })
	}
}

func testRDGame(t *testing.T, prize int) {
	const n = 40
	r := grid(n, n)
	r[0][0] = []byte(fmt.Sprintf("%g %g", float64(prize)/2, float64(prize)/2))
	for k := 1; k <= n; k++ {
		r[0][k] = []byte(fmt.Sprintf("%d 0", prize)) // firm 1 (x) arrived first
		r[k][0] = []byte(fmt.Sprintf("0 %d", prize))
	}
	solve(t, funcs.RDGame, r)
	for x := 1; x <= n; x++ {
		for y := 1; y <= n; y++ {
			v := rdValues(t, r[x][y])
			m := rdValues(t, r[y][x])
			if len(v) != 4 || math.Abs(v[0]-m[1]) > 1e-9 || math.Abs(v[2]-m[3]) > 1e-9 {
				t.Fatalf("R[%d,%d] = %v is not the mirror of R[%d,%d] = %v", x, y, v, y, x, m)
			}
			if x < y && v[0] < v[1] {
				t.Errorf("R[%d,%d] = %v: firm 1 is ahead but not worth more", x, y, v)
			}
			// No effort on a grid beats the equilibrium effort.
			l, b, d := rdValues(t, r[x-1][y]), rdValues(t, r[x][y-1]), rdValues(t, r[x-1][y-1])
			value := func(e, o float64) float64 {
				num := -funcs.RDGameCost*e*e/2 + funcs.RDGameDiscount*(e*o*d[0]+e*(1-o)*l[0]+(1-e)*o*b[0])
				return num / (1 - funcs.RDGameDiscount*(1-e)*(1-o))
			}
			for k := 0; k <= 100; k++ {
				if e := float64(k) / 100; value(e, v[3]) > v[0]+1e-9*float64(prize) {
					t.Fatalf("R[%d,%d]: effort %v earns %v, more than the equilibrium's %v", x, y, e, value(e, v[3]), v[0])
				}
			}
		}
	}
	for _, bad := range []string{"", "1", "1 2 3", "a b", "NaN 1"} {
		if _, err := funcs.RDGame([]byte(bad), []byte("0 1"), []byte("0 1")); err == nil || !strings.Contains(err.Error(), "rdgame: left input") {
			t.Errorf("RDGame(%q, …) error = %v", bad, err)
		}
	}
}
