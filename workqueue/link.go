package workqueue

import (
	"net"
	"time"

	"golang.org/x/time/rate"
)

// link is the master's network link as Config.Bandwidth makes it: one
// token bucket that every worker connection's reads and writes draw on, so
// that all the master's traffic together moves at most so many bytes a
// second, as through a slow network interface. It lets one machine show
// what a master's bandwidth does to its capacity (seed 000 Fig. 4.3),
// where loopback would make every transfer nearly free. A draw that wakes
// late loses the time: on a loaded machine a transfer alone moves slower
// than the bandwidth (bench/RESULTS.md).
type link struct {
	lim   *rate.Limiter
	burst int
	done  <-chan struct{} // the master's: a closing master waits for no token
}

// newLink returns a link of bytesPerSec, or nil for an unlimited one.
func newLink(bytesPerSec int64, done <-chan struct{}) *link {
	if bytesPerSec <= 0 {
		return nil
	}
	// A draw of a millisecond of traffic, within [512 B, 64 KiB]: what
	// an idle link saves up must stay small against a task's files, or
	// they would cross it faster than its bandwidth (and the capacity
	// estimate see a faster link than there is); transfers that share
	// the link interleave finely; a fast link is not slowed by a draw
	// per few bytes.
	burst := int(min(max(bytesPerSec/1000, 512), 64<<10))
	return &link{lim: rate.NewLimiter(rate.Limit(bytesPerSec), burst), burst: burst, done: done}
}

// wait takes n ≤ burst bytes' worth of tokens, waiting for them if the
// link is busy; it fails only when the master closes.
func (l *link) wait(n int) error {
	r := l.lim.ReserveN(time.Now(), n)
	d := r.Delay()
	if d == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-l.done:
		r.Cancel()
		return net.ErrClosed
	}
}

// conn returns c with its traffic through the link.
func (l *link) conn(c net.Conn) net.Conn {
	if l == nil {
		return c
	}
	return &linkConn{Conn: c, l: l}
}

// linkConn is a connection whose reads and writes draw on a link: a write
// waits before it sends, a read after it receives (TCP's flow control
// then slows the sender).
type linkConn struct {
	net.Conn
	l *link
}

func (c *linkConn) Read(p []byte) (int, error) {
	if len(p) > c.l.burst {
		p = p[:c.l.burst]
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if werr := c.l.wait(n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}

func (c *linkConn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := min(len(p), c.l.burst)
		if err := c.l.wait(k); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(p[:k])
		written += n
		if err != nil {
			return written, err
		}
		p = p[k:]
	}
	return written, nil
}
