package factory

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
)

// benchTasks is how many trivial tasks each side of BenchmarkSlurmTasks runs.
const benchTasks = 100

// BenchmarkSlurmTasks runs the same trivial tasks on the single-node SLURM
// two ways, side by side: through two Work Queue workers that the factory
// submitted with sbatch (timed from the factory's start, so the workers'
// own wait in SLURM's queue is included), and as one SLURM job per task
// through the batch driver (the anchor). Both use the node's two cores.
// Run it with -benchtime=1x (bench/factory_bench.sh does).
func BenchmarkSlurmTasks(b *testing.B) {
	testutil.NeedBatchSystem(b, "slurm")
	b.Run("factory-workers", func(b *testing.B) {
		var first, total time.Duration
		for range b.N {
			m := startMaster(b, workqueue.Config{})
			submitTasks(b, m, benchTasks, "true")
			start := time.Now()
			r := startFactory(b, Config{
				Driver: batchDriver(b, "slurm"),
				Master: masterAddr(m),
				Worker: Worker{Cores: 1, MemoryMB: 1000, IdleTimeout: time.Minute, Name: "wqf-bench"},
				Limits: Limits{Max: 2},
			}, b.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			for i := range benchTasks {
				res, err := m.Wait(ctx)
				if err != nil || !res.OK() {
					b.Fatalf("task %d: %v %+v", i, err, res)
				}
				if i == 0 {
					first += time.Since(start)
				}
			}
			total += time.Since(start)
			cancel()
			b.StopTimer()
			r.stop()
			b.StartTimer()
		}
		b.ReportMetric(float64(benchTasks*b.N)/total.Seconds(), "tasks/s")
		b.ReportMetric(first.Seconds()/float64(b.N), "s-to-first-result")
	})
	b.Run("job-per-task", func(b *testing.B) {
		var total time.Duration
		for range b.N {
			d := batchDriver(b, "slurm")
			dir := b.TempDir()
			start := time.Now()
			for i := range benchTasks {
				if _, err := d.Submit(context.Background(), &batch.Job{Name: "wqf-bench-" + strconv.Itoa(i), Command: "true", Dir: dir, Resources: batch.Resources{Cores: 1}}); err != nil {
					b.Fatal(err)
				}
			}
			deadline := time.After(10 * time.Minute)
			for done := 0; done < benchTasks; {
				select {
				case ev := <-d.Events():
					if ev.State.Final() {
						if ev.State != batch.Done || ev.ExitCode != 0 {
							b.Fatalf("job %s: %+v", ev.ID, ev.Status)
						}
						done++
					}
				case <-deadline:
					b.Fatalf("%d of %d jobs done after 10 minutes", done, benchTasks)
				}
			}
			total += time.Since(start)
		}
		b.ReportMetric(float64(benchTasks*b.N)/total.Seconds(), "tasks/s")
	})
}
