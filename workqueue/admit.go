package workqueue

import (
	"sync"
	"time"
)

// admission decides which connections the master takes, so that a flood of
// connections that never authenticate can neither exhaust the process's
// file descriptors nor keep workers out for long. It bounds
//   - all connections (maxConns), from the descriptors the process may
//     open, so that the application's own files always find one: when they
//     are all taken the master stops accepting, and newcomers wait in the
//     kernel's queue;
//   - connections still in their handshake (TLS, password, hello), in all
//     (maxHandshakes: beyond it, too, the master stops accepting) and from
//     one host (maxPerHost: beyond it a newcomer from that host is closed at
//     once, so that one host cannot hold every slot). Each has
//     Config.HandshakeTimeout to finish.
//
// It does no I/O; the accept loop asks it and reports to it.
type admission struct {
	maxConns, maxHandshakes, maxPerHost int

	mu         sync.Mutex
	conns      int
	handshakes int
	perHost    map[string]int
	room       chan struct{} // signalled when a connection ends or finishes its handshake
}

// Default bounds on connections in their handshake.
const (
	defaultMaxHandshakes = 256
	defaultMaxPerHost    = 64
)

// newAdmission sizes the bounds for a process allowed nofile descriptors.
// A quarter of them (at least 64) stays for the application's files; each
// connection counts for three: its socket, a file being sent to the worker
// and one being received from it.
func newAdmission(nofile uint64) *admission {
	reserve := max(64, nofile/4)
	conns := 1
	if nofile > reserve+3 {
		conns = int(min((nofile-reserve)/3, 1<<30))
	}
	hs := min(conns, defaultMaxHandshakes)
	return &admission{
		maxConns: conns, maxHandshakes: hs, maxPerHost: max(1, min(defaultMaxPerHost, hs/4)),
		perHost: map[string]int{},
		room:    make(chan struct{}, 1),
	}
}

// full reports whether the master must stop accepting for now.
func (a *admission) full() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conns >= a.maxConns || a.handshakes >= a.maxHandshakes
}

// admit counts a connection just accepted from host, in its handshake. It
// returns false, counting nothing, when host already has maxPerHost
// connections in their handshake: the caller closes it.
func (a *admission) admit(host string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.perHost[host] >= a.maxPerHost {
		return false
	}
	a.perHost[host]++
	a.handshakes++
	a.conns++
	return true
}

// handshakeOver records that an admitted connection from host finished its
// handshake, one way or the other.
func (a *admission) handshakeOver(host string) {
	a.mu.Lock()
	if a.perHost[host]--; a.perHost[host] <= 0 {
		delete(a.perHost, host)
	}
	a.handshakes--
	a.mu.Unlock()
	a.signal()
}

// closed records that an admitted connection whose handshake is over has
// been closed.
func (a *admission) closed() {
	a.mu.Lock()
	a.conns--
	a.mu.Unlock()
	a.signal()
}

func (a *admission) signal() {
	select {
	case a.room <- struct{}{}:
	default:
	}
}

// throttle lets through at most burst events per interval, so that a flood
// of refused connections cannot flood the log, and counts those it holds
// back.
type throttle struct {
	burst    int
	interval time.Duration

	mu         sync.Mutex
	start      time.Time
	n          int
	suppressed int
}

// allow reports whether an event at now may be logged and, if so, how many
// were held back since the last one that was.
func (t *throttle) allow(now time.Time) (ok bool, suppressed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.start) >= t.interval {
		t.start, t.n = now, 0
	}
	if t.n >= t.burst {
		t.suppressed++
		return false, 0
	}
	t.n++
	suppressed, t.suppressed = t.suppressed, 0
	return true, suppressed
}
