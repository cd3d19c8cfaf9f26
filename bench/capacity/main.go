// Command capacity-bench measures a master's capacity estimate against the
// real thing, on this machine (issue 13; seed 000 Fig. 4.3, seed 003
// Fig. 4). A real workqueue.Master, its link limited by Config.Bandwidth,
// runs sleep tasks with an input, an execution time and an output of given
// sizes on real `workqueue worker` processes (one core each; sleeping, so
// that many fit on two cores).
//
//   - sweep: for workloads whose capacity 1 + t_e/t_io is about 3, 6 and
//     12, runs each on N workers for a range of N and measures the steady
//     throughput (tasks finished a second between the 20% and the 90%
//     mark). The best worker count is the smallest N within -tol of the
//     best throughput; the knee is the best throughput over one worker's
//     (the fewest workers' throughput over their number), where the two
//     lines of seed 003's model meet; the power-best count is the N of the
//     highest throughput over cycle time (Kleinrock's power, X²/N), the
//     operating point of a closed queueing network that trades throughput
//     against the time each worker waits. Beside the measured throughput,
//     a closed-network model of the same workload (mean-value analysis: the
//     link a processor-sharing queue of demand t_io, the sleep a delay of
//     t_e; nothing fitted) shows how the throughput approaches the link's
//     limit only slowly past the knee. The master's estimates (Eq. 4.5 over
//     the recent tasks, seed 003's form over the same tasks, which the
//     master advertises, and the weighted form) are read at the 90% mark
//     of each run.
//   - converge: one workload whose tasks share a cached input (seed 003's
//     cached-input form, C = 1 + t_e/(t_io − t_c)), started with each of
//     -start workers; the weighted estimate (α = 0.05) after every task, and
//     the tasks until it stays within -tol of the workload's capacity
//     (1 + t_e/t_io with the execution time the run's tasks took). The
//     estimates go to a CSV and a PNG (gonum/plot).
//
// The weighted estimate starts at 0 (seed 003's C_0) and needs about 45
// tasks to come within 10% of a steady value, hence 80 tasks a run at
// least. It prints Markdown tables. bench/capacity_bench.sh runs it.
package main

import (
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/rightsize/rightsize/bench/internal/localworkers"
	"github.com/rightsize/rightsize/workqueue"
)

// workload is a kind of task: bytes in (unique to the task), seconds of
// sleep, bytes out, and bytes of an input all tasks share and workers
// cache.
type workload struct {
	in, out, shared int64
	exec            time.Duration
}

// design is the capacity the workload has by construction on a link of
// bandwidth bytes a second: 1 + t_e/t_io, with t_io the task's own bytes
// over the link (the shared input moves once a worker; seed 003's cached
// form, 1 + t_e/(t_io − t_c)).
func (w workload) design(bandwidth float64) float64 { return w.capacity(w.exec, bandwidth) }

// capacity is design with the execution time the tasks took: sleep, the
// shell and the output, and the machine's load, stretch it.
func (w workload) capacity(exec time.Duration, bandwidth float64) float64 {
	return 1 + exec.Seconds()/(float64(w.in+w.out)/bandwidth)
}

func (w workload) String() string {
	s := fmt.Sprintf("%s in / %v / %s out", kb(w.in), w.exec, kb(w.out))
	if w.shared > 0 {
		s += fmt.Sprintf(", %s shared", kb(w.shared))
	}
	return s
}

func kb(n int64) string { return fmt.Sprintf("%d KB", n/1000) }

// sample is the master's estimates after a task finished.
type sample struct {
	done     int
	at       time.Duration // since the first submit
	window   float64       // Eq. 4.5 over the recent tasks
	workers  float64       // seed 003's form over them, advertised
	weighted float64       // the EMA
}

// run is one workload on n workers.
type run struct {
	n          int
	finished   []time.Duration // since the first submit, in order
	samples    []sample
	throughput float64 // tasks a second between the 20% and 90% marks
	at90       sample
	exec       time.Duration // mean of the tasks' execution times
}

type bench struct {
	workqueue string
	dir       string
	bandwidth int64
}

func main() {
	mode := flag.String("mode", "sweep", "sweep or converge")
	wq := flag.String("workqueue", "bin/workqueue", "the workqueue command (its worker runs the tasks)")
	dir := flag.String("dir", "bench/out/capacity", "working directory (outputs, CSV, PNG)")
	bandwidth := flag.Int64("bandwidth", 2_000_000, "the master's link, bytes a second")
	execTime := flag.Duration("exec", time.Second, "sweep: the tasks' execution time")
	targets := flag.String("targets", "3,6,12", "sweep: the workloads' capacities by design, 1 + t_e/t_io")
	tasks := flag.Int("tasks", 0, "tasks a run (0: sweep 10×capacity, at least 80; converge 500)")
	tol := flag.Float64("tol", 0.05, "sweep: best N is the smallest within this fraction of the best throughput; converge: the band around the capacity")
	convExec := flag.Duration("converge-exec", 5*time.Second, "converge: the tasks' execution time")
	convTarget := flag.Float64("converge-capacity", 100, "converge: the workload's capacity by design")
	shared := flag.Int64("shared", 400_000, "converge: bytes of the input all tasks share (cached)")
	starts := flag.String("start", "50,150", "converge: worker counts to start with")
	flag.Parse()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	b := &bench{workqueue: *wq, dir: *dir, bandwidth: *bandwidth}
	var err error
	switch *mode {
	case "sweep":
		err = b.sweep(*targets, *execTime, *tasks, *tol)
	case "converge":
		n := *tasks
		if n == 0 {
			n = 500
		}
		err = b.converge(*starts, *convExec, *convTarget, *shared, n, *tol)
	default:
		err = fmt.Errorf("-mode %q: want sweep or converge", *mode)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// sizes returns a workload of exec with capacity c by design: the task's
// bytes split evenly between input and output.
func (b *bench) sizes(c float64, exec time.Duration) workload {
	tio := exec.Seconds() / (c - 1)
	half := int64(tio * float64(b.bandwidth) / 2)
	return workload{in: half, out: half, exec: exec}
}

// counts returns the worker counts tried for a workload of capacity c:
// every count up to c+2, then a few beyond, up to 2c.
func counts(c int) []int {
	var ns []int
	lo := max(1, c/3)
	for n := lo; n <= c+2; n++ {
		if n < c-3 && (c-n)%2 == 1 { // coarser far below the knee
			continue
		}
		ns = append(ns, n)
	}
	for _, n := range []int{c + c/2, 2 * c} {
		if n > ns[len(ns)-1] {
			ns = append(ns, n)
		}
	}
	return ns
}

func (b *bench) sweep(targets string, exec time.Duration, tasks int, tol float64) error {
	cs, err := localworkers.Counts(targets)
	if err != nil {
		return fmt.Errorf("-targets %w", err)
	}
	var rows [][]*run
	var loads []workload
	for _, c := range cs {
		w := b.sizes(float64(c), exec)
		n := tasks
		if n == 0 {
			n = max(80, 10*c)
		}
		var runs []*run
		for _, workers := range counts(c) {
			r, err := b.run(w, workers, n)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "capacity-bench: %v on %d workers: %.3f tasks/s, Eq. 4.5 %.2f, workers %.2f, weighted %.2f\n",
				w, workers, r.throughput, r.at90.window, r.at90.workers, r.at90.weighted)
			runs = append(runs, r)
		}
		rows, loads = append(rows, runs), append(loads, w)
	}

	fmt.Printf("### Throughput against workers (link %.1f MB/s)\n\n", float64(b.bandwidth)/1e6)
	fmt.Println("| workload (capacity by design) | N: throughput (tasks/s) | closed-network model, same N (tasks/s) | best N | power-best N | knee |")
	fmt.Println("|---|---|---|---|---|---|")
	bestNs, powerNs, knees := make([]int, len(rows)), make([]int, len(rows)), make([]float64, len(rows))
	for i, runs := range rows {
		best := 0.0
		for _, r := range runs {
			best = max(best, r.throughput)
		}
		model := closedNetwork(float64(loads[i].in+loads[i].out)/float64(b.bandwidth), loads[i].exec.Seconds(), runs[len(runs)-1].n)
		var cells, modelled []string
		bestPower := 0.0
		for _, r := range runs {
			if bestNs[i] == 0 && r.throughput >= (1-tol)*best {
				bestNs[i] = r.n
			}
			if p := r.throughput * r.throughput / float64(r.n); p > bestPower {
				bestPower, powerNs[i] = p, r.n
			}
			cells = append(cells, fmt.Sprintf("%d: %.2f", r.n, r.throughput))
			modelled = append(modelled, fmt.Sprintf("%.2f", model[r.n-1]))
		}
		// The knee: where the line of the fewest workers' throughput,
		// each worker alone, meets the best throughput (seed 003:
		// C·T_w = T_m).
		knees[i] = best / (runs[0].throughput / float64(runs[0].n))
		fmt.Printf("| %v (%d) | %s | %s | **%d** | **%d** | **%.1f** |\n", loads[i], cs[i], strings.Join(cells, ", "),
			strings.Join(modelled, ", "), bestNs[i], powerNs[i], knees[i])
	}

	fmt.Printf("\n### The master's estimates at the 90%% mark of each run: median over the runs (range), and against the best N, the power-best N and the knee\n\n")
	fmt.Println("| capacity by design | Eq. 4.5 | against best N, power-best N, knee | seed 003's form over Eq. 4.5's tasks (advertised, `capacity_tasks`) | against best N, power-best N, knee | weighted (α = 0.05) | against best N, power-best N, knee |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for i, runs := range rows {
		fmt.Printf("| %d", cs[i])
		for _, get := range []func(sample) float64{
			func(s sample) float64 { return s.window },
			func(s sample) float64 { return s.workers },
			func(s sample) float64 { return s.weighted },
		} {
			var xs []float64
			for _, r := range runs {
				xs = append(xs, get(r.at90))
			}
			m := median(xs)
			fmt.Printf(" | %.2f (%.2f–%.2f) | **%+.0f%%**, **%+.0f%%**, **%+.0f%%**", m, slices.Min(xs), slices.Max(xs),
				100*(m/float64(bestNs[i])-1), 100*(m/float64(powerNs[i])-1), 100*(m/knees[i]-1))
		}
		fmt.Println(" |")
	}
	return nil
}

// closedNetwork is the throughput of 1..n workers by exact mean-value
// analysis of a closed network of one processor-sharing queue, the
// master's link (demand d seconds a task), and one delay, the task's run
// (z seconds): R(k) = d·(1 + Q(k−1)), X(k) = k/(z + R(k)), Q(k) = X(k)·R(k).
// Its asymptotes, k/(d+z) and 1/d, meet at k = 1 + z/d, the capacity.
func closedNetwork(d, z float64, n int) []float64 {
	xs := make([]float64, n)
	q := 0.0
	for k := 1; k <= n; k++ {
		r := d * (1 + q)
		xs[k-1] = float64(k) / (z + r)
		q = xs[k-1] * r
	}
	return xs
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (b *bench) converge(starts string, exec time.Duration, target float64, shared int64, tasks int, tol float64) error {
	ns, err := localworkers.Counts(starts)
	if err != nil {
		return fmt.Errorf("-start %w", err)
	}
	w := b.sizes(target, exec)
	w.shared = shared
	fmt.Printf("### Convergence of the weighted estimate (α = 0.05), link %.1f MB/s, %v, capacity %.0f by design\n\n",
		float64(b.bandwidth)/1e6, w, w.design(float64(b.bandwidth)))
	var runs []*run
	for _, n := range ns {
		r, err := b.run(w, n, tasks)
		if err != nil {
			return err
		}
		runs = append(runs, r)
		if err := writeCSV(filepath.Join(b.dir, fmt.Sprintf("converge-%d.csv", n)), r.samples); err != nil {
			return err
		}
	}
	// The workload's capacity is seed 003's 1 + t_e/t_io with the
	// execution time the run's tasks took. A run with more workers than
	// that also shows it: a master kept busy finishes X tasks a second,
	// so it keeps 1 + X·t_e workers busy (C·T_w = T_m).
	fmt.Printf("| workers at the start | mean t_e (s) | capacity, 1 + t_e/t_io | throughput (tasks/s); 1 + throughput × t_e | weighted estimate after 10 / 25 / 50 / 100 / 200 / 300 tasks / at the end | Eq. 4.5, seed 003's form over its tasks, at the end | tasks until the weighted estimate stays within ±%.0f%% of the capacity |\n", 100*tol)
	fmt.Println("|---|---|---|---|---|---|---|")
	var caps []float64
	for _, r := range runs {
		var at []string
		for _, k := range []int{10, 25, 50, 100, 200, 300} {
			if k <= len(r.samples) {
				at = append(at, fmt.Sprintf("%.1f", r.samples[k-1].weighted))
			}
		}
		last := r.samples[len(r.samples)-1]
		at = append(at, fmt.Sprintf("%.1f", last.weighted))
		c := w.capacity(r.exec, float64(b.bandwidth))
		caps = append(caps, c)
		within := "never"
		if k := settled(r.samples, c, tol); k > 0 {
			within = strconv.Itoa(k)
		}
		fmt.Printf("| %d | %.2f | %.1f | %.2f; %.1f | %s | %.1f, %.1f | **%s** |\n", r.n, r.exec.Seconds(), c,
			r.throughput, 1+r.throughput*r.exec.Seconds(), strings.Join(at, " / "), last.window, last.workers, within)
	}
	return drawConvergence(filepath.Join(b.dir, "converge.png"), runs, caps)
}

// settled returns the tasks after which the weighted estimate stays within
// tol of c, or 0 if it does not.
func settled(ss []sample, c, tol float64) int {
	k := 0
	for i, s := range ss {
		if math.Abs(s.weighted-c) > tol*c {
			k = i + 1
		}
	}
	if k == len(ss) {
		return 0
	}
	return k + 1
}

func writeCSV(path string, ss []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.Write([]string{"tasks_done", "seconds", "capacity_eq45", "capacity_workers", "capacity_weighted"})
	for _, s := range ss {
		cw.Write([]string{strconv.Itoa(s.done), fmt.Sprintf("%.3f", s.at.Seconds()),
			fmt.Sprintf("%.3f", s.window), fmt.Sprintf("%.3f", s.workers), fmt.Sprintf("%.3f", s.weighted)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// drawConvergence plots the weighted estimate against tasks done, one line
// per run, with each run's capacity (caps) dashed in its colour.
func drawConvergence(path string, runs []*run, caps []float64) error {
	p := plot.New()
	p.Title.Text = "Weighted capacity estimate (α = 0.05)"
	p.X.Label.Text = "tasks done"
	p.Y.Label.Text = "capacity (workers)"
	p.Legend.Top, p.Legend.Left = false, false
	last := 0
	for _, r := range runs {
		last = max(last, len(r.samples))
	}
	for i, c := range caps {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: c}, {X: float64(last), Y: c}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = plotutil.Color(i), []vg.Length{vg.Points(2), vg.Points(3)}
		p.Legend.Add(fmt.Sprintf("capacity, %d workers' run (%.0f)", runs[i].n, c), l)
		p.Add(l)
	}
	for i, r := range runs {
		xy := make(plotter.XYs, len(r.samples))
		for j, s := range r.samples {
			xy[j] = plotter.XY{X: float64(s.done), Y: s.weighted}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = plotutil.Color(i), vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("started with %d workers", r.n), l)
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}

// run runs tasks of w on n workers, all connected before the first task
// is submitted, and returns what it measured.
func (b *bench) run(w workload, n, tasks int) (*run, error) {
	var r *run
	err := localworkers.Run(b.workqueue, b.dir, workqueue.Config{Bandwidth: b.bandwidth}, n, func(m *workqueue.Master, _ []*exec.Cmd, dir string) error {
		var err error
		r, err = measure(m, dir, w, n, tasks)
		return err
	})
	return r, err
}

// measure runs tasks of w on master m's n workers, their outputs in dir.
func measure(m *workqueue.Master, dir string, w workload, n, tasks int) (*run, error) {

	input := make([]byte, w.in)
	sharedInput := make([]byte, w.shared)
	cmd := fmt.Sprintf("sleep %g && head -c %d /dev/zero > out", w.exec.Seconds(), w.out)
	start := time.Now()
	for i := range tasks {
		t := &workqueue.Task{Command: cmd, Tag: strconv.Itoa(i)}
		t.AddInputBuffer(input, "in", false)
		if w.shared > 0 {
			t.AddInputBuffer(sharedInput, "shared", true)
		}
		t.AddOutput(filepath.Join(dir, "out."+strconv.Itoa(i)), "out", false)
		if _, err := m.Submit(t); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	r := &run{n: n}
	var exec time.Duration
	for i := range tasks {
		res, err := m.Wait(ctx)
		if err != nil {
			return nil, fmt.Errorf("%d workers, after %d of %d tasks: %w", n, i, tasks, err)
		}
		if !res.OK() {
			return nil, fmt.Errorf("task %s: %v (exit %d): %v", res.Tag, res.Status, res.ExitCode, res.Err)
		}
		at := time.Since(start)
		os.Remove(filepath.Join(dir, "out."+res.Tag))
		exec += res.Exec
		r.finished = append(r.finished, at)
		st := m.Stats()
		r.samples = append(r.samples, sample{done: i + 1, at: at, window: st.Capacity, workers: st.CapacityWorkers, weighted: st.CapacityWeighted})
	}
	r.exec = exec / time.Duration(tasks)
	lo, hi := tasks/5, tasks*9/10-1
	r.throughput = float64(hi-lo) / (r.finished[hi] - r.finished[lo]).Seconds()
	r.at90 = r.samples[hi]
	return r, nil
}
