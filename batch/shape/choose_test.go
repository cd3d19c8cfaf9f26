package shape

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
)

// freeDriver is a batch system that says it has free cores free.
type freeDriver struct {
	batch.Driver
	free int
	err  error
}

func (d freeDriver) FreeCores(context.Context) (int, error) { return d.free, d.err }

func TestRequest(t *testing.T) {
	shapes := []Shape{{Cores: 1, Wall: 2 * time.Hour}, {Cores: 4, Wall: 20 * time.Minute}, {Cores: 8, Wall: 20 * time.Minute}}
	for _, tc := range []struct {
		name          string
		k, unit, room int
		want          []Shape
	}{
		{"scaled by k", 2, 1, 100, []Shape{{2, 2 * time.Hour}, {8, 20 * time.Minute}, {16, 20 * time.Minute}}},
		{"cut to the room", 1, 1, 4, []Shape{{1, 2 * time.Hour}, {4, 20 * time.Minute}}},
		{"room in workers of unit cores", 1, 2, 3, []Shape{{1, 2 * time.Hour}, {4, 20 * time.Minute}, {6, 20 * time.Minute}}},
		{"no room is one worker", 3, 1, 0, []Shape{{1, 2 * time.Hour}, {1, 20 * time.Minute}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Request(shapes, tc.k, tc.unit, tc.room); !slices.Equal(got, tc.want) {
				t.Errorf("Request(k=%d, unit=%d, room=%d) = %v, want %v", tc.k, tc.unit, tc.room, got, tc.want)
			}
		})
	}
}

// TestFor: each batch system's chooser, and what it picks of 1 core for
// 2 h against 4 for 20 min.
func TestFor(t *testing.T) {
	cands := []Shape{{Cores: 1, Wall: 2 * time.Hour}, {Cores: 4, Wall: 20 * time.Minute}}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		kind string
		d    batch.Driver
		want int // the candidate chosen; -1: a Slurm chooser (not run here)
	}{
		{"slurm asks SLURM", "slurm", nil, -1},
		{"4 free: the wide one ends first", "local", freeDriver{free: 4}, 1},
		{"2 free: the wide one waits for 2 h", "local", freeDriver{free: 2}, 0},
		{"cannot say: the first", "local", freeDriver{err: errors.New("no")}, 0},
		{"says nothing: the first", "sge", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := For(tc.kind, tc.d, []string{"-p", "debug"})
			if tc.want < 0 {
				if s, ok := c.(Slurm); !ok || !slices.Equal(s.Args, []string{"-p", "debug"}) {
					t.Errorf("For(slurm) = %#v, want Slurm with the submit options", c)
				}
				return
			}
			ch, err := c.Choose(ctx, cands)
			if err != nil || ch.Index != tc.want || ch.Shape != cands[tc.want] {
				t.Errorf("%T chose %+v, %v; want candidate %d", c, ch, err, tc.want)
			}
		})
	}
}

// failing predicts nothing.
type failing struct{}

func (failing) Choose(context.Context, []Shape) (Choice, error) {
	return Choice{Index: -1}, errors.New("sbatch: not found")
}

func TestPick(t *testing.T) {
	shapes := []Shape{{Cores: 4, Wall: 2 * time.Hour}, {Cores: 1, Wall: 20 * time.Minute}}
	ctx := context.Background()
	ch, n, err := Pick(ctx, Free{freeDriver{free: 8}}, shapes, 2, 2, 10)
	if err != nil || ch.Shape != (Shape{Cores: 2, Wall: 20 * time.Minute}) || n != 1 {
		t.Errorf("Pick = %+v as %d workers, %v; want 2 cores for 20m as 1 worker of 2 cores", ch, n, err)
	}
	ch, n, err = Pick(ctx, failing{}, shapes, 2, 1, 3)
	if err == nil || ch.Shape != (Shape{Cores: 3, Wall: 2 * time.Hour}) || n != 3 {
		t.Errorf("Pick with a failing chooser = %+v as %d workers, %v; want its error and the first candidate, cut to 3", ch, n, err)
	}
}
