// Package lifecycle holds the policies every scheduler in rightsize applies
// to the jobs it runs — when a straggler is aborted (FastAbort, over the
// running Stats of finished jobs) and how often a failure is tried again
// (Retries) — so that the Work Queue scheduler, the distributed master,
// Makeflow and the worker factory decide by one rule, and each zero value
// means one thing everywhere.
//
// It holds no state about jobs and does no I/O: the schedulers (packages
// workqueue/sched, distmaster, makeflow, workqueue/factory) keep their jobs
// and ask these types what the policy says.
package lifecycle

import (
	"math"
	"time"
)

// FastAbort is the fast-abort policy: when a running task is a straggler.
// The Work Queue scheduler applies it to tasks per category, and the
// distributed master's tracker (package distmaster) to batch jobs, so that
// both abort by the same rule over the same statistics. A zero FastAbort
// is off.
type FastAbort struct {
	// Multiplier, if ≥ 1, aborts a task running longer than Multiplier
	// times the category's mean task time (CCTools' rule).
	Multiplier float64
	// Sigmas, if > 0, aborts a task running longer than the mean plus
	// Sigmas standard deviations (the seed's "three standard deviations"
	// with Sigmas = 3), but never before twice the mean, so that uniform
	// tasks with a tiny deviation are not aborted for noise.
	Sigmas float64
	// MinSamples is how many successful tasks of the category must have
	// finished before any abort (default 10).
	MinSamples int
	// MaxAborts is how many times one task may be fast-aborted (default
	// 3); after that it runs to completion wherever it is.
	MaxAborts int
	// BlockFor is how long a worker that tripped fast abort twice in a row
	// is kept out (default 5 minutes). The last worker that can run the
	// category's tasks is never kept out: a loaded machine makes every
	// task slow, and shutting out the only worker would stall the run.
	BlockFor time.Duration
}

// Enabled reports whether f aborts anything.
func (f FastAbort) Enabled() bool { return f.Multiplier >= 1 || f.Sigmas > 0 }

// WithDefaults returns f with the defaults of its zero fields filled in.
func (f FastAbort) WithDefaults() FastAbort {
	if f.MinSamples <= 0 {
		f.MinSamples = 10
	}
	if f.MaxAborts <= 0 {
		f.MaxAborts = 3
	}
	if f.BlockFor <= 0 {
		f.BlockFor = 5 * time.Minute
	}
	return f
}

// Limit returns how long a task that was already fast-aborted aborts times
// may run before it is a straggler, given st, the times of the finished
// tasks of its category. Each earlier abort raises the limit by one mean,
// as CCTools does, so that a task that is simply long is not killed for
// ever. ok is false when no limit applies: f is off, fewer than
// MinSamples tasks have finished, or the task has been aborted MaxAborts
// times.
func (f FastAbort) Limit(st Stats, aborts int) (limit time.Duration, ok bool) {
	f = f.WithDefaults()
	if !f.Enabled() || st.n < f.MinSamples || aborts >= f.MaxAborts {
		return 0, false
	}
	mean := st.mean
	secs := math.Inf(1)
	if f.Multiplier >= 1 {
		secs = mean * f.Multiplier
	}
	if f.Sigmas > 0 {
		secs = math.Min(secs, math.Max(mean+f.Sigmas*st.stddev(), 2*mean))
	}
	return seconds(secs + float64(aborts)*mean), true
}

// Stats are running statistics of task times: their count, mean and
// standard deviation. They are kept in Welford's online form, which stays
// accurate where the textbook sum of squares loses every digit to
// cancellation (many long tasks with a small spread). The zero value has
// no samples.
type Stats struct {
	n    int
	mean float64 // seconds
	m2   float64 // sum of squared deviations from the mean, seconds²
}

// Add adds one task time.
func (s *Stats) Add(d time.Duration) {
	x := d.Seconds()
	s.n++
	delta := x - s.mean
	s.mean += delta / float64(s.n)
	s.m2 += delta * (x - s.mean)
}

// N is the number of task times added.
func (s Stats) N() int { return s.n }

// Mean is their mean, 0 without samples.
func (s Stats) Mean() time.Duration { return seconds(s.mean) }

// StdDev is their sample standard deviation (the finished tasks are a
// sample of the times the category's tasks take), 0 below two samples.
func (s Stats) StdDev() time.Duration { return seconds(s.stddev()) }

func (s Stats) stddev() float64 {
	if s.n < 2 {
		return 0
	}
	return math.Sqrt(s.m2 / float64(s.n-1))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Retries is how many times a job that failed is tried again. Its zero
// value means the default of the scheduler it configures, which each
// documents (Makeflow's is none, as CCTools'; the distributed master's is
// 2; Work Queue re-queues a task that lost its worker 5 times); NoRetry
// means never; a positive n means up to n more times.
type Retries int

// NoRetry is the Retries that tries nothing again.
const NoRetry Retries = -1

// Limit returns how many more attempts r allows, with def the default of
// the scheduler asking.
func (r Retries) Limit(def int) int {
	switch {
	case r < 0:
		return 0
	case r == 0:
		return def
	}
	return int(r)
}
