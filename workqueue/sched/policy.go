package sched

import "github.com/rightsize/rightsize/lifecycle"

// FastAbort is the fast-abort policy (lifecycle.FastAbort), which the
// scheduler applies per category.
type FastAbort = lifecycle.FastAbort

// Stats are the running statistics of a category's task times
// (lifecycle.Stats).
type Stats = lifecycle.Stats

// Speculation configures speculative copies. When a worker has room that
// no waiting task can use, a task running longer than Multiplier times its
// category's mean task time gets a copy there; the first attempt to
// finish wins and the other is aborted. A copy goes only to a worker that
// has returned a result (it has proved it runs tasks), never to one the
// task was fast-aborted on, and gives its place back as soon as a waiting
// task needs it, so copies only ever use time that would otherwise be
// idle. This is what takes tasks back from a worker that holds them
// without running them, or runs them far slower than the others.
type Speculation struct {
	// Multiplier is how many category means a task may run before it is
	// copied (default 2; negative: never copy).
	Multiplier float64
	// MinSamples is how many tasks of the category must have finished
	// before any copy (default 3): the mean of fewer says little.
	MinSamples int
}

func (s Speculation) withDefaults() Speculation {
	if s.Multiplier == 0 {
		s.Multiplier = 2
	}
	if s.MinSamples <= 0 {
		s.MinSamples = 3
	}
	return s
}
