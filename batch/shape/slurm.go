package shape

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Slurm predicts when a request would start with SLURM's own scheduler:
// `sbatch --test-only`, which places the job in SLURM's plan of the queue
// as it is now (its backfilling included) without submitting it.
type Slurm struct {
	// Bin is the directory holding sbatch ("" looks in PATH).
	Bin string
	// Args are further sbatch options, as the batch driver's (a partition,
	// an account), so that the prediction is for the job really submitted.
	Args []string
}

// Start returns how long from now SLURM predicts a job of shape s would
// wait to start.
func (s Slurm) Start(ctx context.Context, sh Shape) (time.Duration, error) {
	path := "sbatch"
	if s.Bin != "" {
		path = filepath.Join(s.Bin, "sbatch")
	}
	args := []string{"--test-only", "--cpus-per-task=" + strconv.Itoa(sh.Cores),
		"--time=" + strconv.Itoa(int(math.Ceil(sh.Wall.Minutes())))}
	args = append(args, s.Args...)
	args = append(args, "--wrap=true")
	// It answers on standard error, in local time.
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("sbatch --test-only for %v: %w: %s", sh, err, strings.TrimSpace(string(out)))
	}
	start, err := ParseTestOnly(string(out), time.Local)
	if err != nil {
		return 0, err
	}
	return max(time.Until(start), 0), nil
}

// Choose returns the candidate SLURM predicts to finish first, ties
// broken as Profile.Choose breaks them; candidates SLURM would refuse are
// left out.
func (s Slurm) Choose(ctx context.Context, candidates []Shape) (Choice, error) {
	return earliest(candidates, func(sh Shape) (time.Duration, error) { return s.Start(ctx, sh) })
}

// Never is the start ParseTestOnly reports when SLURM answers with its
// end of time: the job could not start within its horizon.
var Never = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// ParseTestOnly reads what `sbatch --test-only` says of a job it would
// submit ("sbatch: Job 36 to start at 2026-11-25T00:15:51 using 1
// processors on nodes vm in partition debug") and returns when the job
// would start, in loc (SLURM prints local time).
func ParseTestOnly(out string, loc *time.Location) (time.Time, error) {
	_, rest, ok := strings.Cut(out, " to start at ")
	if !ok {
		return time.Time{}, fmt.Errorf("sbatch --test-only: %q: no start time", strings.TrimSpace(out))
	}
	stamp, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
	if year, _, _ := strings.Cut(stamp, "-"); len(year) > 4 {
		// SLURM's "end of time" (e.g. 18359-02-25): it cannot say when,
		// the job being unable to start within its horizon.
		return Never, nil
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", stamp, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("sbatch --test-only: %w", err)
	}
	return t, nil
}
