package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/model/place"
)

// cached is what cluster.json keeps of one batch type.
type cached struct {
	Dispatch   float64   `json:"dispatch_s,omitempty"`
	Submit     float64   `json:"submit_s,omitempty"`
	DispatchAt time.Time `json:"dispatch_at,omitzero"`
	DispatchBy string    `json:"dispatch_by,omitempty"` // "probe job", "measured in a run"
	// JobCost and JobCostAt are a job cost saved without a tool's name:
	// by a run of an older version, which kept one figure per batch
	// type, or by a caller that names no tool.
	JobCost   float64   `json:"job_cost_s,omitempty"`
	JobCostAt time.Time `json:"job_cost_at,omitzero"`
	// JobCosts are the job costs runs measured, by tool: a job of each
	// tool does different work beyond its cells (a Wavefront block here
	// cost a fifth of an All-Pairs job on the same workers).
	JobCosts    map[string]measurement `json:"job_cost_by_tool,omitempty"`
	Bandwidth   float64                `json:"bandwidth_bps,omitempty"`
	BandwidthAt time.Time              `json:"bandwidth_at,omitzero"`
	// Startups are what the latest Work Queue runs, at most
	// maxStartups, saw of their workers' joining (SaveStartup), the
	// latest last: the batch type's dispatch, paid once.
	Startups []Startup `json:"startups,omitempty"`
}

// A Startup is what a Work Queue run measured of its workers' joining of
// its master: how long after the master started listening they joined,
// and which of them connected from this machine.
type Startup struct {
	// Mean is the workers' mean seconds from the master's start to their
	// joining, over Joined workers (this machine's own worker, in the
	// master's process, not counted).
	Mean   float64 `json:"mean_s"`
	Joined int     `json:"joined"`
	// Joins are the workers' seconds to join, in ascending order: every
	// one, or maxJoins spread evenly over them.
	Joins []float64 `json:"joins_s,omitempty"`
	// Here are the workers that joined from this machine; HereFirst is
	// when the first of them did.
	Here      int       `json:"here,omitempty"`
	HereFirst float64   `json:"here_first_s,omitempty"`
	At        time.Time `json:"at"`
}

// SaveStartup records the start-up a Work Queue run measured (the
// workers' joining of its master) as the dispatch of batch type kind,
// and the workers that joined from this machine. A master sends a task the
// moment a worker has a free core, so this wait, paid once at the start
// of a run, is the dispatch that matters there; a job's least wait from
// submission to start measured it for some runs (an All-Pairs run's,
// whose jobs are all submitted before the workers join) and not for others
// (11 µs for a Wavefront's later blocks).
func SaveStartup(o Options, kind string, st Startup) error {
	if st.Joined == 0 {
		return nil
	}
	st.At = o.now()
	st.Joins = spread(slices.Sorted(slices.Values(st.Joins)), maxJoins)
	return updateCache(o, kind, func(e *cached) {
		e.Startups = append(e.Startups, st)
		if n := len(e.Startups); n > maxStartups {
			e.Startups = slices.Delete(e.Startups, 0, n-maxStartups)
		}
	})
}

// spread returns at most n of xs, spread evenly over them.
func spread(xs []float64, n int) []float64 {
	if len(xs) <= n {
		return xs
	}
	kept := make([]float64, n)
	for i := range kept {
		kept[i] = xs[i*len(xs)/n]
	}
	return kept
}

// maxJoins bounds the workers' joins the cache keeps of a run: enough
// to follow the first rounds of a run's jobs, few enough for a large
// pool's cache to stay small.
const maxJoins = 256

// maxStartups is how many runs' start-ups the cache keeps, and a
// decision pools: a run's own varies with the moment its master starts
// against the workers' reconnect back-off (0.03–0.31 s from run to run
// of eight workers reconnecting within half a second), so one run's is
// a poor prediction of the next one's.
const maxStartups = 8

// startup returns the dispatch, the workers here and the joins that e's
// start-ups say, pooled over the runs it keeps (maxStartups), if it has
// any: the mean of all their joins, all their joins, and the latest
// run's workers here, who joined after the mean of their first joins.
func (e cached) startup() (dispatch, here place.Value, hereFirst float64, joins []float64, ok bool) {
	var sum, first float64
	joined, firsts := 0, 0
	for _, st := range e.Startups {
		sum += st.Mean * float64(st.Joined)
		joined += st.Joined
		joins = append(joins, st.Joins...)
		if st.Here > 0 {
			first += st.HereFirst
			firsts++
		}
	}
	if joined == 0 {
		return place.Value{}, place.Value{}, 0, nil, false
	}
	latest := e.Startups[len(e.Startups)-1]
	runs := "a run: its"
	if n := len(e.Startups); n > 1 {
		runs = fmt.Sprintf("the last %d runs: their", n)
	}
	mean := sum / float64(joined)
	dispatch = place.Value{V: mean, Source: fmt.Sprintf("measured in %s %d workers joined the master %s after it started, on average", runs, joined, place.Seconds(mean)), Measured: latest.At}
	here = place.Value{V: float64(latest.Here), Source: fmt.Sprintf("measured in a run: %d of its %d workers joined from this machine", latest.Here, latest.Joined), Measured: latest.At}
	if firsts > 0 {
		hereFirst = first / float64(firsts)
	}
	return dispatch, here, hereFirst, spread(slices.Sorted(slices.Values(joins)), maxJoins), true
}

// A measurement is a figure runs measured, and when the latest did.
type measurement struct {
	V  float64   `json:"s"`
	At time.Time `json:"at"`
	// Runs are the latest runs' own figures, at most maxJobCosts, the
	// latest last; V is their median. A cache written before they were
	// kept has V alone.
	Runs []float64 `json:"runs_s,omitempty"`
}

// maxJobCosts is how many runs' job costs a tool's figure pools: one
// run's varies with the load on the hosts (0.053 and then 0.12 s a job
// in two runs of the same All-Pairs on the same eight workers), and the
// median of a few is steadier than the latest, and follows a lasting
// change once half of them have seen it.
const maxJobCosts = 8

// add returns m with a run's figure v, measured at t, added.
func (m measurement) add(v float64, t time.Time) measurement {
	runs := slices.Clone(m.Runs)
	if len(runs) == 0 && !m.At.IsZero() {
		runs = []float64{m.V} // a figure kept before runs were
	}
	runs = append(runs, v)
	if n := len(runs); n > maxJobCosts {
		runs = slices.Delete(runs, 0, n-maxJobCosts)
	}
	// The median, the middle two's mean for an even count (gonum's
	// quantiles give one of the two).
	sorted := slices.Sorted(slices.Values(runs))
	mid := len(sorted) / 2
	median := sorted[mid]
	if len(sorted)%2 == 0 {
		median = (sorted[mid-1] + sorted[mid]) / 2
	}
	return measurement{V: median, At: t, Runs: runs}
}

// source says where m's figure comes from, the runs of tool.
func (m measurement) source(tool string) string {
	if len(m.Runs) > 1 {
		return fmt.Sprintf("the median of the last %d runs of %s", len(m.Runs), tool)
	}
	return "measured in a run of " + tool
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

// readCache reads the cache; a missing or damaged one is empty, since
// what it holds is only worth re-measuring.
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

// updateCache changes the entry of kind. It writes a temporary file and
// renames it over the cache, so that a reader (another run) sees the old
// cache or the new one, never half of one.
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
		return fmt.Errorf("cluster cache: %w", err)
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

// SaveDispatch records a dispatch latency (seconds from submitting a job
// to its start) that a run measured on batch type kind, so that the next
// Find reports it, "measured in a run", with its age.
func SaveDispatch(o Options, kind string, seconds float64) error {
	now := o.now()
	return updateCache(o, kind, func(e *cached) {
		e.Dispatch, e.Submit, e.DispatchAt, e.DispatchBy = seconds, 0, now, "measured in a run"
	})
}

// SaveJobCost records what a run of o.Tool measured a job to cost on
// kind's hosts beyond its work (its mean running time less its cells'
// time), pooled with that tool's latest runs (maxJobCosts); with no
// tool, as the batch type's figure of no tool.
func SaveJobCost(o Options, kind string, seconds float64) error {
	now := o.now()
	return updateCache(o, kind, func(e *cached) {
		if o.Tool == "" {
			e.JobCost, e.JobCostAt = seconds, now
			return
		}
		if e.JobCosts == nil {
			e.JobCosts = map[string]measurement{}
		}
		e.JobCosts[o.Tool] = e.JobCosts[o.Tool].add(seconds, now)
	})
}

// jobCost returns the job cost tool should be placed with on the batch
// type whose cache entry is e: its own figure; else the latest another
// tool's run measured (or one kept without a tool's name), saying whose
// it is; else the assumed one.
func (e cached) jobCost(tool string) place.Value {
	if m, ok := e.JobCosts[tool]; ok && tool != "" {
		return place.Value{V: m.V, Source: m.source(tool), Measured: m.At}
	}
	var v place.Value
	if !e.JobCostAt.IsZero() {
		v = place.Value{V: e.JobCost, Source: "measured in a run", Measured: e.JobCostAt}
		if tool != "" {
			v.Source += " of a tool not recorded"
		}
	}
	// Each tool in turn, in name order, so that a tie is decided alike
	// every time.
	for _, other := range slices.Sorted(maps.Keys(e.JobCosts)) {
		if m := e.JobCosts[other]; v.Assumed() || m.At.After(v.Measured) {
			v = place.Value{V: m.V, Source: m.source(other), Measured: m.At}
		}
	}
	switch {
	case v.Assumed():
		return place.Value{V: assumedJobCost}
	case tool != "":
		v.Source += fmt.Sprintf(" (%s has none of its own yet)", tool)
	}
	return v
}

// SaveBandwidth records the bandwidth (bytes per second) a run measured
// while it sent data to kind's hosts.
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

// queueWait asks SLURM when a one-core job submitted now would start,
// without submitting it, and returns the wait.
func queueWait(ctx context.Context, o Options) (time.Duration, error) {
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
	start, err := shape.ParseTestOnly(string(out), time.Local)
	if err != nil {
		return 0, err
	}
	// SLURM's clock, not o.Now: the prediction is in wall-clock time.
	wait := max(time.Until(start), 0)
	if wait >= slurmHorizon {
		return 0, errNoPrediction
	}
	return wait, nil
}

// slurmHorizon is how far off a predicted start stops being a prediction:
// SLURM plans a running job without a time limit to end a year after it
// started (and answers with its end of time when it cannot place a job at
// all), so a queue whose cores such jobs hold is predicted to start the
// next job about a year from now, whenever they really end.
const slurmHorizon = 300 * 24 * time.Hour

// errNoPrediction is queueWait's answer when SLURM names no real start.
var errNoPrediction = errors.New("sbatch --test-only: no start predicted")

// measureDispatch fills c's dispatch latency and its serial part: the
// user's figure, a fresh cached one, a probe job's, an older cached one,
// or the assumed one, in that order. On SLURM, a queue that would hold a
// job longer than that (sbatch --test-only) sets it instead: the probe
// measured an emptier queue, or none was run.
func measureDispatch(ctx context.Context, o Options, sp *Spec, how string, c *place.Cluster) error {
	if sp.Dispatch > 0 {
		c.Dispatch = place.Value{V: sp.Dispatch, Source: how}
		return nil
	}
	if err := measureLatency(ctx, o, sp, c); err != nil {
		return err
	}
	if sp.Kind == "slurm" {
		// sbatch prints whole seconds: a predicted start less than a
		// second later than the measurement says nothing more.
		wait, err := queueWait(ctx, o)
		switch {
		case errors.Is(err, errNoPrediction):
			// The queue is full for an unknown time: at least as long
			// as a probe is allowed to wait, rather than a year.
			if c.Dispatch.V < probeLimit.Seconds() {
				c.Dispatch = place.Value{V: probeLimit.Seconds(), Source: "sbatch --test-only: no start predicted (the jobs holding the cores have no time limit); taken as a probe's longest wait"}
			}
		case err == nil && wait.Seconds() > c.Dispatch.V+1:
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
	if d, here, first, joins, ok := e.startup(); ok && sp.Kind == "wq" {
		c.Dispatch, c.HereWorkers, c.HereJoin, c.Joins = d, here, first, joins
		return nil
	}
	ok = ok && e.Dispatch > 0
	if ok && now.Sub(e.DispatchAt) < cacheFresh {
		c.Dispatch = place.Value{V: e.Dispatch, Source: e.DispatchBy, Measured: e.DispatchAt}
		if e.Submit > 0 {
			c.Submit = place.Value{V: e.Submit, Source: e.DispatchBy, Measured: e.DispatchAt}
		}
		return nil
	}
	// A Work Queue master's dispatch is a message to a connected worker,
	// milliseconds: a run measures it (its jobs' least time from
	// submission to start, SaveDispatch); no probe can before the master
	// exists.
	if o.Probe && sp.Kind != "wq" {
		d, submit, err := probe(ctx, o, sp)
		switch {
		case err == nil:
			at := o.now()
			c.Dispatch = place.Value{V: d, Source: "probe job", Measured: at}
			c.Submit = place.Value{V: submit, Source: "probe job's submission", Measured: at}
			return updateCache(o, sp.Kind, func(e *cached) {
				e.Dispatch, e.Submit, e.DispatchAt, e.DispatchBy = d, submit, at, "probe job"
			})
		case o.Kind != "" || ctx.Err() != nil:
			return fmt.Errorf("probe job on %s: %w", sp.Kind, err)
		}
		// A cluster the user did not force on this run: the run can go
		// on without it, so its older figure, or the assumed one, stands.
	}
	if ok {
		c.Dispatch = place.Value{V: e.Dispatch, Source: e.DispatchBy, Measured: e.DispatchAt}
		return nil
	}
	c.Dispatch = place.Value{V: assumedDispatch[sp.Kind]}
	return nil
}

// probe submits one job that does nothing and returns the seconds from
// its submission to its start (to its end when the driver did not see it
// running: it started and ended between two looks), and the seconds the
// submission itself took.
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
		// Removes the probe if it has not ended: nothing is left queued.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		d.Close(cctx)
	}()
	parent := ctx
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
		case ev, ok := <-d.Events():
			switch {
			case !ok:
				return 0, 0, errors.New("the driver stopped before the probe ended")
			case ev.ID != id:
			case ev.State == batch.Failed:
				return 0, 0, ev.Err
			case ev.State == batch.Running || ev.State == batch.Done:
				return time.Since(start).Seconds(), submitted.Seconds(), nil
			}
		case <-ctx.Done():
			if parent.Err() != nil {
				return 0, 0, parent.Err()
			}
			// Queued all this while: that is the cluster's latency now,
			// as far as it matters.
			return probeLimit.Seconds(), submitted.Seconds(), nil
		}
	}
}
