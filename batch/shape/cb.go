package shape

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// CB is a conservative-backfilling scheduler (seed 002 §2) on a machine of
// Cores cores, on logical time: each job gets, when it arrives, a
// reservation at the earliest time its cores are free for all its
// requested time, given every reservation before it; when a job ends
// early, the waiting jobs, in submission order, each move to their
// earliest fit. It is the model SAg simulates candidates through where no
// profile of the batch system is known.
//
// A CB is not safe for concurrent use.
type CB struct {
	cores int
	now   time.Duration
	jobs  []*cbJob // not ended, in submission order
	seq   int
}

type cbJob struct {
	id      int
	cores   int
	req     time.Duration // requested (wall) time
	run     time.Duration // time it really runs
	start   time.Duration // reserved, or actual once started
	started bool
}

func (j *cbJob) end() time.Duration { return addSat(j.start, j.req) }

// NewCB returns an idle machine of cores cores at time 0.
func NewCB(cores int) *CB { return &CB{cores: cores} }

// Now returns the scheduler's time.
func (c *CB) Now() time.Duration { return c.now }

// Submit queues a job of cores cores that asks for wall time req and runs
// for run (at most req), at the current time, and returns its ID and
// reserved start.
func (c *CB) Submit(cores int, req, run time.Duration) (int, time.Duration, error) {
	if cores < 1 || cores > c.cores || req <= 0 {
		return 0, 0, fmt.Errorf("job of %d cores for %v on %d cores", cores, req, c.cores)
	}
	c.seq++
	j := &cbJob{id: c.seq, cores: cores, req: req, run: min(max(run, 0), req)}
	j.start = c.fit(j, c.now)
	c.jobs = append(c.jobs, j)
	c.startDue()
	return j.id, j.start, nil
}

// fit returns the earliest time from t at which j's cores are free for its
// requested time, given every other job's reservation.
func (c *CB) fit(j *cbJob, t time.Duration) time.Duration {
	// A fit starts at t or where a reservation ends.
	starts := []time.Duration{t}
	for _, o := range c.jobs {
		if o != j && o.end() > t {
			starts = append(starts, o.end())
		}
	}
	slices.Sort(starts)
	for _, s := range starts {
		if c.freeThrough(j, s, addSat(s, j.req)) >= j.cores {
			return s
		}
	}
	panic("unreachable: every job fits once all others end")
}

// freeThrough returns the fewest cores free in [from, to), not counting j.
func (c *CB) freeThrough(j *cbJob, from, to time.Duration) int {
	// The free count changes only where a reservation starts.
	points := []time.Duration{from}
	for _, o := range c.jobs {
		if o != j && o.start > from && o.start < to {
			points = append(points, o.start)
		}
	}
	least := c.cores
	for _, p := range points {
		used := 0
		for _, o := range c.jobs {
			if o != j && o.start <= p && p < o.end() {
				used += o.cores
			}
		}
		least = min(least, c.cores-used)
	}
	return least
}

// startDue marks the jobs whose reservation has come as started.
func (c *CB) startDue() {
	for _, j := range c.jobs {
		if !j.started && j.start <= c.now {
			j.started = true
		}
	}
}

// Advance runs the machine until t: jobs start at their reservations and
// end after their run time; each early end lets the waiting jobs move up.
func (c *CB) Advance(t time.Duration) {
	for {
		next, j := c.nextEnd()
		if j == nil || next > t {
			break
		}
		c.now = next
		c.startDue()
		c.finish(j)
	}
	c.now = max(c.now, t)
	c.startDue()
}

// nextEnd returns the job that ends next (started or not) and when.
func (c *CB) nextEnd() (time.Duration, *cbJob) {
	var first *cbJob
	var at time.Duration
	for _, j := range c.jobs {
		if e := addSat(j.start, j.run); first == nil || e < at {
			first, at = j, e
		}
	}
	return at, first
}

// finish ends j at the current time and compresses the schedule.
func (c *CB) finish(j *cbJob) {
	c.jobs = slices.DeleteFunc(c.jobs, func(o *cbJob) bool { return o == j })
	if j.run == j.req {
		return // as reserved: nothing can move up
	}
	for _, o := range c.jobs {
		if !o.started {
			o.start = min(o.start, c.fit(o, c.now))
		}
	}
	c.startDue()
}

// Profile returns the machine's availability from now, as the
// reservations stand: what SAcb places candidates in.
func (c *CB) Profile() Profile {
	points := []time.Duration{c.now}
	for _, j := range c.jobs {
		for _, p := range []time.Duration{j.start, j.end()} {
			if p > c.now {
				points = append(points, p)
			}
		}
	}
	slices.Sort(points)
	points = slices.Compact(points)
	var out Profile
	for i, p := range points {
		end := Forever
		if i+1 < len(points) {
			end = points[i+1]
		}
		used := 0
		for _, j := range c.jobs {
			if j.start <= p && p < j.end() {
				used += j.cores
			}
		}
		free := c.cores - used
		if n := len(out); n > 0 && out[n-1].Free == free {
			out[n-1].End = end
			continue
		}
		out = append(out, Period{Start: p - c.now, End: end - min(end, c.now), Free: free})
	}
	if n := len(out); n > 0 {
		out[n-1].End = Forever
	}
	return out
}

// clone returns a copy of c in which every job runs for all of its
// requested time, as SAg assumes.
func (c *CB) clone() *CB {
	d := &CB{cores: c.cores, now: c.now, seq: c.seq}
	for _, j := range c.jobs {
		k := *j
		k.run = k.req
		d.jobs = append(d.jobs, &k)
	}
	return d
}

// Choose returns the candidate that finishes first when each is submitted
// now to a copy of the machine in which every job runs for all its
// requested time and no other job arrives (SAg), ties broken as
// Profile.Choose breaks them. Times are from now.
func (c *CB) Choose(candidates []Shape) (Choice, error) {
	return earliest(candidates, func(s Shape) (time.Duration, error) {
		d := c.clone()
		id, _, err := d.Submit(s.Cores, s.Wall, s.Wall)
		if err != nil {
			return 0, err
		}
		cand := d.jobs[slices.IndexFunc(d.jobs, func(j *cbJob) bool { return j.id == id })]
		// Run the copy until the candidate has ended.
		for slices.Contains(d.jobs, cand) {
			next, j := d.nextEnd()
			if j == nil {
				return 0, errors.New("the machine stopped before the candidate ended")
			}
			d.Advance(next)
		}
		return cand.start - c.now, nil
	})
}
