package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/workqueue/catalog"
)

// listCommand names the listing each batch system's width is read from.
var listCommand = map[string]string{
	"slurm":  "sinfo",
	"sge":    "qstat -g c",
	"condor": "condor_status",
}

func lookPath(bin, name string) (string, error) {
	if bin != "" {
		p := filepath.Join(bin, name)
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	return exec.LookPath(name)
}

// output runs a batch system's command, with commandTimeout.
func output(ctx context.Context, bin, name string, args ...string) (string, error) {
	path, err := lookPath(bin, name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return string(out), nil
}

// listWidth asks batch system kind for its hosts with free cores now and
// the cores each has free.
func listWidth(ctx context.Context, bin, kind string) (hosts, cores int, err error) {
	var out string
	switch kind {
	case "slurm":
		if out, err = output(ctx, bin, "sinfo", "-h", "-N", "-o", "%N %C"); err == nil {
			hosts, cores, err = ParseSinfo(out)
		}
	case "sge":
		if out, err = output(ctx, bin, "qstat", "-g", "c"); err == nil {
			hosts, cores, err = ParseQstatGC(out)
		}
	case "condor":
		if out, err = output(ctx, bin, "condor_status", "-af", "Cpus", "State"); err == nil {
			hosts, cores, err = ParseCondorStatus(out)
		}
	default:
		err = fmt.Errorf("no listing for %s", kind)
	}
	return hosts, cores, err
}

// median returns the middle of xs (the lower one of an even count).
func median(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[(len(xs)-1)/2]
}

// ParseSinfo reads `sinfo -h -N -o "%N %C"`: a node per line (a node in
// several partitions appears once per partition) with its CPUs as
// allocated/idle/other/total. It returns the nodes with idle CPUs and
// their median idle CPUs.
func ParseSinfo(out string) (hosts, cores int, err error) {
	seen := map[string]bool{}
	var idle []int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || seen[f[0]] {
			continue
		}
		seen[f[0]] = true
		parts := strings.Split(f[1], "/")
		if len(parts) != 4 {
			return 0, 0, fmt.Errorf("sinfo: %q: want NODE A/I/O/T", line)
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			return 0, 0, fmt.Errorf("sinfo: %q: %w", line, err)
		}
		if n > 0 {
			idle = append(idle, n)
		}
	}
	if len(seen) == 0 {
		return 0, 0, errors.New("sinfo lists no nodes")
	}
	return len(idle), median(idle), nil
}

// ParseQstatGC reads Grid Engine's `qstat -g c`: a line per cluster queue
// with its AVAIL slots. It returns the free slots as hosts of one core
// each, since the listing does not say how slots group into hosts.
func ParseQstatGC(out string) (hosts, cores int, err error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	avail := -1
	for i, line := range lines {
		f := strings.Fields(line)
		if i == 0 || strings.HasPrefix(line, "---") || len(f) < 6 {
			if i == 0 && (len(f) < 6 || f[5] != "AVAIL") {
				return 0, 0, fmt.Errorf("qstat -g c: header %q: want CLUSTER QUEUE CQLOAD USED RES AVAIL TOTAL", line)
			}
			continue
		}
		n, err := strconv.Atoi(f[4])
		if err != nil {
			return 0, 0, fmt.Errorf("qstat -g c: %q: %w", line, err)
		}
		avail = max(avail, 0) + n
	}
	if avail < 0 {
		return 0, 0, errors.New("qstat -g c lists no queues")
	}
	return avail, 1, nil
}

// ParseCondorStatus reads `condor_status -af Cpus State`: a slot per
// line. It returns the unclaimed slots and their median CPUs.
func ParseCondorStatus(out string) (hosts, cores int, err error) {
	var free []int
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		lines++
		n, err := strconv.Atoi(f[0])
		if err != nil {
			return 0, 0, fmt.Errorf("condor_status: %q: %w", line, err)
		}
		if f[1] == "Unclaimed" {
			free = append(free, n)
		}
	}
	if lines == 0 {
		return 0, 0, errors.New("condor_status lists no slots")
	}
	return len(free), median(free), nil
}

// catalogWorkers asks the catalogs for the masters of project and returns
// the workers the newest one reports, or -1 if none is listed.
func catalogWorkers(ctx context.Context, o Options, project string) (int, error) {
	if project == "" {
		return -1, errors.New("no project")
	}
	re, err := regexp.Compile("^(" + regexp.QuoteMeta(project) + ")$")
	if err != nil {
		return -1, err
	}
	addrs := o.Catalogs
	if addrs == nil {
		addrs = catalog.DefaultAddrs()
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	ms, err := catalog.FindMasters(ctx, addrs, re)
	if err != nil || len(ms) == 0 {
		return -1, err
	}
	return int(ms[0].Record.Int("workers")), nil
}

// cached is what cluster.json keeps of one batch type.
type cached struct {
	Dispatch    float64   `json:"dispatch_s,omitempty"`
	Submit      float64   `json:"submit_s,omitempty"`
	DispatchAt  time.Time `json:"dispatch_at,omitzero"`
	DispatchBy  string    `json:"dispatch_by,omitempty"` // "probe job", "measured in a run"
	JobCost     float64   `json:"job_cost_s,omitempty"`
	JobCostAt   time.Time `json:"job_cost_at,omitzero"`
	Bandwidth   float64   `json:"bandwidth_bps,omitempty"`
	BandwidthAt time.Time `json:"bandwidth_at,omitzero"`
}

// cacheFresh is how long a measured dispatch latency is used before a
// probe measures it again: queues change over hours.
const cacheFresh = time.Hour

func cachePath(o Options) string {
	dir := o.cacheDir()
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "cluster.json")
}

// readCache reads the cache; a missing or damaged one is empty.
func readCache(o Options) map[string]cached {
	m := map[string]cached{}
	if p := cachePath(o); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			if json.Unmarshal(b, &m) != nil {
				m = map[string]cached{}
			}
		}
	}
	return m
}

// updateCache changes the entry of kind, atomically.
func updateCache(o Options, kind string, change func(*cached)) error {
	p := cachePath(o)
	if p == "" {
		return nil
	}
	m := readCache(o)
	e := m[kind]
	change(&e)
	m[kind] = e
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("cluster cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".cluster-*.json")
	if err != nil {
		return fmt.Errorf("cluster cache: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cluster cache: %w", err)
	}
	return nil
}

// SaveDispatch records a dispatch latency a run measured on kind, so that
// the next Find reports it with its age.
func SaveDispatch(o Options, kind string, seconds float64) error {
	now := o.now()
	return updateCache(o, kind, func(e *cached) {
		e.Dispatch, e.DispatchAt, e.DispatchBy = seconds, now, "measured in a run"
	})
}

// SaveJobCost records what a run measured a job to cost on kind's hosts
// beyond its work (its mean running time less its cells' time).
func SaveJobCost(o Options, kind string, seconds float64) error {
	now := o.now()
	return updateCache(o, kind, func(e *cached) { e.JobCost, e.JobCostAt = seconds, now })
}

// SaveBandwidth records the bandwidth a run measured while it sent data
// to kind's hosts.
func SaveBandwidth(o Options, kind string, bytesPerSecond float64) error {
	now := o.now()
	return updateCache(o, kind, func(e *cached) { e.Bandwidth, e.BandwidthAt = bytesPerSecond, now })
}

// assumedDispatch are the dispatch latencies taken where nothing was
// measured, in seconds: a process here, a Work Queue task to a connected
// worker, a job through each batch system's scheduler.
var assumedDispatch = map[string]float64{"local": 0.02, "wq": 0.05, "slurm": 2, "sge": 5, "condor": 30}

// assumedJobCost is what a job is taken to cost on its host beyond its
// work until a run measures it, in seconds: starting the tool's program in
// sub-problem mode and reading its inputs.
const assumedJobCost = 0.05

// probeLimit bounds how long a probe job may wait to start: a cluster
// whose queue holds it longer is measured at that.
const probeLimit = 2 * time.Minute

// ParseTestOnly reads what `sbatch --test-only` says of a job it would
// submit ("sbatch: Job 36 to start at 2026-11-25T00:15:51 using 1
// processors on nodes vm in partition debug") and returns when the job
// would start, in loc (SLURM prints local time).
func ParseTestOnly(out string, loc *time.Location) (time.Time, error) {
	_, rest, ok := strings.Cut(out, " to start at ")
	if !ok {
		return time.Time{}, fmt.Errorf("sbatch --test-only: %q: no start time", strings.TrimSpace(out))
	}
	stamp, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
	return time.ParseInLocation("2006-01-02T15:04:05", stamp, loc)
}

// queueWait asks SLURM when a one-core job submitted now would start,
// without submitting it, and returns the wait.
func queueWait(ctx context.Context, o Options, now time.Time) (time.Duration, error) {
	path, err := lookPath(o.Bin, "sbatch")
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	// It answers on standard error.
	out, err := exec.CommandContext(ctx, path, "--test-only", "--wrap=true").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("sbatch --test-only: %w: %s", err, strings.TrimSpace(string(out)))
	}
	start, err := ParseTestOnly(string(out), time.Local)
	if err != nil {
		return 0, err
	}
	return max(start.Sub(now), 0), nil
}

// measureDispatch fills c's dispatch latency and its serial part: the
// user's figure, a fresh cached one, a probe job's, an older cached one,
// or the assumed one, in that order. On SLURM, a queue that would hold a
// job longer than that (sbatch --test-only) sets it instead: the probe
// measured an emptier queue.
func measureDispatch(ctx context.Context, o Options, sp *Spec, how string, c *place.Cluster) error {
	if sp.Dispatch > 0 {
		c.Dispatch = place.Value{V: sp.Dispatch, Source: how}
		return nil
	}
	if err := measureLatency(ctx, o, sp, c); err != nil {
		return err
	}
	if sp.Kind == "slurm" {
		if wait, err := queueWait(ctx, o, o.now()); err == nil && wait.Seconds() > c.Dispatch.V {
			c.Dispatch = place.Value{V: wait.Seconds(), Source: "sbatch --test-only: the queue's predicted wait"}
		}
	}
	return nil
}

// measureLatency is measureDispatch without the user's figure and the
// queue's prediction.
func measureLatency(ctx context.Context, o Options, sp *Spec, c *place.Cluster) error {
	now := o.now()
	e, ok := readCache(o)[sp.Kind]
	if ok && e.Dispatch > 0 && now.Sub(e.DispatchAt) < cacheFresh {
		c.Dispatch = place.Value{V: e.Dispatch, Source: e.DispatchBy, Measured: e.DispatchAt}
		if e.Submit > 0 {
			c.Submit = place.Value{V: e.Submit, Source: e.DispatchBy, Measured: e.DispatchAt}
		}
		return nil
	}
	// A Work Queue master's dispatch is a message to a connected worker:
	// a run measures it; no probe can before the master exists.
	if o.Probe && sp.Kind != "wq" {
		d, submit, err := probe(ctx, o, sp)
		if err != nil {
			return fmt.Errorf("probe job on %s: %w", sp.Kind, err)
		}
		at := o.now()
		c.Dispatch = place.Value{V: d, Source: "probe job", Measured: at}
		c.Submit = place.Value{V: submit, Source: "probe job's submission", Measured: at}
		return updateCache(o, sp.Kind, func(e *cached) {
			e.Dispatch, e.Submit, e.DispatchAt, e.DispatchBy = d, submit, at, "probe job"
		})
	}
	if ok && e.Dispatch > 0 {
		c.Dispatch = place.Value{V: e.Dispatch, Source: e.DispatchBy, Measured: e.DispatchAt}
		return nil
	}
	c.Dispatch = place.Value{V: assumedDispatch[sp.Kind]}
	return nil
}

// probe submits one job that does nothing and returns the seconds from
// its submission to its end — what a job costs beyond its work: the
// queue, starting it, and the batch system's word that it ended — and the
// seconds the submission itself took.
func probe(ctx context.Context, o Options, sp *Spec) (dispatch, submit float64, err error) {
	spool := filepath.Join(o.cacheDir(), "probe")
	if err := os.MkdirAll(spool, 0o755); err != nil {
		return 0, 0, err
	}
	d, err := batch.New(sp.Kind, batch.Options{
		Spool: spool, Bin: o.Bin, Slots: 1,
		DispatchDelay: time.Duration(sp.Delay * float64(time.Second)),
		PollInterval:  100 * time.Millisecond,
	})
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d.Close(cctx)
	}()
	ctx, cancel := context.WithTimeout(ctx, probeLimit)
	defer cancel()
	start := time.Now()
	id, err := d.Submit(ctx, &batch.Job{Name: "rightsize-probe", Command: "true", Dir: spool})
	if err != nil {
		return 0, 0, err
	}
	submitted := time.Since(start)
	for {
		select {
		case ev := <-d.Events():
			if ev.ID != id {
				continue
			}
			switch {
			case ev.State == batch.Failed:
				return 0, 0, ev.Err
			case ev.State.Final():
				return time.Since(start).Seconds(), submitted.Seconds(), nil
			}
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return probeLimit.Seconds(), submitted.Seconds(), nil
			}
			return 0, 0, ctx.Err()
		}
	}
}
