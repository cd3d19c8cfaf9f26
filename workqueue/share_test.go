package workqueue

import (
	"testing"
	"time"
)

// The share clock charges transfers that overlap a share each of the time
// they overlap: two alone for 10 ms each, then two together for 20 ms,
// cost 10 ms + 10 ms each.
func TestShareClock(t *testing.T) {
	var c shareClock
	t0 := time.Now()
	c.mu.Lock()
	c.advance(t0)
	c.active = 2
	mark := c.v
	c.advance(t0.Add(20 * time.Millisecond))
	c.active = 1
	share := c.v - mark
	c.active = 0
	c.mu.Unlock()
	if share != 10*time.Millisecond {
		t.Errorf("two transfers over 20 ms: each charged %v, want 10ms", share)
	}
	a := c.begin()
	time.Sleep(5 * time.Millisecond)
	if got := c.end(a); got <= 0 || got > time.Second {
		t.Errorf("a transfer's share %v", got)
	}
}
