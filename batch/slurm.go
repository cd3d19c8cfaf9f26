package batch

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// NewSlurm returns the Driver for SLURM. It submits each job's wrapper
// script with sbatch --parsable, asks squeue once per poll interval about
// all of them (--states=all, so that jobs that just ended are still listed
// with their end state and reason), and stops them with scancel. A job that
// leaves the queue without an exit status is looked up with sacct where
// SLURM keeps accounting.
//
// Resources map to --cpus-per-task (cores), --mem (MB), --tmp (disk, MB)
// and --time (wall time, rounded up to whole minutes, SLURM's unit). A job
// SLURM refuses outright fails Submit with sbatch's message; a job it
// accepts but keeps pending for a reason that waiting cannot resolve (its
// request exceeds every node or partition limit: BadConstraints,
// PartitionConfig, PartitionNodeLimit, PartitionTimeLimit, InvalidAccount,
// InvalidQOS) is removed and fails with ErrRejected and that reason.
func NewSlurm(opts Options) (Driver, error) {
	opts.fill()
	t := tools{opts}
	if err := t.need("sbatch", "SLURM"); err != nil {
		return nil, err
	}
	s := &slurm{tools: t}
	d, err := newQueueDriver(s, opts)
	if err != nil {
		return nil, err
	}
	return slurmDriver{d.(*queueDriver), s}, nil
}

type slurm struct {
	tools
	noSacct atomic.Bool // sacct failed once: accounting is off here
}

func (s *slurm) kind() string { return "slurm" }

func (s *slurm) submit(ctx context.Context, j *spooled) (string, error) {
	args := []string{"--parsable", "--job-name=" + jobName(j.Name),
		"--output=" + j.out, "--error=" + j.err, "--chdir=" + j.dir, "--export=ALL"}
	r := j.Resources
	if r.Cores > 0 {
		args = append(args, "--cpus-per-task="+strconv.Itoa(r.Cores))
	}
	if r.MemoryMB > 0 {
		args = append(args, fmt.Sprintf("--mem=%dM", r.MemoryMB))
	}
	if r.DiskMB > 0 {
		args = append(args, fmt.Sprintf("--tmp=%dM", r.DiskMB))
	}
	if r.WallTime > 0 {
		args = append(args, "--time="+strconv.Itoa(int(math.Ceil(r.WallTime.Minutes()))))
	}
	args = append(args, s.opts.SubmitArgs...)
	args = append(args, j.script)
	out, err := run(ctx, s.path("sbatch"), args...)
	if err != nil {
		return "", err
	}
	// --parsable prints "ID" or "ID;cluster".
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch printed %q, not a job ID", out)
	}
	return id, nil
}

func (s *slurm) query(ctx context.Context, ids []string) (map[string]observation, error) {
	// All of this user's jobs in one call; --jobs with a list would fail
	// outright when SLURM has forgotten one of them.
	out, err := run(ctx, s.path("squeue"), "--noheader", "--states=all",
		"--user="+strconv.Itoa(os.Getuid()), "--format=%i|%T|%r")
	if err != nil {
		return nil, err
	}
	return parseSqueue(out), nil
}

// parseSqueue reads squeue --format=%i|%T|%r lines.
func parseSqueue(out string) map[string]observation {
	m := make(map[string]observation)
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(strings.TrimSpace(line), "|", 3)
		if len(f) < 2 {
			continue
		}
		reason := ""
		if len(f) == 3 && f[2] != "None" {
			reason = f[2]
		}
		m[f[0]] = slurmObservation(f[1], reason)
	}
	return m
}

// slurmStuck are the reasons for which SLURM keeps a job pending that no
// amount of waiting resolves.
var slurmStuck = map[string]bool{
	"BadConstraints": true, "PartitionConfig": true, "PartitionNodeLimit": true,
	"PartitionTimeLimit": true, "InvalidAccount": true, "InvalidQOS": true,
}

// slurmObservation maps a SLURM job state (squeue %T, sacct State) to a phase.
func slurmObservation(state, reason string) observation {
	o := observation{state: state, reason: reason}
	// sacct writes "CANCELLED by 0".
	word, _, _ := strings.Cut(state, " ")
	switch word {
	case "PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD":
		o.phase = waiting
		if slurmStuck[reason] {
			o.phase = stuck
		}
	case "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING":
		o.phase = running
	default:
		// COMPLETED and FAILED are the job script's own exit; the
		// others are SLURM ending the job.
		o.phase = ended
		o.killed = word != "COMPLETED" && word != "FAILED"
		o.timeLimit = word == "TIMEOUT" || word == "DEADLINE"
	}
	return o
}

func (s *slurm) remove(ctx context.Context, ids []string) error {
	_, err := run(ctx, s.path("scancel"), ids...)
	return err
}

func (s *slurm) history(ctx context.Context, ids []string) map[string]observation {
	if s.noSacct.Load() {
		return nil
	}
	out, err := run(ctx, s.path("sacct"), "--noheader", "--parsable2", "--allocations",
		"--jobs="+strings.Join(ids, ","), "--format=JobID,State,ExitCode")
	if err != nil {
		// Without an accounting database ("Slurm accounting storage is
		// disabled") it will never work; do not ask again.
		s.noSacct.Store(true)
		s.opts.Logger.Info("sacct unavailable; jobs that vanish are reported with what squeue last said", "err", err)
		return nil
	}
	m := make(map[string]observation)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) < 3 {
			continue
		}
		m[f[0]] = slurmObservation(f[1], "exit code "+f[2])
	}
	return m
}

var _ FreeReporter = (*slurmDriver)(nil)

// slurmDriver is the SLURM driver: the queue driver, which can also say
// what SLURM has free.
type slurmDriver struct {
	*queueDriver
	s *slurm
}

// FreeCores returns the cores SLURM's nodes have idle (sinfo's %C:
// allocated/idle/other/total), less those of this driver's jobs still
// pending, which SLURM will give them first.
func (d slurmDriver) FreeCores(ctx context.Context) (int, error) {
	out, err := run(ctx, d.s.path("sinfo"), "--noheader", "--format=%C")
	if err != nil {
		return 0, err
	}
	idle, err := parseSinfoCores(out)
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	for id, j := range d.jobs {
		if st, err := d.t.Status(id); err == nil && st.State == Queued {
			idle -= max(j.Resources.Cores, 1)
		}
	}
	d.mu.Unlock()
	return max(idle, 0), nil
}

// parseSinfoCores reads the idle cores from sinfo --format=%C lines
// ("A/I/O/T", one a partition), the most any line lists: partitions can
// share nodes.
func parseSinfoCores(out string) (int, error) {
	most, seen := 0, false
	for _, line := range strings.Fields(out) {
		f := strings.Split(line, "/")
		if len(f) != 4 {
			return 0, fmt.Errorf("sinfo --format=%%C printed %q, not A/I/O/T", line)
		}
		idle, err := strconv.Atoi(f[1])
		if err != nil {
			return 0, fmt.Errorf("sinfo --format=%%C printed %q, not A/I/O/T", line)
		}
		most, seen = max(most, idle), true
	}
	if !seen {
		return 0, fmt.Errorf("sinfo --format=%%C printed nothing")
	}
	return most, nil
}
