package batch

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Hybrid is a Driver that makes this machine one more worker of a
// cluster: it runs each job on a local driver while that has a free slot,
// and on a remote one otherwise, and when a local slot frees it moves
// there the earliest job still waiting in the remote queue. A run placed
// on a cluster so starts at once, and never waits in a queue for work this
// machine could be doing.
//
// Jobs run the same command on either side, so Hybrid is for back ends on
// a filesystem this machine shares (SLURM, Grid Engine, HTCondor here); a
// Work Queue master gets this machine's cores as a worker instead.
type Hybrid struct {
	local, remote Driver
	slots         int
	t             *Jobs
	merged        sync.WaitGroup

	mu       sync.Mutex
	jobs     map[string]*hybridJob // by Hybrid's ID, until final
	byLocal  map[string]*hybridJob // by the local driver's ID
	byRemote map[string]*hybridJob // by the remote driver's ID
	onLocal  int                   // jobs on local, not final
	waiting  []*hybridJob          // on remote and not reported running, oldest first
	seq      int
	closed   bool
	counts   HybridCounts
}

// HybridCounts say where a Hybrid's jobs ended.
type HybridCounts struct {
	Local  int // final on the local driver (moved ones included)
	Remote int // final on the remote driver
	Moved  int // taken from the remote queue to run locally
}

type hybridJob struct {
	id      string
	job     *Job
	local   bool   // on the local driver
	under   string // its ID there
	running bool   // reported Running
}

var _ Driver = (*Hybrid)(nil)

// NewHybrid returns a Hybrid running up to slots jobs at once on local
// (which should have at least as many) and the others on remote. It owns
// both drivers: Close closes them.
func NewHybrid(local Driver, slots int, remote Driver) *Hybrid {
	h := &Hybrid{
		local: local, remote: remote, slots: max(slots, 1),
		t:        NewJobs(),
		jobs:     map[string]*hybridJob{},
		byLocal:  map[string]*hybridJob{},
		byRemote: map[string]*hybridJob{},
	}
	h.merged.Add(2)
	go h.follow(local.Events(), true)
	go h.follow(remote.Events(), false)
	return h
}

// Counts returns where the jobs ended so far.
func (h *Hybrid) Counts() HybridCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts
}

// Submit runs job here if a local slot is free, else queues it on the
// remote driver.
func (h *Hybrid) Submit(ctx context.Context, job *Job) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return "", ErrClosed
	}
	h.seq++
	j := &hybridJob{id: "h" + strconv.Itoa(h.seq), job: job, local: h.onLocal < h.slots}
	d, side := h.remote, "remote"
	if j.local {
		d, side = h.local, "local"
	}
	under, err := d.Submit(ctx, job)
	if err != nil {
		return "", fmt.Errorf("%s: %w", side, err)
	}
	if err := h.t.Add(j.id, Status{State: Queued, Submitted: time.Now()}); err != nil {
		return "", err
	}
	h.jobs[j.id] = j
	h.attach(j, under)
	return j.id, nil
}

// attach records that j is now under on its side. Called with h.mu held.
func (h *Hybrid) attach(j *hybridJob, under string) {
	j.under = under
	if j.local {
		h.byLocal[under] = j
		h.onLocal++
	} else {
		h.byRemote[under] = j
		h.waiting = append(h.waiting, j)
	}
}

// follow passes on one driver's events, as Hybrid's, until its channel
// closes.
func (h *Hybrid) follow(events <-chan Event, local bool) {
	defer h.merged.Done()
	for ev := range events {
		h.mu.Lock()
		byID := h.byRemote
		if local {
			byID = h.byLocal
		}
		j, ok := byID[ev.ID]
		if !ok {
			// A job moved here from the remote queue: its removal there
			// is none of the caller's business.
			h.mu.Unlock()
			continue
		}
		ev.ID = j.id
		if ev.State == Running {
			j.running = true
			h.unwait(j)
		}
		if ev.State.Final() {
			delete(byID, j.under)
			delete(h.jobs, j.id)
			h.unwait(j)
			if local {
				h.onLocal--
				h.counts.Local++
			} else {
				h.counts.Remote++
			}
		}
		h.t.Set(ev)
		if local && ev.State.Final() {
			h.moveWaiting()
		}
		h.mu.Unlock()
	}
}

// unwait takes j off the list of jobs waiting in the remote queue.
// Called with h.mu held.
func (h *Hybrid) unwait(j *hybridJob) {
	for i, w := range h.waiting {
		if w == j {
			h.waiting = append(h.waiting[:i], h.waiting[i+1:]...)
			return
		}
	}
}

// moveWaiting moves the oldest jobs still queued on the remote driver to
// the free local slots. A job the remote driver has started (or that it
// cannot remove), or one asking for more cores than this machine's slots,
// stays where it is. Called with h.mu held.
func (h *Hybrid) moveWaiting() {
	for i := 0; h.onLocal < h.slots && i < len(h.waiting) && !h.closed; {
		j := h.waiting[i]
		if j.job.Resources.Cores > h.slots {
			i++
			continue
		}
		h.waiting = append(h.waiting[:i], h.waiting[i+1:]...)
		if st, err := h.remote.Status(j.under); err != nil || st.State != Queued {
			continue
		}
		if err := h.remote.Remove(context.Background(), j.under); err != nil {
			continue
		}
		// From here the remote driver's events for it (its removal) are
		// dropped: it no longer maps to j.
		delete(h.byRemote, j.under)
		j.local = true
		under, err := h.local.Submit(context.Background(), j.job)
		if err != nil {
			delete(h.jobs, j.id)
			h.t.Set(Event{ID: j.id, Status: Status{State: Failed, Err: fmt.Errorf("moving it here from the remote queue: %w", err), Ended: time.Now()}})
			continue
		}
		h.counts.Moved++
		h.attach(j, under)
	}
}

// Status returns what Hybrid last saw of job id.
func (h *Hybrid) Status(id string) (Status, error) { return h.t.Status(id) }

// Remove removes job id from whichever driver has it.
func (h *Hybrid) Remove(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.jobs[id]
	if !ok {
		_, err := h.t.Status(id)
		return err
	}
	d := h.remote
	if j.local {
		d = h.local
	}
	return d.Remove(ctx, j.under)
}

// Events returns the channel of every job's events.
func (h *Hybrid) Events() <-chan Event { return h.t.Events() }

// Close closes both drivers, removing every job that has not ended.
func (h *Hybrid) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	errL := h.local.Close(ctx)
	errR := h.remote.Close(ctx)
	h.merged.Wait()
	h.t.Close()
	if errL != nil {
		return fmt.Errorf("local: %w", errL)
	}
	if errR != nil {
		return fmt.Errorf("remote: %w", errR)
	}
	return nil
}
