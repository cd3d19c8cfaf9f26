// Command batch-bench measures the batch drivers of batch on this
// machine, each batch system side by side in one run with the local-process
// driver as the anchor, and prints Markdown tables:
//
//   - latency: trivial jobs (the command prints the time it started) run one
//     after another; for each, how long Submit took, how long from Submit to
//     the command starting (the batch system's scheduling delay), and from
//     the command starting to the driver reporting it done (the driver's
//     detection delay: exit-status files are looked for four times per poll
//     interval). Medians and 90th percentiles.
//   - throughput: many trivial jobs submitted back to back: Submit calls per
//     second, and jobs finished per second from the first Submit to the last
//     final event. For SLURM and Grid Engine, the anchor is a bare loop of
//     `sbatch --wrap=true` or `qsub -b y true` in the same run.
//
// It is run by bench/batch_bench.sh, which starts the batch systems.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/batch"
)

func main() {
	kinds := flag.String("kinds", "local,slurm", "drivers to measure, comma-separated")
	seq := flag.Int("seq", 20, "jobs run one after another for the latency figures")
	burst := flag.Int("n", 200, "jobs submitted back to back for the throughput figures")
	poll := flag.Duration("poll", 0, "the drivers' poll interval (0: the default)")
	spool := flag.String("spool", "bench/out/batch", "spool directory")
	flag.Parse()
	if err := os.MkdirAll(*spool, 0o755); err != nil {
		log.Fatal(err)
	}
	opts := batch.Options{Spool: *spool, PollInterval: *poll}

	fmt.Printf("### Per-job latency (%d trivial jobs, one at a time)\n\n", *seq)
	fmt.Println("| driver | Submit (ms) median / p90 | submit→start (ms) median / p90 | start→reported done (ms) median / p90 | total (ms) median / p90 |")
	fmt.Println("|---|---|---|---|---|")
	for _, kind := range strings.Split(*kinds, ",") {
		d, err := batch.New(kind, opts)
		if err != nil {
			log.Fatal(err)
		}
		lat, err := latency(d, *seq)
		d.Close(context.Background())
		if err != nil {
			log.Fatalf("%s: %v", kind, err)
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", kind, lat[0], lat[1], lat[2], lat[3])
	}

	fmt.Printf("\n### Throughput (%d trivial jobs submitted back to back)\n\n", *burst)
	fmt.Println("| what | submissions/s | jobs done/s (first Submit to last final event) |")
	fmt.Println("|---|---|---|")
	for _, kind := range strings.Split(*kinds, ",") {
		if anchor, ok := anchors[kind]; ok {
			rate, err := rawSubmit(kind, *burst, *spool)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("| bare `%s` loop (anchor) | %.0f | — |\n", anchor, rate)
		}
		d, err := batch.New(kind, opts)
		if err != nil {
			log.Fatal(err)
		}
		sub, done, err := throughput(d, *burst)
		d.Close(context.Background())
		if err != nil {
			log.Fatalf("%s: %v", kind, err)
		}
		fmt.Printf("| %s driver | %.0f | %.1f |\n", kind, sub, done)
	}
}

// anchors are the bare submission loops measured beside each driver.
var anchors = map[string]string{"slurm": "sbatch --wrap=true", "sge": "qsub -b y true"}

// stat formats the median and 90th percentile of durations in ms.
type stat []time.Duration

func (s stat) String() string {
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("%.0f / %.0f", ms(s[len(s)/2]), ms(s[len(s)*9/10]))
}

// latency runs n trivial jobs one at a time and returns the Submit call,
// submit→start, start→done and total durations.
func latency(d batch.Driver, n int) ([4]stat, error) {
	var out [4]stat
	ctx := context.Background()
	for i := 0; i < n; i++ {
		t0 := time.Now()
		id, err := d.Submit(ctx, &batch.Job{Name: "latency", Command: "date +%s%N"})
		if err != nil {
			return out, err
		}
		t1 := time.Now()
		ev, err := final(d, id)
		if err != nil {
			return out, err
		}
		t3 := time.Now()
		if ev.State != batch.Done || ev.ExitCode != 0 {
			return out, fmt.Errorf("job %s: %v %v %s", id, ev.State, ev.Err, ev.Stderr)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(ev.Stdout)), 10, 64)
		if err != nil {
			return out, fmt.Errorf("job %s printed %q", id, ev.Stdout)
		}
		t2 := time.Unix(0, ns)
		out[0] = append(out[0], t1.Sub(t0))
		out[1] = append(out[1], t2.Sub(t0))
		out[2] = append(out[2], t3.Sub(t2))
		out[3] = append(out[3], t3.Sub(t0))
	}
	return out, nil
}

// final waits for job id's final event; the caller has no other job.
func final(d batch.Driver, id string) (batch.Event, error) {
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case ev := <-d.Events():
			if ev.ID == id && ev.State.Final() {
				return ev, nil
			}
		case <-timeout:
			return batch.Event{}, fmt.Errorf("job %s did not end in 5 minutes", id)
		}
	}
}

// throughput submits n trivial jobs back to back and returns submissions
// per second and jobs done per second.
func throughput(d batch.Driver, n int) (float64, float64, error) {
	ctx := context.Background()
	start := time.Now()
	pending := map[string]bool{}
	for i := 0; i < n; i++ {
		id, err := d.Submit(ctx, &batch.Job{Name: "burst", Command: "true"})
		if err != nil {
			return 0, 0, err
		}
		pending[id] = true
	}
	submitted := time.Since(start)
	timeout := time.After(10 * time.Minute)
	for len(pending) > 0 {
		select {
		case ev := <-d.Events():
			if !ev.State.Final() {
				continue
			}
			if ev.State != batch.Done || ev.ExitCode != 0 {
				return 0, 0, fmt.Errorf("job %s: %v %v", ev.ID, ev.State, ev.Err)
			}
			delete(pending, ev.ID)
		case <-timeout:
			return 0, 0, fmt.Errorf("%d jobs still pending after 10 minutes", len(pending))
		}
	}
	all := time.Since(start)
	return float64(n) / submitted.Seconds(), float64(n) / all.Seconds(), nil
}

// rawSubmit times a bare loop of the batch system's submit command for a
// trivial job (sbatch --wrap=true, qsub -b y true), then waits for the jobs
// to drain so that they do not slow what is measured next.
func rawSubmit(kind string, n int, dir string) (float64, error) {
	submit := []string{"sbatch", "--parsable", "--output=/dev/null", "--chdir=" + dir, "--wrap=true"}
	if kind == "sge" {
		submit = []string{"qsub", "-terse", "-o", "/dev/null", "-e", "/dev/null", "-b", "y", "true"}
	}
	start := time.Now()
	ids := map[string]bool{}
	for i := 0; i < n; i++ {
		out, err := exec.Command(submit[0], submit[1:]...).Output()
		if err != nil {
			return 0, fmt.Errorf("%s: %v", submit[0], err)
		}
		ids[strings.TrimSpace(string(out))] = true
	}
	rate := float64(n) / time.Since(start).Seconds()
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		list := exec.Command("squeue", "--noheader", "--format=%i")
		if kind == "sge" {
			list = exec.Command("qstat")
		}
		out, err := list.Output()
		if err != nil {
			continue
		}
		left := false
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && ids[f[0]] {
				left = true
			}
		}
		if !left {
			return rate, nil
		}
	}
	return rate, fmt.Errorf("bare %s jobs still queued after 10 minutes", submit[0])
}
