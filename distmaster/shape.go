package distmaster

import (
	"context"
	"fmt"
	"time"

	"github.com/rightsize/rightsize/batch/shape"
)

// shapeTimeout bounds the chooser's prediction (sbatch --test-only for
// each candidate on SLURM).
const shapeTimeout = 30 * time.Second

// chooseShape takes, among Config.Shapes, the request Chooser predicts to
// finish first (seed 002's SA): its cores become JobCores and its wall
// time every job's wall-clock limit. Without shapes it does nothing.
func (c *Config) chooseShape(ctx context.Context) {
	if len(c.Shapes) == 0 {
		return
	}
	if c.Chooser == nil {
		c.Chooser = shape.For(c.Kind, c.Driver, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, shapeTimeout)
	defer cancel()
	ch, err := c.Chooser.Choose(ctx, c.Shapes)
	if err != nil {
		ch, _ = shape.First{}.Choose(ctx, c.Shapes)
		fmt.Fprintf(c.Explain, "cannot predict the candidate shapes (%v); taking the first, %v\n", err, ch.Shape)
		c.Logger.Warn("cannot predict the candidate shapes; taking the first", "err", err, "shape", ch.Shape.String())
	} else {
		fmt.Fprintf(c.Explain, "jobs of shape %v: of %d candidates, the one predicted to finish first (start in %v, end in %v)\n",
			ch.Shape, len(c.Shapes), ch.Start.Round(time.Second), ch.Finish.Round(time.Second))
	}
	c.JobCores, c.wallTime = ch.Shape.Cores, ch.Shape.Wall
}

// jobTimeLimit bounds a job's predicted running time when the models size
// the jobs: maxJobTime, and half the shape's wall time, so that a block
// slower than predicted still ends before the batch system stops it.
func (c *Config) jobTimeLimit() time.Duration {
	if c.wallTime > 0 {
		return max(min(maxJobTime, c.wallTime/2), time.Second)
	}
	return maxJobTime
}
