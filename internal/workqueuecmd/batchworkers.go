package workqueuecmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/workqueue/factory"
)

// batchWorkers are the options that `workqueue factory` and `workqueue
// pool` share: the batch system their workers are submitted to, how many
// failures they meet, and the workers' command and resources (into a
// factory.Worker the command owns).
type batchWorkers struct {
	batchType    string
	batchOptions string
	scratch      string
	catalogs     string
	maxFailures  int // failures in a row that end the command: Retries + 1
	workerBinary string
	extraOptions string
	shapes       string
}

// add registers the shared flags on f, the worker's resources and idle
// timeout into w, and --max-pending and --tasks-per-worker into
// maxPending and tasksPerWorker; workerBinaryHelp and shapesHelp are
// the help of the two flags whose meaning differs between the commands.
func (b *batchWorkers) add(f *pflag.FlagSet, w *factory.Worker, maxPending, tasksPerWorker *int, workerBinaryHelp, shapesHelp string) {
	f.StringVarP(&b.batchType, "batch-type", "T", "", "batch system: local, slurm, sge or condor (required)")
	f.StringVarP(&b.catalogs, "catalog", "C", "", "catalog servers HOST:PORT[,HOST:PORT] (default $CATALOG_HOST:$CATALOG_PORT or localhost:9097)")
	f.IntVar(maxPending, "max-pending", *maxPending, "most workers submitted and not yet running (0: no bound)")
	f.IntVar(tasksPerWorker, "tasks-per-worker", 0, "tasks one worker serves at once (default: its --cores, else 1)")
	f.IntVar(&b.maxFailures, "max-failures", 5, "give up after this many rejected jobs or failed workers in a row")
	f.VarP(cmdutil.Seconds(&w.IdleTimeout), "timeout", "t", "a worker exits after this long without work or master (default 5m)")
	f.IntVar(&w.Cores, "cores", 0, "cores per worker, asked of the batch system and offered to the master")
	f.Int64Var(&w.MemoryMB, "memory", 0, "memory per worker in MB, likewise")
	f.Int64Var(&w.DiskMB, "disk", 0, "disk per worker in MB, likewise")
	f.StringArrayVar(&w.Env, "env", nil, "NAME=value to set in the workers' environment (repeatable)")
	f.StringVarP(&b.extraOptions, "extra-options", "E", "", "further options for the workers")
	f.StringVar(&b.workerBinary, "worker-binary", "", workerBinaryHelp)
	f.StringVarP(&b.batchOptions, "batch-options", "B", "", "further options for the batch system (sbatch, qsub), or submit-file lines (condor)")
	f.StringVarP(&b.scratch, "scratch-dir", "S", "", "where the jobs' scripts and output are kept; must be shared with the execution hosts (default: the working directory)")
	f.StringVar(&b.shapes, "shapes", "", shapesHelp)
}

// retries is what --max-failures leaves the plans: it counts the failure
// that ends the command, Retries those met before it.
func (b *batchWorkers) retries() lifecycle.Retries {
	if b.maxFailures == 1 {
		return lifecycle.NoRetry
	}
	return lifecycle.Retries(b.maxFailures - 1)
}

// parseShapes reads --shapes (nil without it).
func (b *batchWorkers) parseShapes() ([]shape.Shape, error) {
	if b.shapes == "" {
		return nil, nil
	}
	s, err := shape.Parse(b.shapes)
	if err != nil {
		return nil, cmdutil.Usagef("--shapes: %v", err)
	}
	return s, nil
}

// catalogAddrs is -C's catalogs, or nil for the default.
func (b *batchWorkers) catalogAddrs() []string {
	if b.catalogs == "" {
		return nil
	}
	return catalogAddrs(b.catalogs)
}

// setWorker checks w's --env and sets its command: --worker-binary's
// absolute path, else this program's worker command, with -E's options.
func (b *batchWorkers) setWorker(w *factory.Worker) error {
	for _, kv := range w.Env {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return cmdutil.Usagef("--env %q is not NAME=value", kv)
		}
	}
	if b.workerBinary != "" {
		path, err := exec.LookPath(b.workerBinary)
		if err != nil {
			// exec.Error says the name again, and a PathError its path.
			var ee *exec.Error
			var pe *fs.PathError
			if errors.As(err, &ee) {
				err = ee.Err
			}
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return cmdutil.Usagef("--worker-binary %s: %w", b.workerBinary, err)
		}
		if path, err = filepath.Abs(path); err != nil {
			return fmt.Errorf("worker binary: %w", err)
		}
		w.Command = []string{path}
	} else {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this program for the workers: %w", err)
		}
		w.Command = []string{self, "worker"}
	}
	w.Args = strings.Fields(b.extraOptions)
	return nil
}

// chooser is the request shape chooser of -T's batch system on d.
func (b *batchWorkers) chooser(d batch.Driver) shape.Chooser {
	return shape.For(b.batchType, d, strings.Fields(b.batchOptions))
}

// run opens -T's batch driver, logging to log, runs the command on it
// (which removes its workers before it returns), and closes it; an
// interrupted run is ExitInterrupted.
func (b *batchWorkers) run(ctx context.Context, log *slog.Logger, run func(batch.Driver) error) error {
	d, err := batch.New(b.batchType, batch.Options{
		Spool: b.scratch, SubmitArgs: strings.Fields(b.batchOptions), Logger: log,
	})
	if err != nil {
		return err
	}
	err = run(d)
	// The run has removed its workers; Close releases the spool.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if cerr := d.Close(cctx); cerr != nil {
		log.Warn("closing the batch driver", "err", cerr)
	}
	if errors.Is(err, context.Canceled) {
		return &cmdutil.ExitError{Code: cmdutil.ExitInterrupted, Err: errors.New("interrupted; its workers are removed")}
	}
	return err
}
