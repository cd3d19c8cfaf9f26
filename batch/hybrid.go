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
// With Hold, a job the local slots cannot take at once is first held
// here, and sent to the remote driver only once this machine is not
// expected to start it within half the remote's dispatch latency
// (HybridHold): a run of short jobs then never pays a batch system's
// submission and removal for jobs this machine's cores finish first. The
// half is a hedge against the estimate: a job sent that the local slots
// reach before the remote starts it is still moved here.
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

	// With Hold: the jobs held here, oldest first; the local jobs'
	// mean run time (0 before one ends) and start times; the timer
	// that looks at the held jobs again.
	hold      HybridHold
	held      []*hybridJob
	localMean time.Duration
	started   map[*hybridJob]time.Time
	wake      *time.Timer
}

// HybridHold is when a Hybrid sends a job to the remote driver rather than
// holding it until a local slot frees.
type HybridHold struct {
	// Dispatch is the remote driver's latency from submission to start:
	// a job this machine is expected to start within half of it is held
	// here. 0 sends every job the local slots cannot take at once.
	Dispatch time.Duration
	// RemoteSlots, if positive, is how many jobs the remote driver can
	// run at once: no more are sent to it at a time, the others held.
	RemoteSlots int
	// Mean, if known, is a local job's expected time until one ends
	// (then their moving mean takes over). Unknown (0), the time the
	// running ones have taken so far stands for it, and the first jobs
	// go to the remote driver only once that is long enough.
	Mean time.Duration
}

// firstRemote returns the position (0 the oldest) of the first of n held
// jobs that goes to the remote driver, n if none, when slots local slots
// each end a job every mean: the job at position pos would wait here for
// pos/slots+1 of them, so it goes once that is longer than dispatch.
func firstRemote(n, slots int, mean, dispatch time.Duration) int {
	if mean <= 0 {
		return n
	}
	// (pos/slots+1)·mean > dispatch ⇔ pos/slots ≥ ⌊dispatch/mean⌋.
	waits := dispatch / mean
	if waits >= time.Duration(n/slots+1) {
		return n
	}
	return min(n, int(waits)*slots)
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
	under   string // its ID there; "" while held
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
		started:  make(map[*hybridJob]time.Time),
	}
	go h.merge()
	return h
}

// Hold sets when h sends jobs to the remote driver; call it before the
// first Submit.
func (h *Hybrid) Hold(p HybridHold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = p
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
	// Held if the local slots could take it once free, and there is a
	// wait to weigh against the remote's.
	held := !j.local && h.hold.Dispatch > 0 && j.cores <= h.slots
	var under string
	if held {
		// Checked now, as a driver would: the caller learns of a bad
		// job from Submit, not from an event after the hold.
		if _, err := prepareShared(job); err != nil {
			return "", fmt.Errorf("local: %w", err)
		}
	} else {
		d, side := h.remote, "remote"
		if j.local {
			d, side = h.local, "local"
		}
		var err error
		if under, err = d.Submit(ctx, job); err != nil {
			return "", fmt.Errorf("%s: %w", side, err)
		}
	}
	h.seq++
	j.id = "h" + strconv.Itoa(h.seq)
	if err := h.t.Add(j.id, Status{State: Queued, Submitted: time.Now()}); err != nil {
		// Not reached: the IDs are Hybrid's own, and h.t is closed only
		// after h.closed is set.
		if !held {
			h.sideOf(j).Remove(ctx, under)
		}
		return "", err
	}
	h.jobs[j.id] = j
	if held {
		h.held = append(h.held, j)
		h.review(time.Now())
		return j.id, nil
	}
	h.attach(j, under)
	return j.id, nil
}

// sideOf returns the driver that has j.
func (h *Hybrid) sideOf(j *hybridJob) Driver {
	if j.local {
		return h.local
	}
	return h.remote
}

// review sends to the remote driver, at now, the held jobs this machine
// is not expected to start within half its dispatch latency, oldest first as
// far as HybridHold.RemoteSlots allows, and sets the timer for the next
// look while jobs are held. The local jobs' mean is never taken as less
// than the time the running ones have taken so far: the longer they run,
// the more jobs go. Called with h.mu held.
func (h *Hybrid) review(now time.Time) {
	if h.wake != nil {
		h.wake.Stop()
		h.wake = nil
	}
	if h.closed || len(h.held) == 0 {
		return
	}
	oldest := now
	for _, at := range h.started {
		if at.Before(oldest) {
			oldest = at
		}
	}
	first := 0 // the oldest job to send; those after it wait longer
	if len(h.started) > 0 {
		mean := h.localMean
		if mean == 0 {
			mean = h.hold.Mean
		}
		first = firstRemote(len(h.held), h.slots, max(mean, now.Sub(oldest)), h.hold.Dispatch/2)
	}
	n := len(h.held) - first
	if h.hold.RemoteSlots > 0 {
		n = max(0, min(n, h.hold.RemoteSlots-len(h.byRemote)))
	}
	send := slices.Clone(h.held[first : first+n])
	h.held = slices.Delete(h.held, first, first+n)
	ctx := context.Background()
	for _, j := range send {
		under, err := h.remote.Submit(ctx, j.job)
		if err != nil {
			delete(h.jobs, j.id)
			h.counts.Remote++
			h.t.Set(Event{ID: j.id, Status: Status{State: Failed, Ended: now, Err: fmt.Errorf("remote: %w", err)}})
			continue
		}
		h.attach(j, under)
	}
	if len(h.held) == 0 || len(h.started) == 0 || n < len(h.held)-first {
		// Nothing held, or held for the remote's room: a job's end
		// looks again.
		return
	}
	// The running jobs' time grows: look again when it sends the newest
	// job held.
	k := time.Duration((len(h.held)-1)/h.slots + 1)
	h.wake = time.AfterFunc(oldest.Add(h.hold.Dispatch/2/k+1).Sub(now), func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.review(time.Now())
	})
}

// takeHeld starts the oldest held jobs on the free local slots, passing
// over those that do not fit. Called with h.mu held.
func (h *Hybrid) takeHeld() {
	h.toLocal(&h.held, nil, "local")
}

// attach records that j is now under on its side. Called with h.mu held.
func (h *Hybrid) attach(j *hybridJob, under string) {
	j.under = under
	if j.local {
		h.byLocal[under] = j
		h.used += j.cores
		h.started[j] = time.Now()
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
			if at, ok := h.started[j]; ok && !j.removed {
				// A moving mean: the jobs' times may change over a run.
				took := time.Since(at)
				if h.localMean == 0 {
					h.localMean = took
				} else {
					h.localMean += (took - h.localMean) / 4
				}
			}
			delete(h.started, j)
		} else {
			h.counts.Remote++
		}
	}
	h.t.Set(ev)
	if ev.State.Final() {
		if local {
			// Held jobs first: they cost no removal from the remote.
			h.takeHeld()
			h.moveQueued()
		}
		h.review(time.Now())
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
	h.counts.Moved += h.toLocal(&h.queued, func(j *hybridJob) bool {
		if st, err := h.remote.Status(j.under); err != nil || st.State != Queued {
			return false
		}
		if err := h.remote.Remove(context.Background(), j.under); err != nil {
			return false
		}
		// From here the remote's events for it (its removal) are dropped.
		delete(h.byRemote, j.under)
		return true
	}, "moving the job from the remote queue to local")
}

// toLocal starts on the free local slots the oldest jobs of *from that
// fit, taking each off *from, and returns how many it started; leave, if
// not nil, first says whether a job may leave where it is (and does what
// that takes). A job the local driver refuses fails, with what in its
// error. Called with h.mu held.
func (h *Hybrid) toLocal(from *[]*hybridJob, leave func(*hybridJob) bool, what string) int {
	ctx := context.Background()
	started := 0
	for i := 0; i < len(*from) && h.used < h.slots && !h.closed; {
		j := (*from)[i]
		if h.used+j.cores > h.slots {
			i++
			continue
		}
		*from = slices.Delete(*from, i, i+1)
		if leave != nil && !leave(j) {
			continue
		}
		j.local = true
		under, err := h.local.Submit(ctx, j.job)
		if err != nil {
			delete(h.jobs, j.id)
			h.counts.Local++
			h.t.Set(Event{ID: j.id, Status: Status{State: Failed, Ended: time.Now(), Err: fmt.Errorf("%s: %w", what, err)}})
			continue
		}
		h.attach(j, under)
		started++
	}
	return started
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
	if i := slices.Index(h.held, j); i >= 0 {
		h.held = slices.Delete(h.held, i, i+1)
		delete(h.jobs, j.id)
		h.t.Set(Event{ID: j.id, Status: Status{State: Failed, Err: ErrRemoved, Ended: time.Now()}})
		return nil
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
	if h.wake != nil {
		h.wake.Stop()
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
