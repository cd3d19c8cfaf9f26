// Package status shows a run while it goes: a Tracker keeps what a tool
// reports of its run (progress, workers, the model's prediction,
// failures), and Handler serves it over HTTP as a page that refreshes
// itself (/), the same data as JSON (/status) and Prometheus metrics
// (/metrics). The page needs no network beyond the run's own server: its
// style and script are inline.
//
// A tool creates a Tracker, updates it as its run goes (Update, Progress,
// Fail) and serves it with Serve, which binds to the loopback interface
// unless an address names another.
package status

import (
	"math"
	"slices"
	"sync"
	"time"
)

// A Snapshot is the state of a run at one moment, as /status sends it.
type Snapshot struct {
	Tool  string `json:"tool"`  // allpairs, wavefront, makeflow
	Title string `json:"title"` // what runs: the workflow, the problem
	Unit  string `json:"unit"`  // what is counted: rules, cells

	Started time.Time `json:"started"`
	Now     time.Time `json:"now"`
	Elapsed float64   `json:"elapsed_seconds"`

	Total   int64 `json:"total"`
	Done    int64 `json:"done"`
	Running int64 `json:"running"`
	Failed  int64 `json:"failed"`
	// Rate is units done per second over the last minute or so; ETA the
	// seconds left at that rate (-1 when it cannot be said yet).
	Rate float64 `json:"rate"`
	ETA  float64 `json:"eta_seconds"`

	// Where it runs, and what placement predicted for the whole run (0:
	// no prediction).
	Mode      string  `json:"mode,omitempty"`
	Backend   string  `json:"backend,omitempty"`
	Predicted float64 `json:"predicted_seconds,omitempty"`

	Workers []Worker `json:"workers"`
	// Capacity is how many workers a Work Queue master could keep busy,
	// from its recent tasks (seed 000's Eq. 4.5); 0 where not known.
	Capacity float64   `json:"capacity,omitempty"`
	Failures []Failure `json:"failures"`

	// Picture is the path, on this server, of a picture of the run's
	// progress (Wavefront), or "".
	Picture string `json:"picture,omitempty"`

	Finished bool   `json:"finished"`
	Error    string `json:"error,omitempty"` // why it ended, if it failed
}

// A Worker is one place the run's work goes: a Work Queue worker, or this
// machine's cores.
type Worker struct {
	Name       string  `json:"name"`
	Cores      float64 `json:"cores"`
	Running    int     `json:"running"`
	Completed  int     `json:"completed"`
	FastAborts int     `json:"fast_aborts,omitempty"`
	// Count is how many workers the row stands for, when a run with very
	// many lists the last of them in one row; 0 means one.
	Count int `json:"count,omitempty"`
}

// A Failure is a unit of work that failed for good.
type Failure struct {
	Name   string `json:"name"`   // the rule or block
	Status string `json:"status"` // how it ended
	Stderr string `json:"stderr,omitempty"`
}

// maxFailures bounds the failures a snapshot lists; Failed counts them all.
const maxFailures = 50

// rateWindow is how far back the rate looks.
const rateWindow = time.Minute

// A Tracker holds a run's status. Its methods may be called from any
// goroutine. The zero value is not usable; use New.
type Tracker struct {
	now func() time.Time

	mu      sync.Mutex
	snap    Snapshot
	history []sample // done over time, for the rate
	picture func() ([]byte, error)
	refresh func(*Snapshot)
}

type sample struct {
	at   time.Time
	done int64
}

// New returns a tracker for tool's run of title, counting unit, started
// now.
func New(tool, title, unit string) *Tracker {
	return newAt(tool, title, unit, time.Now)
}

func newAt(tool, title, unit string, now func() time.Time) *Tracker {
	t := &Tracker{now: now}
	t.snap = Snapshot{Tool: tool, Title: title, Unit: unit, Started: now(), ETA: -1}
	return t
}

// Update changes the snapshot under the tracker's lock: for what the
// other methods do not set (where it runs, the workers).
func (t *Tracker) Update(f func(*Snapshot)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.snap)
}

// Progress sets the counts: of total units, done are done, running run
// and failed have failed for good.
func (t *Tracker) Progress(total, done, running, failed int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.snap.Total, t.snap.Done, t.snap.Running, t.snap.Failed = total, done, running, failed
	t.history = append(t.history, sample{now, done})
	// Keep one sample older than the window, to measure across it.
	i := 0
	for i+1 < len(t.history) && now.Sub(t.history[i+1].at) > rateWindow {
		i++
	}
	t.history = slices.Delete(t.history, 0, i)
}

// Fail records a unit that failed for good.
func (t *Tracker) Fail(f Failure) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.snap.Failures) < maxFailures {
		t.snap.Failures = append(t.snap.Failures, f)
	}
}

// Finish marks the run ended, with err if it failed.
func (t *Tracker) Finish(err error) {
	// The page goes on showing the workers as they were at the end,
	// when there is no one left to ask.
	last := t.Snapshot()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refresh != nil {
		t.snap.Workers, t.snap.Capacity = last.Workers, last.Capacity
	}
	t.snap.Finished, t.snap.Now = true, t.now() // its clock stops
	if err != nil {
		t.snap.Error = err.Error()
	}
}

// SetRefresh makes f complete each snapshot as it is taken, outside the
// tracker's lock: for what is cheaper to ask for when someone looks (a
// master's workers) than to keep up to date.
func (t *Tracker) SetRefresh(f func(*Snapshot)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refresh = f
}

// SetPicture makes draw the run's progress picture, a PNG served at
// /picture.png.
func (t *Tracker) SetPicture(draw func() ([]byte, error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.picture = draw
	t.snap.Picture = "picture.png"
}

// Snapshot returns the run's status now.
func (t *Tracker) Snapshot() Snapshot {
	t.mu.Lock()
	s := t.snap
	s.Workers = slices.Clone(s.Workers)
	s.Failures = slices.Clone(s.Failures)
	if !s.Finished {
		s.Now = t.now()
	}
	s.Elapsed = s.Now.Sub(s.Started).Seconds()
	s.Rate, s.ETA = t.rate(s)
	refresh := t.refresh
	t.mu.Unlock()
	if refresh != nil && !s.Finished {
		refresh(&s)
	}
	return s
}

// rate returns units per second over the recent samples, and the seconds
// left at that rate.
func (t *Tracker) rate(s Snapshot) (rate, eta float64) {
	if len(t.history) == 0 {
		return 0, -1
	}
	first, last := t.history[0], t.history[len(t.history)-1]
	if len(t.history) == 1 {
		// One sample: the rate since the start.
		first = sample{s.Started, 0}
	}
	span := last.at.Sub(first.at).Seconds()
	if span <= 0 || last.done <= first.done {
		return 0, -1
	}
	rate = float64(last.done-first.done) / span
	left := float64(s.Total - s.Done - s.Failed)
	if left <= 0 {
		return rate, 0
	}
	return rate, math.Round(left/rate*10) / 10
}
