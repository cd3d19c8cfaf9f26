package workqueuecmd

import (
	"errors"
	"io/fs"
	"slices"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/workqueue/pool"
)

type poolOptions struct {
	batchWorkers
	cfg pool.Config
	log logFlags
}

func newPoolCmd(s cmdutil.Streams) *cobra.Command {
	o := poolOptions{cfg: pool.Config{Limits: pool.Limits{MaxPending: 10}}}
	cmd := &cobra.Command{
		Use:   "pool -T local|slurm|sge|condor --policy FILE [flags]",
		Short: "keep the masters of several projects supplied with workers, shared by a policy",
		Long: `Submits Work Queue workers as batch jobs for every master, found through the
catalog, whose project the policy file names, and keeps each supplied with as
many workers as it can use and no more (seed 000 §4.4): a master needs one
worker for each of its tasks that no worker holds, at most as many as its
capacity (the tasks it can keep running, which it measures and advertises)
allows, plus the workers it has from this pool. When they need more than
max_workers in all, the masters share them in the proportions of the policy's
distribution; a master that needs less than its share leaves the rest to the
others. The decision ("proj1:800, proj2-A:1000, proj2-B:200") is published to
the catalog as a record of type wq_pool under the pool's --name.

The policy file holds one "name: value" a line (# starts a comment):

  max_workers: 200                 most workers the pool keeps (required)
  distribution: proj1=1, proj2.*=3 the projects served (regular expressions,
                                   anchored) and their shares (required)
  decision: D6                     D1 (one per task), D2 (D1 rising by
                                   max_change), D3 (capped by capacity), D4
                                   (D3 with default_capacity until a master
                                   reports one), D5 (D3 rising), D6 (D4
                                   rising; the default), D7 (D6 with
                                   billing_cycle; the default with one)
  max_change: 60                   D2, D5, D6, D7: most workers added a minute
  default_capacity: 20             D4, D6, D7: capacity of a master, in tasks,
                                   until it reports one
  billing_cycle: 20m               workers are billed by this period: an idle
                                   worker leaves only near the end of a cycle
  strategy: additive               how a master's missing workers become
                                   batch jobs, as the factory's --strategy
  shapes: 4x2h, 16x30m             the shapes a worker job may take, as
                                   --shapes (and instead of it)

The pool reads the file again when it changes; a bad edit is reported, with
its file and line, and the last good policy stays in force.

Each worker is submitted for one master, and tells it the pool's name (the
master counts them in workers_by_pool, their cores in cores_by_pool; a worker
of k times --cores counts as k workers). The decision is enforced as seed 000
§4.5 says: the pool's record lists the workers it gives each master; a master
that has more of the pool's workers gives the excess no new task and releases
each the moment its last task is done; a released worker, or one whose master
is gone, picks its next master among the pool's at random, weighted by the
workers each may still take (--stay: it serves only the master it was
submitted for, and comes straight back when released: the master then keeps
it drained until it leaves at -t or the decision has room for it, rather than
releasing it again each time).
Workers that end are replaced while the masters still need them, never for a
move. The pool never removes a worker that runs a task: workers no master has
room for leave after -t (or, with a billing cycle, near the end of their
cycle). On exit, and on SIGINT or SIGTERM, it removes every worker it
submitted.

--shapes lets each worker job take one of several shapes, CORESxWALL
(e.g. 4x2h,16x30m): each job is submitted as the shape predicted to finish
first (seed 002's SA): on slurm, by SLURM's own prediction (sbatch
--test-only); on local, by a conservative-backfilling model of the cores free;
elsewhere the first shape. A job of k workers takes k times the shape's cores,
cut to the workers max_workers leaves room for; a worker of C cores counts as
C/--cores workers rounded up, and the batch system ends it at its wall time.

The masters' addresses are those the catalog heard them from: the execution
hosts must reach them there.`,
		Args: cmdutil.ExactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.config()
			if err != nil {
				return err
			}
			cfg.Logger = o.log.logger(s.Err)
			return o.run(cmd.Context(), cfg.Logger, func(d batch.Driver) error {
				cfg.Driver = d
				cfg.Chooser = o.chooser(d)
				return pool.Run(cmd.Context(), cfg)
			})
		},
	}
	f := cmd.Flags()
	o.batchWorkers.add(f, &o.cfg.Worker, &o.cfg.Limits.MaxPending, &o.cfg.Limits.TasksPerWorker,
		"run this worker program instead of this program's worker command (it must take --from-factory, --follow-pool unless --stay, and --billing-cycle with a billing cycle)",
		"candidate worker job shapes CORESxWALL,... (e.g. 4x2h,16x30m): each job takes the one predicted to finish first (the policy's shapes: key wins)")
	f.StringVar(&o.cfg.PolicyFile, "policy", "", "the policy `FILE` (required)")
	f.StringVar(&o.cfg.Name, "name", "", "the pool's name, told to the masters and in the catalog (default HOSTNAME-PID)")
	f.StringVarP(&o.cfg.PasswordFile, "password", "P", "", "password `FILE` shared with the masters; it also signs the published decision, which masters with it follow only signed")
	f.BoolVar(&o.cfg.Stay, "stay", false, "keep each worker with the master it was submitted for, instead of moving to the masters the decision gives room")
	f.Var(cmdutil.Seconds(&o.cfg.Interval), "interval", "how often to read the catalog and publish the decision (default 10s)")
	o.log.add(cmd)
	return cmd
}

func (o *poolOptions) config() (pool.Config, error) {
	cfg := o.cfg
	cfg.Limits.Retries = o.retries()
	switch {
	case o.batchType == "":
		return cfg, cmdutil.Usagef("-T is required (local, slurm, sge or condor)")
	case !slices.Contains(batch.Kinds(), o.batchType) || o.batchType == "wq":
		return cfg, cmdutil.Usagef("unknown batch type %q (use local, slurm, sge or condor)", o.batchType)
	case cfg.PolicyFile == "":
		return cfg, cmdutil.Usagef("--policy FILE is required")
	case cfg.Limits.MaxPending < 0 || cfg.Limits.TasksPerWorker < 0 || o.maxFailures < 1:
		return cfg, cmdutil.Usagef("--max-pending and --tasks-per-worker must not be negative, --max-failures at least 1")
	case cfg.Worker.Cores < 0 || cfg.Worker.MemoryMB < 0 || cfg.Worker.DiskMB < 0:
		return cfg, cmdutil.Usagef("worker resources must not be negative")
	}
	// Read now, so that a policy file that cannot be opened is a usage
	// error naming the flag; one that says something wrong is an input
	// error at its file:line. Run reads it again.
	if _, err := pool.ReadPolicy(cfg.PolicyFile); err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			return cfg, cmdutil.Usagef("--policy %s: %w", cfg.PolicyFile, pe.Err)
		}
		return cfg, err
	}
	if err := checkPasswordFile(cfg.PasswordFile); err != nil {
		return cfg, err
	}
	var err error
	if cfg.Shapes, err = o.parseShapes(); err != nil {
		return cfg, err
	}
	cfg.Catalogs = o.catalogAddrs()
	if err := o.setWorker(&cfg.Worker); err != nil {
		return cfg, err
	}
	return cfg, nil
}
