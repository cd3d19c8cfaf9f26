package workqueuecmd

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/workqueue/factory"
)

// sgeWorkerMemory is about the address space, in MB, that this program's
// worker (a Go program) reserves at start; Grid Engine's h_vmem limits
// exactly that.
const sgeWorkerMemory = 1024

type factoryOptions struct {
	batchWorkers
	project      string
	passwordFile string
	ssl          bool
	sslCA        string
	limits       factory.Limits
	worker       factory.Worker
	interval     time.Duration
	decision     string
	strategy     string
	log          logFlags
}

func newFactoryCmd(s cmdutil.Streams) *cobra.Command {
	// Zero durations take the factory package's defaults.
	o := factoryOptions{limits: factory.Limits{Max: 100, MaxPending: 10}}
	cmd := &cobra.Command{
		Use:   "factory -T local|slurm|sge|condor [flags] HOST PORT | -M PROJECT",
		Short: "keep Work Queue workers running on a batch system for a master",
		Long: `Submits workers (this program's worker command) as batch jobs for the master
at HOST PORT, or for every master of a project found through the catalog (-M),
and keeps between --min and --max of them submitted: within those bounds, one
for every task the masters have waiting or running (--tasks-per-worker to a
worker), but no more than each master can keep busy — its capacity, which it
measures and advertises (--decision says how: seed 000's pool decisions D1 to
D6; D1 ignores capacity, D6 also starts from --default-capacity and rises by at
most --max-change workers a minute). Workers that end are replaced; workers
no longer needed leave at their idle timeout (-t). Jobs the batch system
rejects and workers that fail are reported, with the batch system's or the
worker's message, and pause submissions; after --max-failures in a row the
factory gives up. On exit, and on SIGINT or SIGTERM, it removes every worker
it submitted.

--strategy says how the workers missing at one time are asked for (seed 004's
provisioning strategies): one-at-a-time (a batch job per worker, the default),
additive (jobs of 1, 2, 3, ... workers), exponential (1, 2, 4, 8, ...),
all-at-once (one job), or optimal (one job of as many as the batch system has
free; local and slurm only). A job of k workers runs one worker with k times
--cores, --memory and --disk, which leaves when all of it is idle. Coarse
requests suit an idle cluster, fine ones a busy one, whose scheduler can
backfill them.

--shapes lets each worker job take one of several shapes, CORESxWALL
(e.g. 4x2h,16x30m): each job is submitted as the shape predicted to finish
first (seed 002's SA, starting from when the batch system would start it):
on slurm, by SLURM's own prediction (sbatch --test-only); on local, by a
conservative-backfilling model of the cores free; elsewhere the first shape.
A job of k workers takes k times the shape's cores, cut to the workers --max
leaves room for. A worker of C cores counts as C/--cores workers rounded up (so
the jobs never hold more than --max workers' cores), and the batch
system ends it at its wall time (it is then replaced).

HOST must be the master's address as the execution hosts reach it: on a
cluster, the submit host's name, not 127.0.0.1.`,
		Args: cmdutil.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.config(args)
			if err != nil {
				return err
			}
			cfg.Logger = o.log.logger(s.Err)
			cfg.Report = statusLogger(cfg.Logger)
			if o.batchType == "sge" && o.workerBinary == "" && o.worker.MemoryMB > 0 && o.worker.MemoryMB < sgeWorkerMemory {
				cfg.Logger.Warn(fmt.Sprintf("Grid Engine enforces --memory as h_vmem, a limit on address space; the worker needs about %d MB of it to start", sgeWorkerMemory))
			}
			return o.run(cmd.Context(), cfg.Logger, func(d batch.Driver) error {
				cfg.Driver = d
				if len(cfg.Shapes) > 0 {
					cfg.Chooser = o.chooser(d)
				}
				return factory.Run(cmd.Context(), cfg)
			})
		},
	}
	f := cmd.Flags()
	o.batchWorkers.add(f, &o.worker, &o.limits.MaxPending, &o.limits.TasksPerWorker,
		"run this worker program (e.g. CCTools' work_queue_worker) instead of this program's worker command",
		"candidate worker job shapes CORESxWALL,... (e.g. 4x2h,16x30m): each job takes the one predicted to finish first")
	f.StringVarP(&o.project, "manager-name", "M", "", "serve the masters of this project (regular expression), found through the catalog")
	f.StringVarP(&o.passwordFile, "password", "P", "", "password `FILE` shared with the masters")
	f.BoolVar(&o.ssl, "ssl", false, "the masters want TLS: the factory and its workers connect with --ssl")
	f.StringVar(&o.sslCA, "ssl-ca", "", "likewise, trusting only a master certificate in `FILE` or signed by one there (workers get --ssl-ca too)")
	f.IntVarP(&o.limits.Min, "min", "w", 0, "fewest workers to keep submitted")
	f.IntVarP(&o.limits.Max, "max", "W", o.limits.Max, "most workers to keep submitted")
	f.IntVar(&o.limits.Min, "min-workers", 0, "same as --min (CCTools' name)")
	f.IntVar(&o.limits.Max, "max-workers", o.limits.Max, "same as --max (CCTools' name)")
	f.IntVar(&o.limits.MaxPending, "workers-per-cycle", o.limits.MaxPending, "same as --max-pending (CCTools' name)")
	f.Var(cmdutil.Seconds(&o.limits.NoMaster), "factory-timeout", "exit when no master has been seen for this long (0: never)")
	f.Var(cmdutil.Seconds(&o.interval), "interval", "how often to ask the masters what they need (default 10s)")
	f.StringVar(&o.decision, "decision", "D3", "how many workers: D1 (one per task), D2 (D1 rising by --max-change), D3 (each master's tasks, at most its capacity), D4 (D3 with --default-capacity until a master reports one), D5 (D3 rising by --max-change), D6 (D4 rising by --max-change)")
	f.Float64Var(&o.limits.MaxChange, "max-change", 60, "D2, D5, D6: most workers added a minute")
	f.IntVar(&o.limits.DefaultCapacity, "default-capacity", 20, "D4, D6: the capacity, in tasks, of a master that has not reported one")
	f.StringVar(&o.strategy, "strategy", "one-at-a-time", "how missing workers become batch jobs: one-at-a-time, additive, exponential, all-at-once or optimal")
	for _, name := range []string{"min-workers", "max-workers", "workers-per-cycle"} {
		f.MarkHidden(name)
	}
	o.log.add(cmd)
	return cmd
}

func (o *factoryOptions) config(args []string) (factory.Config, error) {
	o.limits.Retries = o.retries()
	cfg := factory.Config{Project: o.project, PasswordFile: o.passwordFile, Worker: o.worker, Limits: o.limits, Interval: o.interval}
	switch {
	case o.batchType == "":
		return cfg, cmdutil.Usagef("-T is required (local, slurm, sge or condor)")
	case o.batchType == "wq":
		return cfg, cmdutil.Usagef("-T wq: workers are placed by a batch system; use local, slurm, sge or condor")
	case !slices.Contains(batch.Kinds(), o.batchType):
		return cfg, cmdutil.Usagef("unknown batch type %q (use local, slurm, sge or condor)", o.batchType)
	case o.project != "" && len(args) > 0:
		return cfg, cmdutil.Usagef("give either -M PROJECT or the master's HOST PORT, not both")
	case o.project == "" && len(args) != 2:
		return cfg, cmdutil.Usagef("need the master's HOST PORT, or -M PROJECT")
	case o.limits.Min < 0 || o.limits.Max < 1 || o.limits.Min > o.limits.Max:
		return cfg, cmdutil.Usagef("need 0 <= --min <= --max and --max >= 1 (got %d and %d)", o.limits.Min, o.limits.Max)
	case o.limits.MaxPending < 0 || o.limits.TasksPerWorker < 0 || o.maxFailures < 1:
		return cfg, cmdutil.Usagef("--max-pending and --tasks-per-worker must not be negative, --max-failures at least 1")
	case o.worker.Cores < 0 || o.worker.MemoryMB < 0 || o.worker.DiskMB < 0:
		return cfg, cmdutil.Usagef("worker resources must not be negative")
	case o.limits.MaxChange <= 0 || o.limits.DefaultCapacity < 1:
		return cfg, cmdutil.Usagef("--max-change must be positive, --default-capacity at least 1")
	}
	policy, err := factory.ParsePolicy(o.decision)
	if err != nil {
		return cfg, cmdutil.Usagef("--decision: %v", err)
	}
	if policy == factory.D7 {
		return cfg, cmdutil.Usagef("--decision D7 needs a billing cycle: use workqueue pool, whose policy file has one")
	}
	cfg.Limits.Policy = policy
	if cfg.Shapes, err = o.parseShapes(); err != nil {
		return cfg, err
	}
	if cfg.Limits.Strategy, err = factory.ParseStrategy(o.strategy); err != nil {
		return cfg, cmdutil.Usagef("--strategy: %v", err)
	}
	if cfg.Limits.Strategy == factory.Optimal && o.batchType != "local" && o.batchType != "slurm" {
		return cfg, cmdutil.Usagef("--strategy optimal needs a batch system that says what it has free: local or slurm")
	}
	if len(args) == 2 {
		if _, err := strconv.ParseUint(args[1], 10, 16); err != nil {
			return cfg, cmdutil.Usagef("bad port %q", args[1])
		}
		cfg.Master = net.JoinHostPort(args[0], args[1])
	}
	cfg.Catalogs = o.catalogAddrs()
	if err := o.setWorker(&cfg.Worker); err != nil {
		return cfg, err
	}
	if err := checkPasswordFile(o.passwordFile); err != nil {
		return cfg, err
	}
	if o.ssl || o.sslCA != "" {
		tc, err := clientTLS(o.sslCA)
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tc
		if o.sslCA == "" {
			cfg.Worker.Args = append(cfg.Worker.Args, "--ssl")
		} else {
			ca, err := filepath.Abs(o.sslCA)
			if err != nil {
				return cfg, err
			}
			cfg.Worker.Args = append(cfg.Worker.Args, "--ssl-ca", ca)
		}
	}
	return cfg, nil
}

// statusLogger returns a factory.Config.Report that logs a record, in the
// factory's one log format, when the workers or the masters' needs change.
func statusLogger(log *slog.Logger) func(factory.Counts) {
	last := ""
	return func(c factory.Counts) {
		args := []any{"queued", c.Queued, "running", c.Running, "target", c.Target}
		if c.Known {
			args = append(args, "masters", c.Demand.Masters, "tasks", c.Demand.Tasks, "workers_connected", c.Demand.Workers)
		} else {
			args = append(args, "masters", "unknown")
		}
		if s := fmt.Sprint(args...); s != last {
			last = s
			log.Info("workers", args...)
		}
	}
}
