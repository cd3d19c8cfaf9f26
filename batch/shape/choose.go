package shape

import (
	"context"
	"fmt"
	"slices"

	"github.com/rightsize/rightsize/batch"
)

// A Chooser picks, among candidate requests, the one predicted to finish
// first: Slurm, Free, First, Profile.Chooser.
type Chooser interface {
	Choose(ctx context.Context, candidates []Shape) (Choice, error)
}

// For returns the chooser for the batch system of type kind (one of
// batch.Kinds) that d drives: on slurm, SLURM's own prediction (sbatch
// --test-only, with the driver's further submit options args); on a
// system that says what it has free (batch.FreeReporter, as local), a
// conservative-backfilling model of its free cores (Free); elsewhere
// the first candidate (First). The factory, the pool and the distributed
// master choose so.
func For(kind string, d batch.Driver, args []string) Chooser {
	if kind == "slurm" {
		return Slurm{Args: args}
	}
	if fr, ok := d.(batch.FreeReporter); ok {
		return Free{fr}
	}
	return First{}
}

// Free is SAg on a model of a batch system: a machine of the cores it
// says it has free now, holding no job, so that a candidate wider than
// those waits for them all (CB). A system that cannot say gets its first
// candidate.
type Free struct{ D batch.FreeReporter }

// Choose implements Chooser.
func (f Free) Choose(ctx context.Context, candidates []Shape) (Choice, error) {
	if free, err := f.D.FreeCores(ctx); err == nil && free > 0 {
		if c, err := NewCB(free).Choose(candidates); err == nil {
			return c, nil
		}
	}
	return First{}.Choose(ctx, candidates)
}

// Chooser returns p as a Chooser: SAcb on a known availability profile
// (Profile.Choose).
func (p Profile) Chooser() Chooser { return profileChooser{p} }

type profileChooser struct{ p Profile }

func (c profileChooser) Choose(_ context.Context, candidates []Shape) (Choice, error) {
	return c.p.Choose(candidates)
}

// First chooses the first candidate, predicting nothing: a batch system
// that says nothing of its queue.
type First struct{}

// Choose implements Chooser.
func (First) Choose(_ context.Context, candidates []Shape) (Choice, error) {
	if len(candidates) == 0 {
		return Choice{Index: -1}, fmt.Errorf("no candidate shapes")
	}
	return Choice{Index: 0, Shape: candidates[0], Finish: candidates[0].Wall}, nil
}

// Request returns the candidates for a request of k workers of unit cores
// each (a unit below 1 is 1) when at most room workers may be added: each
// shape's cores times k, cut to room workers' cores, so that a wide shape
// never makes a pool or factory overshoot its maximum. Cut shapes that
// come out the same are given once. room below 1 is taken as 1: a
// request is at least one worker.
func Request(shapes []Shape, k, unit, room int) []Shape {
	unit, room, k = max(unit, 1), max(room, 1), max(k, 1)
	out := make([]Shape, 0, len(shapes))
	for _, s := range shapes {
		c := Shape{Cores: min(k*s.Cores, room*unit), Wall: s.Wall}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Workers is how many workers of unit cores a request of shape s counts
// as: its cores over unit rounded up, at least one. Rounded down, a shape
// of 6 cores for workers of 4 would count as one worker and a maximum of
// 4 workers would take 24 cores, not 16; rounded up it counts as two, and
// since Request cuts a shape to room workers' cores, a request never
// counts as more than the room left.
func Workers(s Shape, unit int) int {
	unit = max(unit, 1)
	return max(1, (s.Cores+unit-1)/unit)
}

// Pick chooses with c among the candidates for a request of k workers of
// unit cores with room workers left (Request), and returns the choice and
// the workers it counts as. When c cannot predict any candidate it takes
// the first, and returns c's error with it for the caller to report.
func Pick(ctx context.Context, c Chooser, shapes []Shape, k, unit, room int) (Choice, int, error) {
	cands := Request(shapes, k, unit, room)
	ch, err := c.Choose(ctx, cands)
	if err != nil {
		ch, _ = First{}.Choose(ctx, cands)
	}
	return ch, Workers(ch.Shape, unit), err
}
