package worker

import (
	"testing"
	"time"
)

// TestCycleEnding: with a billing cycle, a worker may leave only in the
// last tenth of a cycle (at most its last minute), counted from its start.
func TestCycleEnding(t *testing.T) {
	t0 := time.Unix(0, 0)
	for _, tc := range []struct {
		cycle, at time.Duration
		want      bool
	}{
		{0, 7 * time.Minute, true},                 // no cycle: any time
		{20 * time.Minute, 7 * time.Minute, false}, // the seed's example: not at 7 min
		{20 * time.Minute, 18*time.Minute + 59*time.Second, false},
		{20 * time.Minute, 19 * time.Minute, true},              // its last minute
		{20 * time.Minute, 20*time.Minute + time.Second, false}, // the next cycle, paid for
		{20 * time.Minute, 39*time.Minute + 30*time.Second, true},
		{10 * time.Second, 9 * time.Second, true}, // a short cycle: its last tenth
		{10 * time.Second, 8 * time.Second, false},
	} {
		if got := CycleEnding(t0, t0.Add(tc.at), tc.cycle); got != tc.want {
			t.Errorf("cycle %v, at %v: %v, want %v", tc.cycle, tc.at, got, tc.want)
		}
	}
}
