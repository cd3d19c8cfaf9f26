package workqueue

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// benchTasks is the size of the benchmark workload: trivial commands that
// each write one output file, fetched back by the master.
const benchTasks = 2000

func benchWorkers() int {
	if n, err := strconv.Atoi(os.Getenv("WQ_BENCH_WORKERS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// BenchmarkMaster2000 runs 2000 trivial tasks (echo i > out) through a master
// served by two `workqueue worker` processes, and reports throughput and
// the master's own cost per task: CPU time of this process (the master) and
// the loop's bookkeeping time.
func BenchmarkMaster2000(b *testing.B) {
	m, err := Listen(Config{Addr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	var procs []*exec.Cmd
	for i := 0; i < benchWorkers(); i++ {
		cmd := exec.Command(filepath.Join(binDir, "workqueue"), "worker", "-q", "-t", "120", "-s", b.TempDir(),
			"127.0.0.1", strconv.Itoa(m.Port()))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	testutil.WaitFor(b, "the workers to connect", time.Minute, func() bool { return m.Stats().WorkersConnected >= len(procs) })
	dir := b.TempDir()
	var cpu, think time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		before := m.Stats().ThinkTime
		cpu0 := selfCPU()
		for i := 0; i < benchTasks; i++ {
			t := &Task{Command: fmt.Sprintf("echo %d > out", i)}
			t.AddOutput(filepath.Join(dir, fmt.Sprintf("out.%d", i)), "out", false)
			if _, err := m.Submit(t); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < benchTasks; i++ {
			r, err := m.Wait(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if !r.OK() {
				b.Fatalf("task %d: %v %d %s", r.ID, r.Status, r.ExitCode, r.Output)
			}
		}
		cpu += selfCPU() - cpu0
		think += m.Stats().ThinkTime - before
	}
	b.StopTimer()
	total := float64(b.N * benchTasks)
	b.ReportMetric(total/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(float64(cpu.Microseconds())/total, "master-cpu-µs/task")
	b.ReportMetric(float64(think.Microseconds())/total, "loop-µs/task")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkForkExec2000 runs the same 2000 commands with plain fork/exec of
// /bin/sh, two at a time: the floor any dispatcher adds to.
func BenchmarkForkExec2000(b *testing.B) {
	dir := b.TempDir()
	for n := 0; n < b.N; n++ {
		var wg sync.WaitGroup
		next := make(chan int)
		for w := 0; w < benchWorkers(); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("echo %d > out.%d", i, i))
					cmd.Dir = dir
					if err := cmd.Run(); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for i := 0; i < benchTasks; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*benchTasks)/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(0, "ns/op")
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
