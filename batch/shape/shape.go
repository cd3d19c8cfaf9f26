// Package shape chooses the shape of a batch request — its cores and wall
// time — among candidates the user allows: the one predicted to finish
// first, as Cirne's Supercomputer AppLeS does for moldable jobs (seed 002,
// SA). The prediction assumes that no other job arrives and that every job
// runs for all of its wall time.
//
// Where the batch system's availability is known as a profile (periods
// with their free cores), each candidate is placed at its first fit in it
// (SAcb, Profile.Choose); where it is not, each candidate is simulated
// through a conservative-backfilling scheduler holding the jobs known
// (SAg, CB.Choose). The two agree on every state (the seed's Theorem 1).
// SLURM predicts a job's start itself (sbatch --test-only): Slurm asks it.
//
// For picks the chooser of a batch system, and Pick a request's shape
// (its candidates scaled to the workers asked for and cut to the room a
// maximum leaves, Request): the worker factory, the worker pool and the
// distributed master choose through them.
//
// The package does not submit anything, and knows nothing of the jobs a
// batch system holds beyond those it is told of.
package shape

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// A Shape is one batch request's cores and wall time.
type Shape struct {
	Cores int
	Wall  time.Duration
}

func (s Shape) String() string { return fmt.Sprintf("%dx%v", s.Cores, s.Wall) }

// Parse reads a list of shapes, CORESxWALL separated by commas ("4x2h,
// 8x1h,16x30m"); the wall time is a Go duration or whole minutes.
func Parse(list string) ([]Shape, error) {
	var out []Shape
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		c, w, ok := strings.Cut(f, "x")
		cores, err := strconv.Atoi(c)
		if !ok || err != nil || cores < 1 {
			return nil, fmt.Errorf("shape %q: want CORESxWALL, e.g. 8x1h", f)
		}
		wall, err := time.ParseDuration(w)
		if err != nil {
			m, merr := strconv.Atoi(w)
			if merr != nil {
				return nil, fmt.Errorf("shape %q: wall time %q is not a duration (1h30m) or minutes", f, w)
			}
			wall = time.Duration(m) * time.Minute
		}
		if wall <= 0 {
			return nil, fmt.Errorf("shape %q: wall time must be positive", f)
		}
		out = append(out, Shape{Cores: cores, Wall: wall})
	}
	if len(out) == 0 {
		return nil, errors.New("no shapes")
	}
	return out, nil
}

// Forever is the end of a profile's last period.
const Forever = time.Duration(math.MaxInt64)

// A Period is a span of time, from now, with Free cores free throughout.
type Period struct {
	Start, End time.Duration
	Free       int
}

// A Profile is an availability list: periods in time order, each starting
// where the previous ends, the last ending at Forever.
type Profile []Period

// FirstFit returns the earliest start at which s has its cores free for
// all of its wall time, or false if it never has. It tries each period's
// start, and holds the cores through every later period with at least as
// many free: not the seed's Fig. 5 loop, which holds the period's own free
// count and so misses a fit through periods with fewer free cores than it
// but enough for s.
func (p Profile) FirstFit(s Shape) (time.Duration, bool) {
	for i, f := range p {
		if f.Free < s.Cores {
			continue
		}
		end := addSat(f.Start, s.Wall)
		ok := true
		for _, g := range p[i:] {
			if g.Start >= end {
				break
			}
			if g.Free < s.Cores {
				ok = false
				break
			}
		}
		if ok {
			return f.Start, true
		}
	}
	return 0, false
}

// addSat is a+b, Forever where it would overflow.
func addSat(a, b time.Duration) time.Duration {
	if a > Forever-b {
		return Forever
	}
	return a + b
}

// A Choice is the candidate chosen: its index among the candidates, its
// shape, and when it is predicted to start and end, from now.
type Choice struct {
	Index         int
	Shape         Shape
	Start, Finish time.Duration
}

// Choose returns the candidate whose first fit in p finishes first (SAcb);
// of candidates that finish together, the one with fewer cores, then the
// first given. It fails if none ever fits.
func (p Profile) Choose(candidates []Shape) (Choice, error) {
	return earliest(candidates, func(s Shape) (time.Duration, error) {
		start, ok := p.FirstFit(s)
		if !ok {
			return 0, fmt.Errorf("%v never fits", s)
		}
		return start, nil
	})
}

// earliest returns the candidate that finishes first, by start, ties
// broken as Profile.Choose says. A candidate whose start cannot be
// predicted is left out; if none can be, the first error is returned.
func earliest(candidates []Shape, start func(Shape) (time.Duration, error)) (Choice, error) {
	best := Choice{Index: -1}
	var firstErr error
	for i, s := range candidates {
		st, err := start(s)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		c := Choice{Index: i, Shape: s, Start: st, Finish: addSat(st, s.Wall)}
		if best.Index < 0 || c.Finish < best.Finish || c.Finish == best.Finish && c.Shape.Cores < best.Shape.Cores {
			best = c
		}
	}
	if best.Index < 0 {
		if firstErr == nil {
			firstErr = errors.New("no candidate shapes")
		}
		return best, firstErr
	}
	return best, nil
}
