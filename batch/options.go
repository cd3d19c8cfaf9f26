package batch

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Options configure a driver. The zero value is usable; each field says
// which drivers read it.
type Options struct {
	// Slots is how many cores the local driver hands out; default the
	// number of CPUs. (local)
	Slots int
	// KillDelay is how long the local driver waits between SIGTERM and
	// SIGKILL when it stops a job; default 5 s. (local)
	KillDelay time.Duration
	// DispatchDelay holds each job queued this long before it may start,
	// as a batch system's scheduler would: the local driver then stands
	// for a cluster, in benchmarks and tests of placement. (local)
	DispatchDelay time.Duration
	// InProcess makes the local driver do a job that has Job.Do by
	// calling it in a goroutine of this process, not by starting its
	// command: for this machine's share of a hybrid run. (local)
	InProcess bool

	// Spool is a directory on a filesystem the execution hosts share, in
	// which the driver makes a directory of its own for each job's script,
	// output and exit status. Default: the working directory, which on a
	// cluster is usually on the shared filesystem (/tmp usually is not).
	// The driver's directory is removed by Close unless KeepFiles is set.
	// (slurm, sge, condor)
	Spool string
	// KeepFiles keeps each job's spool files after its final event, for
	// debugging. (slurm, sge, condor)
	KeepFiles bool
	// Bin is the directory holding the batch system's commands (sbatch,
	// qsub, condor_submit, ...); empty means they are looked up on PATH.
	// (slurm, sge, condor)
	Bin string
	// PollInterval is how often the driver asks the batch system about its
	// jobs, with one command for all of them; default 1 s. Exit-status
	// files are looked for four times as often (one directory read), so a
	// finished job is usually reported sooner. (slurm, sge, condor)
	PollInterval time.Duration
	// ExitGrace is how long a job that has left the queue may take to show
	// its exit-status file — a shared filesystem may show a new file late —
	// before it is reported as ErrVanished; default 5 s. (slurm, sge, condor)
	ExitGrace time.Duration
	// SubmitArgs are passed on to the batch system as they are: extra
	// arguments to sbatch or qsub, extra lines of the HTCondor submit file
	// (e.g. "requirements = ..."). (slurm, sge, condor)
	SubmitArgs []string
	// ParallelEnv is the Grid Engine parallel environment that multi-core
	// jobs ask for (-pe NAME N); default "smp". (sge)
	ParallelEnv string

	// Logger receives what the driver notices but cannot report on a job,
	// such as a failing queue query that it will retry; nil discards it.
	Logger *slog.Logger
}

func (o *Options) fill() {
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.ExitGrace <= 0 {
		o.ExitGrace = 5 * time.Second
	}
	if o.ParallelEnv == "" {
		o.ParallelEnv = "smp"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Kinds lists the batch types of the tools' -T flags: those New knows, and
// "wq", whose driver, package batch/wq, starts a Work Queue master (wq.Open).
func Kinds() []string { return []string{"local", "wq", "slurm", "sge", "condor"} }

// New returns the driver for the batch type kind: local, slurm, sge or
// condor. For wq it returns an error wrapping errors.ErrUnsupported: that
// driver is in package batch/wq, so that this package and its users do not
// link the Work Queue master.
func New(kind string, opts Options) (Driver, error) {
	switch kind {
	case "local":
		return NewLocal(opts), nil
	case "wq":
		return nil, fmt.Errorf("batch type wq: the Work Queue driver is package batch/wq (wq.Open): %w", errors.ErrUnsupported)
	case "slurm":
		return NewSlurm(opts)
	case "sge":
		return NewSGE(opts)
	case "condor":
		return NewCondor(opts)
	}
	return nil, fmt.Errorf("unknown batch type %q (known: local, wq, slurm, sge, condor)", kind)
}
