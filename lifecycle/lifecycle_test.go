package lifecycle

import (
	"math"
	"testing"
	"time"
)

func TestStatsWelford(t *testing.T) {
	// Times of about 31 years with a spread of a second: the textbook
	// sum of squares cancels to noise in float64.
	var st Stats
	for _, s := range []int64{1e9 + 1, 1e9 + 2, 1e9 + 3} {
		st.Add(time.Duration(s) * time.Second)
	}
	if st.N() != 3 || st.Mean() != (1e9+2)*time.Second || st.StdDev() != time.Second {
		t.Errorf("n %d, mean %v, deviation %v; want 3, %v, 1s", st.N(), st.Mean(), st.StdDev(), (1e9+2)*time.Second)
	}
	var one Stats
	one.Add(time.Second)
	if one.StdDev() != 0 || (Stats{}).Mean() != 0 {
		t.Errorf("a single sample has deviation %v", one.StdDev())
	}
}

func TestLimit(t *testing.T) {
	var uniform, spread Stats
	for i := 1; i <= 10; i++ {
		uniform.Add(time.Second)
		spread.Add(time.Duration(i) * time.Second)
	}
	sd := spread.stddev() // 3.0276503540974917, the sample deviation of 1…10
	cases := []struct {
		name   string
		fa     FastAbort
		st     Stats
		aborts int
		want   float64 // seconds; NaN: no limit
	}{
		{"multiplier", FastAbort{Multiplier: 3}, uniform, 0, 3},
		{"multiplier after one abort", FastAbort{Multiplier: 3}, uniform, 1, 4},
		{"sigmas floor at twice the mean", FastAbort{Sigmas: 3}, uniform, 0, 2},
		{"sigmas", FastAbort{Sigmas: 3}, spread, 0, 5.5 + 3*sd},
		{"both: the smaller", FastAbort{Multiplier: 2, Sigmas: 3}, spread, 0, 11},
		{"off", FastAbort{}, uniform, 0, math.NaN()},
		{"too few samples", FastAbort{Multiplier: 3, MinSamples: 11}, uniform, 0, math.NaN()},
		{"aborted MaxAborts times", FastAbort{Multiplier: 3, MaxAborts: 2}, uniform, 2, math.NaN()},
	}
	for _, tc := range cases {
		got, ok := tc.fa.Limit(tc.st, tc.aborts)
		if math.IsNaN(tc.want) {
			if ok {
				t.Errorf("%s: limit %v, want none", tc.name, got)
			}
			continue
		}
		if !ok || math.Abs(got.Seconds()-tc.want) > 1e-6 {
			t.Errorf("%s: %v %v, want %gs", tc.name, got, ok, tc.want)
		}
	}
	if math.Abs(sd-3.0276503540974917) > 1e-12 {
		t.Errorf("sample deviation of 1…10: %v", sd)
	}
}

func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		r    Retries
		def  int
		want int
	}{
		{0, 2, 2}, {0, 0, 0}, {NoRetry, 2, 0}, {-5, 2, 0}, {3, 2, 3},
	} {
		if got := tc.r.Limit(tc.def); got != tc.want {
			t.Errorf("Retries(%d).Limit(%d) = %d, want %d", tc.r, tc.def, got, tc.want)
		}
	}
}
