package workqueue

import (
	"sync"
	"time"
)

// shareClock attributes the master's transfer time to the transfers that
// share it: while k transfers run at once, each is charged 1/k of the time.
// A task's share is what it costs the master's network, which is what the
// capacity estimate (Eq. 4.5) needs: the wall time of a transfer that waits
// for others counts their time too, and made the master look as if it
// could keep far fewer workers busy than it can (model/sim's
// TestPoolDecisions showed it: the factory then gave too few).
//
// It is a virtual clock that runs at 1/k of real time while k transfers
// run; a transfer's share is how far it moved between its begin and end.
type shareClock struct {
	mu     sync.Mutex
	active int
	last   time.Time
	v      time.Duration
}

func (c *shareClock) advance(now time.Time) {
	if c.active > 0 {
		c.v += now.Sub(c.last) / time.Duration(c.active)
	}
	c.last = now
}

// begin starts a transfer at now and returns its mark, for end.
func (c *shareClock) begin(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	c.active++
	return c.v
}

// end ends the transfer begun at mark at now and returns its share.
func (c *shareClock) end(mark time.Duration, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	c.active--
	return c.v - mark
}
