package workqueue

import (
	"testing"
	"time"
)

// The share clock charges transfers that overlap a share each of the time
// they overlap.
func TestShareClock(t *testing.T) {
	var c shareClock
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	a := c.begin(ms(0))  // alone for 10 ms
	b := c.begin(ms(10)) // then both for 20 ms
	if got := c.end(a, ms(30)); got != 20*time.Millisecond {
		t.Errorf("a: charged %v, want 10 ms alone + 20 ms shared by two = 20ms", got)
	}
	if got := c.end(b, ms(40)); got != 20*time.Millisecond {
		t.Errorf("b: charged %v, want 20 ms shared by two + 10 ms alone = 20ms", got)
	}
	if c.active != 0 {
		t.Errorf("%d transfers still counted", c.active)
	}
}
