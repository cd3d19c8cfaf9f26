package jobs

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/workqueue/sched"
)

// trackerHarness drives a Tracker with logical time: jobs are named after
// their block and attempt ("b3.1"), so that scenarios read plainly.
type trackerHarness struct {
	t   *testing.T
	tr  *Tracker
	now time.Time
	ids map[string]bool
}

func newHarness(t *testing.T, cfg Config, blocks ...int) *trackerHarness {
	h := &trackerHarness{t: t, tr: New(cfg), now: time.Unix(1000, 0), ids: map[string]bool{}}
	h.tr.Add(blocks...)
	return h
}

// submitAll submits what Next hands out and returns the new job IDs.
func (h *trackerHarness) submitAll() []string {
	var ids []string
	for {
		b, attempt, ok := h.tr.Next()
		if !ok {
			return ids
		}
		id := "b" + strconv.Itoa(b) + "." + strconv.Itoa(attempt)
		if h.ids[id] {
			h.t.Fatalf("job %s handed out twice", id)
		}
		h.ids[id] = true
		h.tr.Submitted(b, id, h.now)
		h.tr.Started(id, h.now)
		ids = append(ids, id)
	}
}

func (h *trackerHarness) advance(d time.Duration) { h.now = h.now.Add(d) }

// tick returns the IDs of the jobs Tick removes now.
func (h *trackerHarness) tick() []string {
	var ids []string
	for _, s := range h.tr.Tick(h.now) {
		ids = append(ids, s.Job)
	}
	return ids
}

func TestTrackerRetriesThenGivesUp(t *testing.T) {
	tests := []struct {
		retries  lifecycle.Retries
		attempts int // jobs before the block is given up
	}{
		{0, 3}, // the default: two retries
		{-1, 1},
		{1, 2},
		{4, 5},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.retries), func(t *testing.T) {
			h := newHarness(t, Config{Retries: tt.retries}, 7)
			boom := errors.New("boom")
			for attempt := 1; ; attempt++ {
				ids := h.submitAll()
				if len(ids) != 1 || ids[0] != "b7."+strconv.Itoa(attempt-1) {
					t.Fatalf("attempt %d: submitted %v", attempt, ids)
				}
				o := h.tr.Ended(ids[0], h.now, boom)
				if !o.Known || o.Block != 7 || o.Attempts != attempt || !errors.Is(o.Err, boom) {
					t.Fatalf("attempt %d: outcome %+v", attempt, o)
				}
				if o.GaveUp {
					if attempt != tt.attempts {
						t.Fatalf("gave up after %d attempts, want %d", attempt, tt.attempts)
					}
					break
				}
				if !o.Retry || attempt >= tt.attempts {
					t.Fatalf("attempt %d: outcome %+v, want a retry", attempt, o)
				}
			}
			if !h.tr.Idle() {
				t.Error("not idle after giving up the only block")
			}
			c := h.tr.Counts()
			if c.Failed != 1 || c.Done != 0 || c.Jobs != tt.attempts || c.Retries != tt.attempts-1 {
				t.Errorf("counts %+v", c)
			}
		})
	}
}

func TestTrackerRetryThenDone(t *testing.T) {
	h := newHarness(t, Config{}, 1, 2, 3)
	ids := h.submitAll()
	if !slices.Equal(ids, []string{"b1.0", "b2.0", "b3.0"}) {
		t.Fatalf("submitted %v", ids)
	}
	if o := h.tr.Ended("b2.0", h.now, errors.New("lost")); !o.Retry {
		t.Fatalf("outcome %+v", o)
	}
	// The retry goes ahead of any block added later.
	h.tr.Add(4)
	if ids := h.submitAll(); !slices.Equal(ids, []string{"b2.1", "b4.0"}) {
		t.Fatalf("submitted %v, want the retry first", ids)
	}
	for _, id := range []string{"b1.0", "b3.0", "b2.1", "b4.0"} {
		if o := h.tr.Ended(id, h.now, nil); !o.Done || o.Err != nil {
			t.Fatalf("%s: %+v", id, o)
		}
	}
	if o := h.tr.Ended("b2.1", h.now, nil); o.Known {
		t.Errorf("a job that ended twice is known: %+v", o)
	}
	if !h.tr.Idle() || h.tr.Counts().Done != 4 || h.tr.Counts().Retries != 1 {
		t.Errorf("idle %v, counts %+v", h.tr.Idle(), h.tr.Counts())
	}
}

func TestTrackerSubmitFailureIsAnAttempt(t *testing.T) {
	h := newHarness(t, Config{Retries: 1}, 5)
	for i := 0; i < 2; i++ {
		b, _, ok := h.tr.Next()
		if !ok || b != 5 {
			t.Fatalf("Next = %d, %v", b, ok)
		}
		o := h.tr.SubmitFailed(b, errors.New("sbatch: socket timed out"))
		if i == 1 != o.GaveUp {
			t.Fatalf("attempt %d: %+v", i, o)
		}
	}
	if !h.tr.Idle() {
		t.Error("not idle")
	}
}

// A batch system that refuses MaxRefused submissions in a row halts the
// run; an accepted one in between, or a job's own missing file, does not
// count.
func TestTrackerRefusalsHalt(t *testing.T) {
	refused := errors.New("sbatch: error: Batch job submission failed: Unable to contact slurm controller")
	missing := &fs.PathError{Op: "open", Path: "items/7", Err: fs.ErrNotExist}
	cases := []struct {
		name string
		errs []error // nil: accepted
		halt int     // index of the submission that halts; -1: none
	}{
		{"three refusals in a row", []error{refused, refused, refused}, 2},
		{"an accepted job in between", []error{refused, refused, nil, refused, refused}, -1},
		{"a missing file is the block's", []error{refused, missing, refused, missing, refused}, 4},
		{"missing files never halt", []error{missing, missing, missing, missing}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			blocks := make([]int, len(tc.errs))
			for i := range blocks {
				blocks[i] = i
			}
			h := newHarness(t, Config{Retries: lifecycle.NoRetry}, blocks...)
			for i, err := range tc.errs {
				b, _, ok := h.tr.Next()
				if !ok {
					t.Fatalf("submission %d: nothing to submit", i)
				}
				if err == nil {
					h.tr.Submitted(b, fmt.Sprint("job", i), h.now)
					continue
				}
				o := h.tr.SubmitFailed(b, err)
				if o.Halt != (i == tc.halt) {
					t.Fatalf("submission %d: %+v; want Halt at %d", i, o, tc.halt)
				}
				if o.Halt && (o.Refused != 3 || o.GaveUp || h.tr.Counts().Failed != i) {
					t.Fatalf("halt: %+v, counts %+v; want 3 refusals, the block not given up", o, h.tr.Counts())
				}
			}
		})
	}
}

func TestTrackerMaxJobs(t *testing.T) {
	h := newHarness(t, Config{MaxJobs: 2}, 1, 2, 3, 4, 5)
	if ids := h.submitAll(); len(ids) != 2 {
		t.Fatalf("submitted %v with MaxJobs 2", ids)
	}
	h.tr.Ended("b1.0", h.now, nil)
	if ids := h.submitAll(); !slices.Equal(ids, []string{"b3.0"}) {
		t.Fatalf("after one ended, submitted %v", ids)
	}
	// A failure frees its slot too, and its retry takes it.
	h.tr.Ended("b2.0", h.now, errors.New("x"))
	if ids := h.submitAll(); !slices.Equal(ids, []string{"b2.1"}) {
		t.Fatalf("after a failure, submitted %v", ids)
	}
}

func TestTrackerFastAbort(t *testing.T) {
	cfg := Config{FastAbort: FastAbort{Multiplier: 3, MinSamples: 3, MaxAborts: 2}}
	h := newHarness(t, cfg, 0, 1, 2, 3, 4)
	h.submitAll()
	// No abort before MinSamples jobs have finished, however long.
	h.advance(10 * time.Second)
	if ids := h.tick(); ids != nil {
		t.Fatalf("aborted %v with no samples", ids)
	}
	for _, id := range []string{"b0.0", "b1.0", "b2.0"} {
		h.tr.Ended(id, h.now, nil) // 10 s each
	}
	// Block 3 was seen starting late (it queued): its clock starts then.
	h.tr.Started("b3.0", h.now.Add(-5*time.Second))
	// A job never seen starting is queued, never a straggler.
	h.tr.Add(9)
	b, _, _ := h.tr.Next()
	h.tr.Submitted(b, "queued", h.now.Add(-time.Hour))
	h.advance(21 * time.Second) // block 4 at 31 s > 3 × 10 s; block 3 at 26 s
	if ids := h.tick(); !slices.Equal(ids, []string{"b4.0"}) {
		t.Fatalf("aborted %v, want b4.0", ids)
	}
	if ids := h.submitAll(); !slices.Equal(ids, []string{"b4.1"}) {
		t.Fatalf("resubmitted %v", ids)
	}
	if o := h.tr.Ended("b4.0", h.now, errors.New("removed")); o.Known {
		t.Fatalf("the aborted job's end is known: %+v", o)
	}
	// The second attempt's limit is one mean higher: 40 s.
	h.advance(35 * time.Second)
	if ids := h.tick(); !slices.Equal(ids, []string{"b3.0"}) {
		t.Fatalf("aborted %v, want b3.0 (61 s) but not b4.1 (35 s)", ids)
	}
	h.submitAll()
	h.advance(6 * time.Second)
	if ids := h.tick(); !slices.Equal(ids, []string{"b4.1"}) {
		t.Fatalf("aborted %v, want b4.1 at 41 s", ids)
	}
	h.submitAll()
	// MaxAborts reached: block 4 now runs as long as it takes.
	h.advance(time.Hour)
	ids := h.tick()
	if !slices.Equal(ids, []string{"b3.1"}) {
		t.Fatalf("aborted %v, want only b3.1", ids)
	}
	if c := h.tr.Counts(); c.FastAborts != 4 || c.Retries != 0 {
		t.Errorf("counts %+v", c)
	}
	for _, id := range h.submitAll() {
		h.tr.Ended(id, h.now, nil)
	}
	h.tr.Ended("b4.2", h.now, nil)
	h.tr.Ended("queued", h.now, nil)
	if !h.tr.Idle() {
		t.Errorf("not idle; running %v", h.tr.Running())
	}
}

func TestTrackerFastAbortSigmas(t *testing.T) {
	// Mean 10 s, deviation 0: the limit is twice the mean, not the mean.
	h := newHarness(t, Config{FastAbort: FastAbort{Sigmas: 3, MinSamples: 2}}, 0, 1, 2)
	h.submitAll()
	h.advance(10 * time.Second)
	h.tr.Ended("b0.0", h.now, nil)
	h.tr.Ended("b1.0", h.now, nil)
	h.advance(9 * time.Second)
	if ids := h.tick(); ids != nil {
		t.Fatalf("aborted %v at 19 s", ids)
	}
	h.advance(2 * time.Second)
	if ids := h.tick(); !slices.Equal(ids, []string{"b2.0"}) {
		t.Fatalf("aborted %v at 21 s", ids)
	}
}

// TestTrackerStraggler: Tick says why it removes a job, by the same rule
// and statistics as Work Queue's scheduler (sched.FastAbort.Limit, with the
// sample standard deviation).
func TestTrackerStraggler(t *testing.T) {
	fa := FastAbort{Sigmas: 1, MinSamples: 3, MaxAborts: 2}
	h := newHarness(t, Config{FastAbort: fa}, 0, 1, 2, 3)
	h.submitAll()
	var st sched.Stats
	for i, secs := range []int{10, 20, 90} {
		d := time.Duration(secs) * time.Second
		h.tr.Ended(fmt.Sprintf("b%d.0", i), h.now.Add(d), nil)
		st.Add(d)
	}
	// Mean 40 s, sample deviation √1900 = 43.6 s: the limit is 83.6 s,
	// above the floor of twice the mean (the population deviation, 35.6 s,
	// would give the floor, 80 s).
	limit, _ := fa.Limit(st, 0)
	if want := 40 + math.Sqrt(1900); math.Abs(limit.Seconds()-want) > 1e-6 {
		t.Fatalf("limit %v, want %.3fs", limit, want)
	}
	h.advance(limit - time.Second)
	if got := h.tr.Tick(h.now); got != nil {
		t.Fatalf("removed %+v before the limit", got)
	}
	h.advance(2 * time.Second)
	got := h.tr.Tick(h.now)
	want := []Straggler{{Job: "b3.0", Block: 3, Ran: limit + time.Second, Limit: limit, Mean: 40 * time.Second, Abort: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("Tick: %+v, want %+v", got, want)
	}
	h.submitAll()
	h.advance(limit + 40*time.Second + time.Second) // one mean more
	if got := h.tr.Tick(h.now); len(got) != 1 || got[0].Abort != 2 || !got[0].Final {
		t.Fatalf("second abort: %+v, want the final one", got)
	}
}

func TestTrackerFastAbortOff(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	h.submitAll()
	h.advance(time.Second)
	h.tr.Ended("b0.0", h.now, nil)
	h.advance(1000 * time.Hour)
	if ids := h.tick(); ids != nil {
		t.Fatalf("aborted %v with fast abort off", ids)
	}
}

func TestTrackerAddTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	tr := New(Config{})
	tr.Add(1)
	tr.Add(1)
}

// The master's capacity bounds the jobs out: jobs of 10 s on which the
// master spends 1 s each keep about 10 busy (Eq. 4.5), whatever MaxJobs
// says, once ten have finished to measure it.
func TestTrackerCapacityLimit(t *testing.T) {
	blocks := make([]int, 100)
	for i := range blocks {
		blocks[i] = i
	}
	h := newHarness(t, Config{MaxJobs: 50}, blocks...)
	if ids := h.submitAll(); len(ids) != 50 {
		t.Fatalf("%d jobs out before the capacity is known, want MaxJobs = 50", len(ids))
	}
	if h.tr.Limit() != 50 {
		t.Fatalf("limit %d before any job finished", h.tr.Limit())
	}
	h.advance(10 * time.Second)
	for i := range 20 {
		id := "b" + strconv.Itoa(i) + ".0"
		h.tr.Spent(id, time.Second)
		h.tr.Ended(id, h.now, nil)
	}
	if got := h.tr.Limit(); got != 10 {
		t.Errorf("limit %d after jobs of 10 s costing the master 1 s each, want 10", got)
	}
	if ids := h.submitAll(); len(ids) != 0 {
		t.Errorf("%d more jobs submitted with 30 out and a limit of 10", len(ids))
	}
}
