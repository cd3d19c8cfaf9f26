package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Hybrid is a Driver that makes this machine one more worker of a
// cluster: it runs each job on a local driver while that has free slots,
// and on a remote one otherwise, and when local slots free it moves there
// the earliest jobs still waiting in the remote queue. A run placed on a
// cluster so starts at once, and never waits in a queue for work this
// machine could be doing.
//
// A job takes Resources.Cores slots (at least one), as on Local. A job
// asking for more than there are stays on the remote driver.
//
// A job is moved only while the remote driver reports it queued, and only
// if it accepts its removal; the remote's events for it are then dropped
// and the local driver's reported instead, so the caller sees one job with
// at most one Running event. A batch system may still start the job in the
// moment between the look and the removal: the command then starts there
// too, and is stopped there by the removal.
//
// Jobs run the same command on either side, with the same files, so
// Hybrid is for back ends on a filesystem this machine shares (SLURM, Grid
// Engine, HTCondor here). It does not check: with a driver that ships
// files (see FileShipper) jobs moved here would find none. A Work Queue
// master gets this machine's cores as a worker instead.
type Hybrid struct {
	local, remote Driver
	slots         int
	t             *Jobs
	merged        chan struct{} // closed when merge has returned

	mu       sync.Mutex
	jobs     map[string]*hybridJob // by Hybrid's ID, until final
	byLocal  map[string]*hybridJob // by the local driver's ID, until final
	byRemote map[string]*hybridJob // by the remote driver's ID, until final or moved
	used     int                   // local slots taken by jobs not final
	queued   []*hybridJob          // on remote, candidates for a move, oldest first
	seq      int
	closed   bool
	counts   HybridCounts
}

// HybridCounts say where a Hybrid's jobs ended.
type HybridCounts struct {
	// Local counts the jobs that ended on the local driver, moved ones
	// included, and those that failed because the local driver refused
	// them when they were moved.
	Local int
	// Remote counts the jobs that ended on the remote driver.
	Remote int
	// Moved counts the jobs taken from the remote queue to the local
	// driver.
	Moved int
}

type hybridJob struct {
	id      string
	job     *Job
	cores   int
	local   bool   // on the local driver
	under   string // its ID there
	removed bool   // by Remove or Close
}

var _ Driver = (*Hybrid)(nil)

// NewHybrid returns a Hybrid running jobs on local while they take no more
// than slots of its cores (local should have at least as many), and the
// others on remote. It owns both drivers: Close closes them. Their events
// must not be read by anyone else.
func NewHybrid(local Driver, slots int, remote Driver) *Hybrid {
	h := &Hybrid{
		local: local, remote: remote, slots: max(slots, 1),
		t:        NewJobs(),
		merged:   make(chan struct{}),
		jobs:     make(map[string]*hybridJob),
		byLocal:  make(map[string]*hybridJob),
		byRemote: make(map[string]*hybridJob),
	}
	go h.merge()
	return h
}

// Counts returns where the jobs that have ended so far ended.
func (h *Hybrid) Counts() HybridCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts
}

// Submit runs job on the local driver if it has enough free slots, else
// queues it on the remote driver. Its error says which refused the job. A
// job may be submitted again to the local driver when it is moved, so it
// must not be changed after Submit.
func (h *Hybrid) Submit(ctx context.Context, job *Job) (string, error) {
	// h.mu is held across the driver's Submit so that merge cannot see the
	// job's first events before the job is attached.
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return "", ErrClosed
	}
	j := &hybridJob{job: job, cores: max(job.Resources.Cores, 1)}
	j.local = h.used+j.cores <= h.slots
	d, side := h.remote, "remote"
	if j.local {
		d, side = h.local, "local"
	}
	under, err := d.Submit(ctx, job)
	if err != nil {
		return "", fmt.Errorf("%s: %w", side, err)
	}
	h.seq++
	j.id = "h" + strconv.Itoa(h.seq)
	if err := h.t.Add(j.id, Status{State: Queued, Submitted: time.Now()}); err != nil {
		// Not reached: the IDs are Hybrid's own, and h.t is closed only
		// after h.closed is set.
		d.Remove(ctx, under)
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
		h.used += j.cores
	} else {
		h.byRemote[under] = j
		h.queued = append(h.queued, j)
	}
}

// merge passes on both drivers' events, as Hybrid's, until both channels
// are closed.
func (h *Hybrid) merge() {
	defer close(h.merged)
	local, remote := h.local.Events(), h.remote.Events()
	for local != nil || remote != nil {
		select {
		case ev, ok := <-local:
			if !ok {
				local = nil
				continue
			}
			h.pass(ev, true)
		case ev, ok := <-remote:
			if !ok {
				remote = nil
				continue
			}
			h.pass(ev, false)
		}
	}
}

// pass reports ev, an event of the local driver's job or of the remote's,
// as an event of Hybrid's job, and moves queued jobs to the local slots it
// frees.
func (h *Hybrid) pass(ev Event, local bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	byID := h.byRemote
	if local {
		byID = h.byLocal
	}
	j, ok := byID[ev.ID]
	if !ok {
		// The remote's removal of a job moved to the local driver, or an
		// event after a final one.
		return
	}
	ev.ID = j.id
	// A move does not change when the caller submitted the job.
	ev.Submitted = time.Time{}
	if ev.State == Running {
		h.unqueue(j)
	}
	if ev.State.Final() {
		if j.removed {
			// The contract's, even if the command finished meanwhile.
			ev.Status = Status{State: Failed, Err: ErrRemoved, Started: ev.Started, Ended: ev.Ended}
		}
		delete(byID, j.under)
		delete(h.jobs, j.id)
		h.unqueue(j)
		if local {
			h.used -= j.cores
			h.counts.Local++
		} else {
			h.counts.Remote++
		}
	}
	h.t.Set(ev)
	if local && ev.State.Final() {
		h.moveQueued()
	}
}

// unqueue takes j off the candidates for a move. Called with h.mu held.
func (h *Hybrid) unqueue(j *hybridJob) {
	if i := slices.Index(h.queued, j); i >= 0 {
		h.queued = slices.Delete(h.queued, i, i+1)
	}
}

// moveQueued moves the oldest jobs still queued on the remote driver to
// the free local slots, passing over those that do not fit. A job the
// remote driver reports anything but queued, or will not remove, stays
// there for good. Called with h.mu held, which keeps the remote's events
// for the job (a Running one included) from being passed on meanwhile.
func (h *Hybrid) moveQueued() {
	ctx := context.Background()
	for i := 0; i < len(h.queued) && h.used < h.slots && !h.closed; {
		j := h.queued[i]
		if h.used+j.cores > h.slots {
			i++
			continue
		}
		h.queued = slices.Delete(h.queued, i, i+1)
		if st, err := h.remote.Status(j.under); err != nil || st.State != Queued {
			continue
		}
		if err := h.remote.Remove(ctx, j.under); err != nil {
			continue
		}
		// From here the remote's events for it (its removal) are dropped.
		delete(h.byRemote, j.under)
		j.local = true
		under, err := h.local.Submit(ctx, j.job)
		if err != nil {
			delete(h.jobs, j.id)
			h.counts.Local++
			h.t.Set(Event{ID: j.id, Status: Status{State: Failed, Ended: time.Now(),
				Err: fmt.Errorf("moving the job from the remote queue to local: %w", err)}})
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
	d, side := h.remote, "remote"
	if j.local {
		d, side = h.local, "local"
	}
	if err := d.Remove(ctx, j.under); err != nil {
		return fmt.Errorf("%s: %w", side, err)
	}
	j.removed = true
	h.unqueue(j)
	return nil
}

// Events returns the channel of every job's events.
func (h *Hybrid) Events() <-chan Event { return h.t.Events() }

// Close closes both drivers, which removes every job that has not ended,
// and waits for their channels to close.
func (h *Hybrid) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	for _, j := range h.jobs {
		j.removed = true
	}
	h.mu.Unlock()

	var errL, errR error
	var wg sync.WaitGroup
	wg.Go(func() { errL = h.local.Close(ctx) })
	wg.Go(func() { errR = h.remote.Close(ctx) })
	wg.Wait()
	<-h.merged

	// A driver drops the events its caller has not received when it
	// closes: the removals it reported may not have reached merge.
	h.mu.Lock()
	for _, j := range h.jobs {
		h.t.Set(Event{ID: j.id, Status: Status{State: Failed, Err: ErrRemoved, Ended: time.Now()}})
	}
	clear(h.jobs)
	h.mu.Unlock()
	h.t.Close()

	if errL != nil {
		errL = fmt.Errorf("local: %w", errL)
	}
	if errR != nil {
		errR = fmt.Errorf("remote: %w", errR)
	}
	return errors.Join(errL, errR)
}
