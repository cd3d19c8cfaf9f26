package batch

import (
	"fmt"
	"sync"
)

// table is the part every driver shares: the status of each job it has
// submitted, and the queue of events not yet received. Drivers report what
// they observe through set; the table drops what would break the contract
// (going back a state, a second final event) and never blocks the driver:
// events wait in an unbounded queue that one goroutine feeds to the channel.
type table struct {
	out  chan Event
	wake chan struct{} // a token when queue gains an event
	done chan struct{} // closed by close
	quit chan struct{} // closed when the feeding goroutine has ended

	mu     sync.Mutex
	jobs   map[string]*Status
	queue  []Event
	closed bool
}

func newTable() *table {
	t := &table{
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
func (t *table) feed() {
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

// add records a newly submitted job.
func (t *table) add(id string, st Status) error {
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

// set moves job id to ev's state and queues ev, if that is a step forward
// (queued → running → final). It reports whether it did.
func (t *table) set(ev Event) bool {
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

// status returns the last status of job id.
func (t *table) status(id string) (Status, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.jobs[id]
	if !ok {
		return Status{}, fmt.Errorf("%w %q", ErrUnknownJob, id)
	}
	return *st, nil
}

// close stops event delivery and closes the channel; queued events are
// dropped.
func (t *table) close() {
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
