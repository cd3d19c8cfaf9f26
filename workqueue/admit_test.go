package workqueue

import (
	"testing"
	"time"
)

func TestAdmissionLimits(t *testing.T) {
	cases := []struct {
		nofile                     uint64
		conns, handshakes, perHost int
	}{
		{nofile: 20, conns: 1, handshakes: 1, perHost: 1},
		{nofile: 100, conns: 12, handshakes: 12, perHost: 3},
		{nofile: 1024, conns: 256, handshakes: 256, perHost: 64},
		{nofile: 20000, conns: 5000, handshakes: 256, perHost: 64},
	}
	for _, tc := range cases {
		a := newAdmission(tc.nofile)
		if a.maxConns != tc.conns || a.maxHandshakes != tc.handshakes || a.maxPerHost != tc.perHost {
			t.Errorf("nofile %d: conns %d, handshakes %d, per host %d; want %d, %d, %d", tc.nofile,
				a.maxConns, a.maxHandshakes, a.maxPerHost, tc.conns, tc.handshakes, tc.perHost)
		}
		if reserved := tc.nofile - uint64(3*a.maxConns); tc.nofile > 67 && reserved < max(64, tc.nofile/4) {
			t.Errorf("nofile %d: only %d descriptors left for the application", tc.nofile, reserved)
		}
	}
}

func TestAdmission(t *testing.T) {
	a := newAdmission(100) // 12 connections, 12 in their handshake, 3 per host
	for i := range 3 {
		if !a.admit("10.0.0.1") {
			t.Fatalf("connection %d from a host refused", i+1)
		}
	}
	if a.admit("10.0.0.1") {
		t.Error("a fourth connection from one host admitted while three are in their handshake")
	}
	a.handshakeOver("10.0.0.1") // became a worker
	if !a.admit("10.0.0.1") {
		t.Error("a host's connection refused after one of its three finished its handshake")
	}
	for i := range 8 {
		a.admit("10.0.1." + string(rune('0'+i)))
	}
	if !a.full() {
		t.Errorf("not full with %d connections, %d in their handshake", a.conns, a.handshakes)
	}
	a.handshakeOver("10.0.1.0")
	if !a.full() {
		t.Error("room with every connection taken")
	}
	a.closed()
	if a.full() {
		t.Error("still full after a connection closed")
	}
}

func TestThrottle(t *testing.T) {
	th := throttle{burst: 2, interval: time.Minute}
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at         time.Duration
		ok         bool
		suppressed int
	}{
		{0, true, 0},
		{time.Second, true, 0},
		{2 * time.Second, false, 0},
		{3 * time.Second, false, 0},
		{time.Minute, true, 2},
		{time.Minute + time.Second, true, 0},
		{time.Minute + 2*time.Second, false, 0},
	}
	for _, s := range steps {
		ok, n := th.allow(t0.Add(s.at))
		if ok != s.ok || n != s.suppressed {
			t.Errorf("at %v: allow = %v, %d held back; want %v, %d", s.at, ok, n, s.ok, s.suppressed)
		}
	}
}

// inHandshake returns how many admitted connections are in their
// handshake, for tests that must know the master has accepted a peer.
func (a *admission) inHandshake() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handshakes
}
