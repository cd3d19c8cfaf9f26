package batch

import (
	"fmt"
	"sync"
)

// Jobs is the bookkeeping every Driver shares, exported for drivers outside
// this package (batch/wq): the status of each job a driver has submitted,
// and the queue of events not yet received. A driver reports what it
// observes through Set; Jobs drops what would break the Driver contract
// (going back a state, a second final event) and never blocks the driver:
// events wait in an unbounded queue that one goroutine feeds to the channel
// Events returns. Its methods are safe for concurrent use.
type Jobs struct {
	out  chan Event
	wake chan struct{} // a token when queue gains an event
	done chan struct{} // closed by close
	quit chan struct{} // closed when the feeding goroutine has ended

	mu     sync.Mutex
	jobs   map[string]*Status
	queue  []Event
	closed bool
}

// NewJobs returns an empty Jobs, whose goroutine runs until Close.
func NewJobs() *Jobs {
	t := &Jobs{
		out:  make(chan Event),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
		quit: make(chan struct{}),
		jobs: make(map[string]*Status),
	}
	go t.feed()
	return t
}

// feed delivers queued events in order until close.
func (t *Jobs) feed() {
	defer close(t.quit)
	defer close(t.out)
	for {
		t.mu.Lock()
		if len(t.queue) == 0 {
			t.mu.Unlock()
			select {
			case <-t.wake:
				continue
			case <-t.done:
				return
			}
		}
		ev := t.queue[0]
		t.mu.Unlock()
		select {
		case t.out <- ev:
			t.mu.Lock()
			if len(t.queue) > 0 { // close may have emptied it meanwhile
				t.queue[0] = Event{} // let the tails go
				t.queue = t.queue[1:]
			}
			t.mu.Unlock()
		case <-t.done:
			return
		}
	}
}

// Add records a newly submitted job with its first status (Queued). It
// returns ErrClosed after Close, and an error if id is already known.
func (t *Jobs) Add(id string, st Status) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if _, dup := t.jobs[id]; dup {
		// A batch system that hands out an ID twice to live jobs would
		// make every later event ambiguous.
		return fmt.Errorf("batch system returned job ID %q twice", id)
	}
	s := st
	t.jobs[id] = &s
	return nil
}

// Set moves job ev.ID to ev's state and queues ev, if that is a step
// forward (queued → running → final). It reports whether it did.
func (t *Jobs) Set(ev Event) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.jobs[ev.ID]
	if !ok || st.State.Final() || ev.State <= st.State || t.closed {
		return false
	}
	if ev.Submitted.IsZero() {
		ev.Submitted = st.Submitted
	}
	if ev.Started.IsZero() {
		ev.Started = st.Started
	}
	*st = ev.Status
	t.queue = append(t.queue, ev)
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return true
}

// Status returns the last status of job id, or ErrUnknownJob.
func (t *Jobs) Status(id string) (Status, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.jobs[id]
	if !ok {
		return Status{}, fmt.Errorf("%w %q", ErrUnknownJob, id)
	}
	return *st, nil
}

// Events returns the channel of events, closed by Close.
func (t *Jobs) Events() <-chan Event { return t.out }

// Unfinished returns the IDs of the jobs that have no final event yet.
func (t *Jobs) Unfinished() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id, st := range t.jobs {
		if !st.State.Final() {
			ids = append(ids, id)
		}
	}
	return ids
}

// Close stops event delivery and closes the channel; queued events are
// dropped.
func (t *Jobs) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	t.queue = nil
	t.mu.Unlock()
	close(t.done)
	<-t.quit
}
