// Command masterscale-bench measures whether a real workqueue.Master loses
// time when many workers are connected (issue 13): seed 000 explains its
// conservative pool decisions' better turnaround on Table 4.2's P2–P5 by
// "the overheads that come from the master communicating with too many
// workers", and the simulator's master pays no such cost. For each worker
// count N (-workers), N real one-core `workqueue worker` processes on
// 127.0.0.1 connect to a master in this process before the first task, and
// three things are measured:
//
//   - idle: the master's CPU over -idle with N workers connected and no
//     task, in µs a second and µs a second per worker;
//   - wave: waves×N tasks of `sleep -sleep`, each with a 1 KB input and
//     a 1 KB output, every worker busy: the makespan against the ideal
//     (waves × the sleep), the master's CPU per task and the workers'
//     (their tasks' included, from /proc), which share the machine's
//     cores with it;
//   - in flight: -inflight tasks of `sleep -inflight-sleep` kept submitted
//     at once (a closed loop) with N workers connected, most of them idle:
//     the throughput against the ideal and the master's CPU per task, a
//     cost per connected worker paid on each dispatch showing as a rise.
//
// The master's CPU is this process's (getrusage), which the submitting loop
// shares; the workers are other processes. It prints a Markdown table.
// bench/masterscale_bench.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rightsize/rightsize/bench/internal/localworkers"
	"github.com/rightsize/rightsize/workqueue"
)

type bench struct {
	workqueue string
	dir       string
}

// figures are one worker count's measurements.
type figures struct {
	n                    int
	idleCPU              time.Duration // per second of idle
	waveSpan, waveIdeal  time.Duration
	waveCPU              time.Duration // per task
	waveWorkerCPU        time.Duration // per task, the workers' and their tasks'
	flightRate, flightId float64       // tasks a second, measured and ideal
	flightCPU            time.Duration // per task
}

func main() {
	wq := flag.String("workqueue", "bin/workqueue", "the workqueue command (its worker runs the tasks)")
	dir := flag.String("dir", "bench/out/masterscale", "working directory")
	counts := flag.String("workers", "10,50,100,200", "worker counts")
	idle := flag.Duration("idle", 10*time.Second, "idle: how long the master is watched with no task")
	waves := flag.Int("waves", 5, "wave: tasks per worker")
	sleep := flag.Duration("sleep", time.Second, "wave: each task's sleep")
	inflight := flag.Int("inflight", 8, "in flight: tasks kept submitted at once")
	flightSleep := flag.Duration("inflight-sleep", 100*time.Millisecond, "in flight: each task's sleep")
	flightTasks := flag.Int("inflight-tasks", 2000, "in flight: tasks in all")
	flag.Parse()
	ns, err := localworkers.Counts(*counts)
	if err != nil {
		log.Fatalf("-workers %v", err)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	b := &bench{workqueue: *wq, dir: *dir}
	var rows []figures
	for _, n := range ns {
		f := figures{n: n}
		err := b.withWorkers(n, func(m *workqueue.Master, dir string, workersCPU func() time.Duration) error {
			cpu0 := selfCPU()
			time.Sleep(*idle)
			f.idleCPU = (selfCPU() - cpu0) * time.Second / *idle
			var err error
			w0 := workersCPU()
			if f.waveSpan, f.waveCPU, err = b.wave(m, dir, *waves*n, *sleep); err != nil {
				return err
			}
			f.waveWorkerCPU = (workersCPU() - w0) / time.Duration(*waves*n)
			f.waveIdeal = time.Duration(*waves) * *sleep
			f.flightId = float64(*inflight) / flightSleep.Seconds()
			f.flightRate, f.flightCPU, err = b.inFlight(m, dir, *flightTasks, *inflight, *flightSleep)
			return err
		})
		if err != nil {
			log.Fatalf("%d workers: %v", n, err)
		}
		fmt.Fprintf(os.Stderr, "masterscale-bench: %d workers: idle %v/s; wave %v (ideal %v), %v/task, workers %v/task; in flight %.1f/s (ideal %.1f), %v/task\n",
			n, f.idleCPU, f.waveSpan, f.waveIdeal, f.waveCPU, f.waveWorkerCPU, f.flightRate, f.flightId, f.flightCPU)
		rows = append(rows, f)
	}
	fmt.Printf("| workers | idle: master CPU (µs/s; per worker) | wave of %d×N `sleep %v`: makespan / ideal; master CPU; workers' CPU, their tasks' included (µs/task) | %d in flight of `sleep %v`: tasks/s / ideal; master CPU (µs/task) |\n",
		*waves, *sleep, *inflight, *flightSleep)
	fmt.Println("|---|---|---|---|")
	for _, f := range rows {
		fmt.Printf("| %d | %.0f; %.1f | %.2f s / %.0f s = **%.3f**; %.0f; %.0f | %.1f / %.0f = **%.3f**; %.0f |\n", f.n,
			us(f.idleCPU), us(f.idleCPU)/float64(f.n),
			f.waveSpan.Seconds(), f.waveIdeal.Seconds(), f.waveSpan.Seconds()/f.waveIdeal.Seconds(), us(f.waveCPU), us(f.waveWorkerCPU),
			f.flightRate, f.flightId, f.flightRate/f.flightId, us(f.flightCPU))
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// withWorkers runs do on a master with n workers connected, with a
// directory for its outputs and a function that returns the CPU time the
// workers have used so far, the tasks they have reaped included.
func (b *bench) withWorkers(n int, do func(m *workqueue.Master, dir string, workersCPU func() time.Duration) error) error {
	return localworkers.Run(b.workqueue, b.dir, workqueue.Config{}, n, func(m *workqueue.Master, workers []*exec.Cmd, dir string) error {
		return do(m, dir, func() time.Duration {
			var sum time.Duration
			for _, c := range workers {
				sum += processCPU(c.Process.Pid)
			}
			return sum
		})
	})
}

// processCPU returns the CPU time of process pid and of its children it
// has waited for (utime, stime, cutime and cstime of /proc/PID/stat, in
// the kernel's 100 Hz ticks), or 0 if it cannot be read.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime field 14.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, v := range f[11:15] {
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// task returns a task that sleeps for sleep, with an input and an output
// of size bytes.
func task(dir string, i int, input []byte, size int, sleep time.Duration) *workqueue.Task {
	t := &workqueue.Task{Command: fmt.Sprintf("sleep %g && head -c %d /dev/zero > out", sleep.Seconds(), size), Tag: strconv.Itoa(i)}
	t.AddInputBuffer(input, "in", false)
	t.AddOutput(filepath.Join(dir, "out."+strconv.Itoa(i)), "out", false)
	return t
}

// wait waits for a task and checks that it succeeded, removing its output.
func wait(ctx context.Context, m *workqueue.Master, dir string) error {
	r, err := m.Wait(ctx)
	if err != nil {
		return err
	}
	if !r.OK() {
		return fmt.Errorf("task %s: %v (exit %d): %v", r.Tag, r.Status, r.ExitCode, r.Err)
	}
	return os.Remove(filepath.Join(dir, "out."+r.Tag))
}

// wave submits tasks at once and returns the time until the last is done
// and the master's CPU per task.
func (b *bench) wave(m *workqueue.Master, dir string, tasks int, sleep time.Duration) (span, cpu time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	input := make([]byte, 1000)
	start, cpu0 := time.Now(), selfCPU()
	for i := range tasks {
		if _, err := m.Submit(task(dir, i, input, 1000, sleep)); err != nil {
			return 0, 0, err
		}
	}
	for i := range tasks {
		if err := wait(ctx, m, dir); err != nil {
			return 0, 0, fmt.Errorf("wave, after %d of %d tasks: %w", i, tasks, err)
		}
	}
	return time.Since(start), (selfCPU() - cpu0) / time.Duration(tasks), nil
}

// inFlight keeps k tasks submitted until tasks have run, and returns the
// throughput and the master's CPU per task.
func (b *bench) inFlight(m *workqueue.Master, dir string, tasks, k int, sleep time.Duration) (rate float64, cpu time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	input := make([]byte, 1000)
	start, cpu0 := time.Now(), selfCPU()
	submitted := 0
	for ; submitted < min(k, tasks); submitted++ {
		if _, err := m.Submit(task(dir, submitted, input, 1000, sleep)); err != nil {
			return 0, 0, err
		}
	}
	for i := range tasks {
		if err := wait(ctx, m, dir); err != nil {
			return 0, 0, fmt.Errorf("in flight, after %d of %d tasks: %w", i, tasks, err)
		}
		if submitted < tasks {
			if _, err := m.Submit(task(dir, submitted, input, 1000, sleep)); err != nil {
				return 0, 0, err
			}
			submitted++
		}
	}
	return float64(tasks) / time.Since(start).Seconds(), (selfCPU() - cpu0) / time.Duration(tasks), nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
