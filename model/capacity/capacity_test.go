package capacity

import (
	"math"
	"testing"
	"time"
)

func TestWindowEq45(t *testing.T) {
	var w Window
	if _, ok := w.Capacity(5); ok {
		t.Fatal("capacity without samples")
	}
	// Seed 000 Fig. 4.3-like tasks: 5 s execution, 0.25 s transfer, 0.03 s think.
	for i := 0; i < 30; i++ {
		w.Add(Sample{Exec: 5 * time.Second, Transfer: 250 * time.Millisecond, Think: 30 * time.Millisecond})
	}
	got, _ := w.Capacity(4)
	if want := 5 / 0.28; math.Abs(got-want) > 1e-9 {
		t.Errorf("capacity %v, want %v", got, want)
	}
}

func TestWindowUsesRecentMaxTenOrBusy(t *testing.T) {
	cases := []struct {
		busy int
		want float64
	}{
		{1, 10},     // last 10 samples: all new (exec 10 s / 1 s)
		{20, 5.5},   // last 20: 10 old (exec 1) + 10 new (exec 10)
		{1000, 5.5}, // no more than there are
	}
	for _, tc := range cases {
		var w Window
		for i := 0; i < 10; i++ {
			w.Add(Sample{Exec: time.Second, Transfer: time.Second})
		}
		for i := 0; i < 10; i++ {
			w.Add(Sample{Exec: 10 * time.Second, Transfer: time.Second})
		}
		if got, _ := w.Capacity(tc.busy); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("busy %d: %v, want %v", tc.busy, got, tc.want)
		}
	}
}

func TestWindowWraps(t *testing.T) {
	w := Window{ring: make([]Sample, 0, 3)}
	w.full = false
	for i := 0; i < maxWindow+5; i++ {
		w.Add(Sample{Exec: time.Duration(i%7+1) * time.Second, Transfer: time.Second})
	}
	if w.Len() != maxWindow {
		t.Fatalf("len %d", w.Len())
	}
	// The newest 10 samples are i = maxWindow-5 .. maxWindow+4.
	var sum float64
	for i := maxWindow - 5; i < maxWindow+5; i++ {
		sum += float64(i%7 + 1)
	}
	if got, _ := w.Capacity(1); math.Abs(got-sum/10) > 1e-9 {
		t.Errorf("after wrapping: %v, want %v", got, sum/10)
	}
}

// TestEWMAPaperTable checks the EMA against Kremer-Herman et al. Table I:
// instantaneous capacity 1 + 10·i rising for 500 tasks, then falling.
func TestEWMAPaperTable(t *testing.T) {
	var e EWMA
	want := map[int]float64{100: 812.12, 300: 2811.0, 500: 4811.0, 700: 3190.99, 900: 1191.0}
	for i := 1; i <= 1000; i++ {
		inst := 1 + 10*float64(i)
		if i > 500 {
			inst = 1 + 10*float64(1000-i)
		}
		// t_io = 1 s, t_z = 0, t_e = inst - 1: (t_e+t_io)/(t_z+t_io) = inst.
		e.Add(Sample{Exec: time.Duration((inst - 1) * float64(time.Second)), Transfer: time.Second})
		if w, ok := want[i]; ok {
			if got, _ := e.Value(); math.Abs(got-w) > 1 {
				t.Errorf("task %d: %.2f, want %.2f", i, got, w)
			}
		}
	}
}

func TestEWMAFloorAndEmpty(t *testing.T) {
	var e EWMA
	if _, ok := e.Value(); ok {
		t.Error("value before any sample")
	}
	e.Add(Sample{Exec: time.Millisecond, Transfer: time.Second, Think: time.Second})
	if v, _ := e.Value(); v != 1 {
		t.Errorf("floor: %v", v)
	}
	e.Add(Sample{Exec: time.Second}) // no overhead: skipped
	if e.n != 1 {
		t.Errorf("sample without overhead counted")
	}
}

// TestWindowWorkers: the workers kept busy are Eq. 4.5 plus the worker on
// the link, over the same window; with no think time, one more exactly.
func TestWindowWorkers(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		exec, transfer, think time.Duration
		want                  float64
	}{
		{"no think time: Eq. 4.5 + 1", time.Second, 500 * time.Millisecond, 0, 3},
		{"think time", 5 * time.Second, 250 * time.Millisecond, 30 * time.Millisecond, 5.25 / 0.28},
		{"free master", time.Second, 0, 0, math.Inf(1)},
	} {
		var w Window
		if _, ok := w.Workers(1); ok {
			t.Fatal("workers without samples")
		}
		for range 12 {
			w.Add(Sample{Exec: tc.exec, Transfer: tc.transfer, Think: tc.think})
		}
		got, _ := w.Workers(4)
		eq45, _ := w.Capacity(4)
		if math.Abs(got-tc.want) > 1e-9 && !(math.IsInf(got, 1) && math.IsInf(tc.want, 1)) {
			t.Errorf("%s: workers %v, want %v (Eq. 4.5: %v)", tc.name, got, tc.want, eq45)
		}
	}
}
