package distcmd

import (
	"net"
	"slices"
	"sync"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/rightsize/rightsize/model/cluster"
	"github.com/rightsize/rightsize/workqueue"
)

// A joinClock measures a Work Queue run's start-up for placement: when,
// after its master started listening, each worker joined, and which
// joined from this machine. Its hook runs in the master's loop: it only
// notes the time.
type joinClock struct {
	here func(net.IP) bool
	now  func() time.Time

	mu         sync.Mutex
	start      time.Time
	ownFeature string // this machine's own worker announces it; not counted
	joins      []time.Duration
	hereJoins  []time.Duration
}

// watchJoins returns a clock of the workers joining the master cfg will
// configure, chaining its Joined hook. Call started as the master starts
// listening.
func watchJoins(cfg *workqueue.Config, here func(net.IP) bool) *joinClock {
	j := &joinClock{here: here, now: time.Now, start: time.Now()}
	onJoin(cfg, j.joined)
	return j
}

// onJoin makes cfg's master call f for each worker that joins, after the
// Joined hook cfg had.
func onJoin(cfg *workqueue.Config, f func(workqueue.WorkerInfo)) {
	prev := cfg.Joined
	cfg.Joined = func(info workqueue.WorkerInfo) {
		if prev != nil {
			prev(info)
		}
		f(info)
	}
}

// started marks the master's start: the joins are timed from it.
func (j *joinClock) started(t time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.start = t
}

// ignore leaves out of the count the worker announcing feature: this
// machine's own worker, which connects at once and says nothing of the
// cluster's.
func (j *joinClock) ignore(feature string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ownFeature = feature
}

func (j *joinClock) joined(info workqueue.WorkerInfo) {
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ownFeature != "" && slices.Contains(info.Features, j.ownFeature) {
		return
	}
	at := now.Sub(j.start)
	j.joins = append(j.joins, at)
	if tcp, ok := info.Addr.(*net.TCPAddr); ok && j.here(tcp.IP) {
		j.hereJoins = append(j.hereJoins, at)
	}
}

// startup is what the clock saw, for cluster.SaveStartup: the workers'
// mean time to join, and those from this machine.
func (j *joinClock) startup() cluster.Startup {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := cluster.Startup{Joined: len(j.joins), Here: len(j.hereJoins)}
	if len(j.joins) == 0 {
		return st
	}
	for _, d := range j.joins {
		st.Joins = append(st.Joins, d.Seconds())
	}
	st.Mean = stat.Mean(st.Joins, nil)
	if len(j.hereJoins) > 0 {
		st.HereFirst = slices.Min(j.hereJoins).Seconds()
	}
	return st
}
