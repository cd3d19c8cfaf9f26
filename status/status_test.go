package status

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// clock is a logical clock for the tracker.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newTest(c *clock) *Tracker          { return newAt("makeflow", "wf.mf", "rules", c.now) }
func approx(a, b float64) bool           { return a-b < 1e-9 && b-a < 1e-9 }

func TestRateAndETA(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	tr := newTest(c)
	if s := tr.Snapshot(); s.Rate != 0 || s.ETA != -1 {
		t.Fatalf("before any progress: rate %v, ETA %v", s.Rate, s.ETA)
	}
	c.advance(10 * time.Second)
	tr.Progress(100, 20, 4, 0)
	// One sample: the rate since the start, 20 in 10 s.
	if s := tr.Snapshot(); !approx(s.Rate, 2) || !approx(s.ETA, 40) || s.Elapsed != 10 {
		t.Errorf("first sample: rate %v, ETA %v, elapsed %v", s.Rate, s.ETA, s.Elapsed)
	}
	// The rate follows the last minute: 2/s for a minute, then 10/s.
	for range 6 {
		c.advance(10 * time.Second)
		s := tr.Snapshot()
		tr.Progress(100, s.Done+20, 4, 0)
	}
	for range 7 {
		c.advance(time.Second)
		s := tr.Snapshot()
		tr.Progress(1000, s.Done+10, 4, 0)
	}
	s := tr.Snapshot()
	if s.Rate < 2 || s.Rate > 10 {
		t.Errorf("rate %v: want between the old 2/s and the new 10/s", s.Rate)
	}
	for range 70 {
		c.advance(time.Second)
		s := tr.Snapshot()
		tr.Progress(1000, s.Done+10, 4, 0)
	}
	if s := tr.Snapshot(); !approx(s.Rate, 10) || !approx(s.ETA, float64(1000-s.Done)/10) {
		t.Errorf("after a minute at 10/s: rate %v, ETA %v (done %d)", s.Rate, s.ETA, s.Done)
	}
	// Failed units are not left to do.
	tr.Progress(1000, 990, 0, 10)
	if s := tr.Snapshot(); s.ETA != 0 {
		t.Errorf("nothing left: ETA %v", s.ETA)
	}
}

func TestFinishStopsTheClock(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	tr := newTest(c)
	c.advance(5 * time.Second)
	tr.Progress(3, 2, 0, 1)
	tr.Fail(Failure{Name: "rule 2", Status: "exit 1", Stderr: "no such file"})
	tr.Finish(errors.New("1 rule failed"))
	c.advance(time.Hour)
	s := tr.Snapshot()
	if !s.Finished || s.Error != "1 rule failed" || s.Elapsed != 5 || len(s.Failures) != 1 || s.Failures[0].Stderr != "no such file" {
		t.Errorf("finished: %+v", s)
	}
}

// TestRefreshedWorkersOutliveTheRun: the workers a refresh lists are asked
// for while the run goes, and kept as they were at its end.
func TestRefreshedWorkersOutliveTheRun(t *testing.T) {
	tr := newTest(&clock{time.Unix(0, 0)})
	asked := 0
	tr.SetRefresh(func(s *Snapshot) {
		asked++
		s.Workers = append(s.Workers, Worker{Name: fmt.Sprintf("worker seen %d times", asked), Cores: 4})
		s.Capacity = float64(asked)
	})
	if s := tr.Snapshot(); len(s.Workers) != 1 || s.Workers[0].Name != "worker seen 1 times" {
		t.Fatalf("running: %+v", s.Workers)
	}
	tr.Finish(nil)
	for range 2 {
		s := tr.Snapshot()
		if len(s.Workers) != 1 || s.Workers[0].Name != "worker seen 2 times" || s.Capacity != 2 || asked != 2 {
			t.Errorf("finished: workers %+v, capacity %v, asked %d times", s.Workers, s.Capacity, asked)
		}
	}
}

func TestFailuresBounded(t *testing.T) {
	tr := newTest(&clock{time.Unix(0, 0)})
	for range maxFailures + 5 {
		tr.Fail(Failure{Name: "x"})
	}
	if n := len(tr.Snapshot().Failures); n != maxFailures {
		t.Errorf("%d failures kept, want %d", n, maxFailures)
	}
}
