package batch

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
)

// NewCondor returns the Driver for HTCondor. It writes a submit file for
// each job's wrapper script (vanilla universe, the shared filesystem rather
// than file transfer, the submitting environment) and submits it with
// condor_submit -terse; asks condor_q once per poll interval about all its
// jobs; stops them with condor_rm; and looks up jobs that leave the queue
// without an exit status with condor_history. A held job (JobStatus 5:
// HTCondor could not start it, or someone put it on hold) is removed and
// fails with ErrRejected and its HoldReason.
//
// Resources map to request_cpus, request_memory (MB), request_disk (given to
// HTCondor in KiB) and, for the wall time, a periodic_remove expression that
// removes the job once it has run that long.
//
// This driver has been tested only against fakes of condor_submit, condor_q,
// condor_rm and condor_history that follow the real commands' arguments and
// output formats: HTCondor is not packaged for Debian bookworm, where the
// project's tests run. It has not met a real HTCondor.
func NewCondor(opts Options) (Driver, error) {
	opts.fill()
	t := tools{opts}
	if err := t.need("condor_submit", "HTCondor"); err != nil {
		return nil, err
	}
	return newQueueDriver(&condor{t}, opts)
}

type condor struct {
	tools
}

func (c *condor) kind() string { return "condor" }

// condorStatus names HTCondor's JobStatus codes.
var condorStatus = map[string]string{
	"1": "Idle", "2": "Running", "3": "Removed", "4": "Completed",
	"5": "Held", "6": "Transferring Output", "7": "Suspended",
}

func (c *condor) submit(ctx context.Context, j *spooled) (string, error) {
	if strings.ContainsAny(j.dir, "\n\r") {
		return "", fmt.Errorf("condor: job directory %q has a line break, which a submit file cannot hold", j.dir)
	}
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("universe = vanilla")
	line("executable = %s", j.script)
	line("output = %s", j.out)
	line("error = %s", j.err)
	line("initialdir = %s", j.dir)
	line("getenv = true")
	line("should_transfer_files = NO")
	line("batch_name = %s", jobName(j.Name))
	r := j.Resources
	if r.Cores > 0 {
		line("request_cpus = %d", r.Cores)
	}
	if r.MemoryMB > 0 {
		line("request_memory = %d", r.MemoryMB)
	}
	if r.DiskMB > 0 {
		line("request_disk = %d", r.DiskMB*1024)
	}
	if r.WallTime > 0 {
		line("periodic_remove = (JobStatus == 2) && ((time() - EnteredCurrentStatus) > %d)", int(math.Ceil(r.WallTime.Seconds())))
	}
	for _, extra := range c.opts.SubmitArgs {
		line("%s", extra)
	}
	line("queue")
	sub := j.script + ".sub"
	if err := os.WriteFile(sub, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("submit file: %w", err)
	}
	out, err := run(ctx, c.path("condor_submit"), "-terse", sub)
	if err != nil {
		return "", err
	}
	// -terse prints "first - last", job IDs as cluster.proc.
	id, _, _ := strings.Cut(strings.TrimSpace(out), " ")
	if cluster, proc, ok := strings.Cut(id, "."); !ok || !isDigits(cluster) || !isDigits(proc) {
		return "", fmt.Errorf("condor_submit printed %q, not a job ID", out)
	}
	return id, nil
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func (c *condor) query(ctx context.Context, ids []string) (map[string]observation, error) {
	args := append([]string{"-af:j", "JobStatus", "HoldReason"}, ids...)
	out, err := run(ctx, c.path("condor_q"), args...)
	if err != nil {
		return nil, err
	}
	m := make(map[string]observation)
	for _, line := range strings.Split(out, "\n") {
		// "ID JobStatus HoldReason...", the reason being "undefined" when
		// there is none.
		f := strings.SplitN(strings.TrimSpace(line), " ", 3)
		if len(f) < 2 {
			continue
		}
		o := observation{state: condorStatus[f[1]]}
		if o.state == "" {
			o.state = "JobStatus " + f[1]
		}
		switch f[1] {
		case "1":
			o.phase = waiting
		case "2", "6", "7":
			o.phase = running
		case "5":
			o.phase = stuck
			if len(f) == 3 && f[2] != "undefined" {
				o.reason = f[2]
			}
		default: // removed or completed, on its way out of the queue
			o.phase = ended
			o.killed = f[1] == "3"
		}
		m[f[0]] = o
	}
	return m, nil
}

func (c *condor) remove(ctx context.Context, ids []string) error {
	_, err := run(ctx, c.path("condor_rm"), ids...)
	return err
}

func (c *condor) history(ctx context.Context, ids []string) map[string]observation {
	args := append([]string{"-af:j", "JobStatus", "ExitCode", "RemoveReason"}, ids...)
	out, err := run(ctx, c.path("condor_history"), args...)
	if err != nil {
		return nil
	}
	m := make(map[string]observation)
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(strings.TrimSpace(line), " ", 4)
		if len(f) < 3 {
			continue
		}
		o := observation{phase: ended, state: condorStatus[f[1]], killed: f[1] == "3"}
		if len(f) == 4 && f[3] != "undefined" {
			o.reason = f[3]
			o.timeLimit = strings.Contains(f[3], "PeriodicRemove")
		} else if f[2] != "undefined" {
			o.reason = "exit code " + f[2]
		}
		m[f[0]] = o
	}
	return m
}
