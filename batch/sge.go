package batch

import (
	"context"
	"fmt"
	"math"
	"os/user"
	"strconv"
	"strings"
	"time"
)

// NewSGE returns the Driver for Grid Engine (SGE, Son of Grid Engine, Univa
// and Altair's, which share these commands). It submits each job's wrapper
// script with qsub -terse -w e, so that a job no queue could ever run is
// refused at Submit with qsub's message; asks qstat once per poll interval
// about all of this user's jobs; stops them with qdel; and looks up jobs
// that leave the queue without an exit status with qacct. A job in an error
// state (Eqw: Grid Engine could not start it) is removed and fails with
// ErrRejected and qstat -j's error reason.
//
// Resources map to -pe Options.ParallelEnv N for more than one core (the
// environment must exist, with allocation_rule $pe_slots for the cores to
// be on one host), -l h_vmem (memory per slot, MB: what Grid Engine sites
// use, and a limit on the job's virtual memory; mem_free, a load value,
// would make -w e refuse every job) and -l h_rt (wall time, seconds). Grid Engine has no standard disk
// request, so DiskMB is not passed on; add one through Options.SubmitArgs
// where a site defines it. Jobs get the submitting environment (-V).
func NewSGE(opts Options) (Driver, error) {
	opts.fill()
	t := tools{opts}
	if err := t.need("qsub", "Grid Engine"); err != nil {
		return nil, err
	}
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("sge: who am I: %w", err)
	}
	return newQueueDriver(&sge{tools: t, user: u.Username}, opts)
}

type sge struct {
	tools
	user string
}

func (s *sge) kind() string { return "sge" }

func (s *sge) submit(ctx context.Context, j *spooled) (string, error) {
	args := []string{"-terse", "-w", "e", "-N", jobName(j.Name), "-o", j.out, "-e", j.err,
		"-wd", j.dir, "-S", "/bin/sh", "-V"}
	r := j.Resources
	if r.Cores > 1 {
		args = append(args, "-pe", s.opts.ParallelEnv, strconv.Itoa(r.Cores))
	}
	if r.MemoryMB > 0 {
		perSlot := (r.MemoryMB + int64(max(r.Cores, 1)) - 1) / int64(max(r.Cores, 1))
		args = append(args, "-l", fmt.Sprintf("h_vmem=%dM", perSlot))
	}
	if r.WallTime > 0 {
		args = append(args, "-l", "h_rt="+strconv.Itoa(int(math.Ceil(r.WallTime.Seconds()))))
	}
	args = append(args, s.opts.SubmitArgs...)
	args = append(args, j.script)
	out, err := run(ctx, s.path("qsub"), args...)
	if err != nil {
		return "", err
	}
	// -terse prints the job ID alone ("ID.first-last:step" for arrays).
	id, _, _ := strings.Cut(strings.TrimSpace(out), ".")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("qsub printed %q, not a job ID", out)
	}
	return id, nil
}

func (s *sge) query(ctx context.Context, ids []string) (map[string]observation, error) {
	out, err := run(ctx, s.path("qstat"), "-u", s.user)
	if err != nil {
		return nil, err
	}
	m := parseQstat(out)
	var inError []string
	for _, id := range ids {
		if o, ok := m[id]; ok && o.phase == stuck {
			inError = append(inError, id)
		}
	}
	if len(inError) > 0 {
		// Why Grid Engine could not start them: one qstat -j for all.
		if out, err := run(ctx, s.path("qstat"), "-j", strings.Join(inError, ",")); err == nil {
			for id, reason := range parseQstatErrors(out) {
				o := m[id]
				o.reason = reason
				m[id] = o
			}
		}
	}
	return m, nil
}

// parseQstat reads qstat's job listing: a header, a line of dashes, then
// "ID priority name user state date time [queue] slots [task]".
func parseQstat(out string) map[string]observation {
	m := make(map[string]observation)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
			continue // the header and the dashes
		}
		m[f[0]] = sgeObservation(f[4])
	}
	return m
}

// sgeObservation maps a qstat state code (qw, hqw, r, t, Eqw, dr, ...) to a
// phase.
func sgeObservation(state string) observation {
	o := observation{state: state}
	switch {
	case strings.Contains(state, "E"):
		o.phase = stuck
	case strings.ContainsAny(state, "rtRsST"):
		// running, transferring, restarted, suspended; also while being
		// deleted (dr).
		o.phase = running
	default: // qw, hqw, hRwq, d (deleted before it ran)
		o.phase = waiting
	}
	return o
}

// parseQstatErrors reads the "error reason" lines of qstat -j.
func parseQstatErrors(out string) map[string]string {
	m := make(map[string]string)
	var id string
	for _, line := range strings.Split(out, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case strings.TrimSpace(key) == "job_number":
			id = strings.TrimSpace(value)
		case strings.HasPrefix(key, "error reason") && id != "":
			// "error reason    1:      DATE [uid:pid]: error: ..."
			_, msg, _ := strings.Cut(value, "]:")
			if msg == "" {
				msg = value
			}
			if m[id] == "" {
				m[id] = strings.TrimSpace(msg)
			}
		}
	}
	return m
}

func (s *sge) remove(ctx context.Context, ids []string) error {
	_, err := run(ctx, s.path("qdel"), ids...)
	return err
}

// history asks qacct, one job at a time (it takes one), for jobs' failure
// code and exit status. Grid Engine writes its accounting file a moment
// after a job ends, so this may find nothing yet.
func (s *sge) history(ctx context.Context, ids []string) map[string]observation {
	m := make(map[string]observation)
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		if time.Now().After(deadline) {
			break
		}
		out, err := run(ctx, s.path("qacct"), "-j", id)
		if err != nil {
			continue
		}
		var failed, exit string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "failed":
				failed = strings.Join(f[1:], " ")
			case "exit_status":
				exit = f[1]
			}
		}
		o := observation{phase: ended, state: "finished", reason: "failed " + failed + ", exit status " + exit}
		// Grid Engine's failure codes for limits: 37 is qmaster enforcing
		// h_rt; 137 (SIGKILL) from execd at h_rt is reported as exit status.
		o.killed = failed != "" && !strings.HasPrefix(failed, "0")
		o.timeLimit = strings.HasPrefix(failed, "37")
		m[id] = o
	}
	return m
}
