package shape

import (
	"math/rand/v2"
	"testing"
	"time"
)

// u is one time unit of the seed's examples.
const u = time.Second

func profile(ps ...[3]int) Profile {
	var out Profile
	for _, p := range ps {
		end := Forever
		if p[1] >= 0 {
			end = time.Duration(p[1]) * u
		}
		out = append(out, Period{Start: time.Duration(p[0]) * u, End: end, Free: p[2]})
	}
	return out
}

// TestFigure6to9 is the seed's worked example (Figs. 6–9): on the
// availability [(0,1,5),(1,5,10),(5,6,0),(6,7,10),(7,11,20),(11,∞,40)], a
// job that runs as 10 cores for 5 units, 20 for 3 or 30 for 2 finishes
// first as 20 for 3, from 7 to 10 (10 cores: 6 to 11; 30: 11 to 13).
func TestFigure6to9(t *testing.T) {
	p := profile([3]int{0, 1, 5}, [3]int{1, 5, 10}, [3]int{5, 6, 0}, [3]int{6, 7, 10}, [3]int{7, 11, 20}, [3]int{11, -1, 40})
	cands := []Shape{{10, 5 * u}, {20, 3 * u}, {30, 2 * u}}
	want := [][2]time.Duration{{6 * u, 11 * u}, {7 * u, 10 * u}, {11 * u, 13 * u}}
	for i, s := range cands {
		start, ok := p.FirstFit(s)
		if !ok || start != want[i][0] || start+s.Wall != want[i][1] {
			t.Errorf("%v: start %v, want %v to %v", s, start, want[i][0], want[i][1])
		}
	}
	c, err := p.Choose(cands)
	if err != nil || c.Index != 1 || c.Shape.Cores != 20 || c.Shape.Wall != 3*u || c.Finish != 10*u {
		t.Errorf("Choose = %+v, %v; want 20 cores for 3, finishing at 10", c, err)
	}
}

// TestFirstFitThroughSmallerPeriods is the counter-example to the seed's
// Fig. 5 loop: on [(0,1,20),(1,∞,10)] a 10-core job for 5 starts at 0.
func TestFirstFitThroughSmallerPeriods(t *testing.T) {
	p := profile([3]int{0, 1, 20}, [3]int{1, -1, 10})
	if start, ok := p.FirstFit(Shape{10, 5 * u}); !ok || start != 0 {
		t.Errorf("start %v, %v; want 0", start, ok)
	}
	if _, ok := p.FirstFit(Shape{11, 5 * u}); ok {
		t.Error("11 cores fit where at most 10 are free for long")
	}
}

// TestSAcbIsSAg checks Theorem 1 on random machine states: a
// conservative-backfilling machine, run for a while with jobs that end
// early, then asked where each candidate would end — by first fit on its
// profile (SAcb) and by simulating it through a copy (SAg) — gives the
// same choice.
func TestSAcbIsSAg(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	for trial := range 500 {
		cores := 4 + rng.IntN(60)
		m := NewCB(cores)
		for range 1 + rng.IntN(30) {
			req := time.Duration(1+rng.IntN(100)) * u
			run := time.Duration(rng.Int64N(int64(req) + 1))
			if _, _, err := m.Submit(1+rng.IntN(cores), req, run); err != nil {
				t.Fatal(err)
			}
			m.Advance(m.Now() + time.Duration(rng.IntN(20))*u)
		}
		var cands []Shape
		for range 1 + rng.IntN(5) {
			cands = append(cands, Shape{1 + rng.IntN(cores), time.Duration(1+rng.IntN(100)) * u})
		}
		cb, err1 := m.Profile().Choose(cands)
		g, err2 := m.Choose(cands)
		if err1 != nil || err2 != nil || cb != g {
			t.Fatalf("trial %d: SAcb %+v (%v), SAg %+v (%v)\nprofile %v\ncandidates %v", trial, cb, err1, g, err2, m.Profile(), cands)
		}
	}
}

// TestCBBackfills: a job that ends early lets the waiting jobs move up in
// submission order, and a small one backfills before a big one.
func TestCBBackfills(t *testing.T) {
	m := NewCB(10)
	m.Submit(8, 10*u, 2*u) // A: 0–10 reserved, ends at 2
	_, sb, _ := m.Submit(6, 5*u, 5*u)
	_, sc, _ := m.Submit(2, 3*u, 3*u)
	if sb != 10*u || sc != 0 {
		t.Fatalf("B reserved at %v (want 10), C at %v (want 0: backfilled)", sb, sc)
	}
	m.Advance(2 * u) // A ends: B moves up to 2
	if p := m.Profile(); p[0].Free != 2 || p[0].End != 1*u {
		t.Errorf("profile after A's early end %v", p)
	}
}

func TestParse(t *testing.T) {
	got, err := Parse("4x2h, 8x60,16x30m")
	if err != nil || len(got) != 3 || got[1] != (Shape{8, time.Hour}) || got[2] != (Shape{16, 30 * time.Minute}) {
		t.Errorf("Parse = %v, %v", got, err)
	}
	for _, bad := range []string{"", "4", "0x1h", "4x", "4x-1h", "x1h"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) took it", bad)
		}
	}
}
