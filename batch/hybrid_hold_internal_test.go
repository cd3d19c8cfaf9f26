package batch

import (
	"testing"
	"time"
)

func TestFirstRemote(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		n, slots       int
		mean, dispatch time.Duration
		want           int
	}{
		{10, 2, 0, 650 * ms, 10},              // nothing ended, nothing running long: all held
		{10, 2, 1 * ms, 650 * ms, 10},         // short jobs: all finish here before a dispatch
		{2000, 2, 1 * ms, 650 * ms, 1300},     // ... but not 2000 of them
		{10, 2, 1000 * ms, 650 * ms, 0},       // long jobs: every one is better sent
		{10, 2, 400 * ms, 650 * ms, 2},        // the first two start here within 400 ms
		{10, 1, 325 * ms, 650 * ms, 2},        // 325 ms, 650 ms: not sooner than the dispatch
		{10, 3, 100 * ms, time.Hour, 10},      // a dispatch far longer than all of them
		{5, 4, time.Nanosecond, time.Hour, 5}, // no overflow
	}
	for _, tt := range tests {
		got := firstRemote(tt.n, tt.slots, tt.mean, tt.dispatch)
		if got != tt.want {
			t.Errorf("firstRemote(%d, %d, %v, %v) = %d, want %d", tt.n, tt.slots, tt.mean, tt.dispatch, got, tt.want)
		}
		// Against the definition: the job at pos waits pos/slots+1 means.
		for pos := range tt.n {
			if sent := time.Duration(pos/tt.slots+1)*tt.mean > tt.dispatch; sent != (pos >= got) {
				t.Errorf("firstRemote(%d, %d, %v, %v): position %d sent %v", tt.n, tt.slots, tt.mean, tt.dispatch, pos, sent)
			}
		}
	}
}
