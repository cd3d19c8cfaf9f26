package distmaster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// PlanSuffix is added to a checkpoint's name to name its plan file.
const PlanSuffix = ".plan"

// plan is the small file kept beside a checkpoint: which problem its cells
// belong to, and the job size, so that a re-run resumes with the same
// blocks (and does not recompute finished ones because a new benchmark
// chose another size) and a checkpoint of another problem is refused rather
// than taken for this one's.
type plan struct {
	Problem string `json:"problem"`
	JobW    int    `json:"job_width"`
	JobH    int    `json:"job_height"`
}

// readPlan reads the plan beside checkpoint, or returns nil if there is
// none.
func readPlan(checkpoint string) (*plan, error) {
	path := checkpoint + PlanSuffix
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p plan
	if err := json.Unmarshal(b, &p); err != nil || p.JobW < 1 || p.JobH < 1 {
		return nil, fmt.Errorf("%s: not a plan file written by rightsize (remove it, and %s, to start over)", path, checkpoint)
	}
	return &p, nil
}

// checkProblem refuses a plan written for another problem.
func (p *plan) checkProblem(checkpoint, problem string) error {
	if p == nil || p.Problem == problem {
		return nil
	}
	return fmt.Errorf("%s holds the cells of another problem (%s says %s; this run is %s): remove both files to start over, or keep the results elsewhere",
		checkpoint, checkpoint+PlanSuffix, p.Problem, problem)
}

// writePlan writes the plan beside checkpoint, atomically.
func writePlan(checkpoint string, p plan) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	path := checkpoint + PlanSuffix
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// benchmark calls call until budget is spent or maxCalls calls are made
// (at least one), each bounded by callLimit, and returns the mean time per
// call. A call cut off by the limit counts as callLimit: the function takes
// at least that long. Failing calls are timed like the others: the blocks
// will report them.
func benchmark(ctx context.Context, call func(ctx context.Context, i int) error, budget, callLimit time.Duration, maxCalls int) (time.Duration, int) {
	var total time.Duration
	n := 0
	for n < maxCalls && (n == 0 || total < budget) && ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, callLimit)
		start := time.Now()
		call(cctx, n)
		d := time.Since(start)
		cancel()
		total += min(d, callLimit)
		n++
		if d >= callLimit {
			break
		}
	}
	if n == 0 {
		return 0, 0
	}
	return total / time.Duration(n), n
}

// workDir prepares the run's work directory: whatever a killed run left
// there is removed first.
func workDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	return nil
}

// DefaultWorkDir is the work directory of a run whose checkpoint is at
// checkpoint: beside it, so that on a cluster it is on the same (shared)
// filesystem.
func DefaultWorkDir(checkpoint string) string {
	return filepath.Join(filepath.Dir(checkpoint), "."+filepath.Base(checkpoint)+".jobs")
}

// bitset marks cells done, a bit each: a problem's cells can number in the
// hundreds of millions.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// set marks i, reporting whether it was unmarked.
func (b bitset) set(i int) bool {
	if b.has(i) {
		return false
	}
	b[i/64] |= 1 << (i % 64)
	return true
}
