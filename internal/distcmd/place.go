package distcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/provenance"
	"github.com/rightsize/rightsize/model/cluster"
	"github.com/rightsize/rightsize/model/place"
)

// SampleBudget is how long a function is timed before a placement
// decision: a second when there is a cluster to weigh against this
// machine, a tenth without one, when the sample only feeds the prediction
// that the run then checks.
func SampleBudget(c *place.Cluster) time.Duration {
	if c == nil {
		return 100 * time.Millisecond
	}
	return time.Second
}

// FindCluster finds the cluster a run may use (package model/cluster):
// with -T, that batch system; otherwise the one the user named or has, if
// any. Its dispatch latency is what was measured before, or assumed: see
// Probe.
func (f *Flags) FindCluster(ctx context.Context) (*place.Cluster, error) {
	return f.findCluster(ctx, false)
}

func (f *Flags) findCluster(ctx context.Context, probe bool) (*place.Cluster, error) {
	o := cluster.Options{Kind: f.BatchType, Project: f.Project, Probe: probe, Tool: f.Tool}
	if f.portSet {
		o.Port = f.Port
	}
	c, err := cluster.Find(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("finding the cluster: %w", err)
	}
	return c, nil
}

// Probe measures c's dispatch latency with a probe job when it is only
// assumed and could matter: with -T, or when the work would keep this
// machine busy for more than a second and more than a quarter of the
// assumed latency (a cluster cannot beat a run that ends before its first
// job starts, and a probe costs a job's dispatch). It returns c as it
// then stands.
func (f *Flags) Probe(ctx context.Context, c *place.Cluster, localSeconds float64) (*place.Cluster, error) {
	if c == nil || !c.Dispatch.Assumed() || !f.Distributed() && !WorthProbing(c, localSeconds) {
		return c, nil
	}
	return f.findCluster(ctx, true)
}

// WorthProbing reports whether work that would take this machine
// localSeconds could gain from cluster c enough to pay for a probe job.
func WorthProbing(c *place.Cluster, localSeconds float64) bool {
	return localSeconds > max(1, c.Dispatch.V/4)
}

// Place sets the flags for decision d. With -T the mode is forced —
// distributed, or hybrid with --hybrid — and d says so; the cluster's
// measurements still size the jobs. Otherwise the flags get the chosen
// cluster's batch type, hybrid or not, and its Work Queue project and
// port; for multicore nothing changes.
func (f *Flags) Place(d *place.Decision) {
	// The prediction of the mode that runs, forced or chosen.
	defer func() { f.Predicted, f.decision = d.Predicted(d.Mode), d }()
	if f.Distributed() {
		m := place.Distributed
		if f.Hybrid {
			m = place.Hybrid
		}
		d.Force(m, fmt.Sprintf("-T %s asks for it", f.BatchType))
		f.Cluster, f.JobCores = d.Cluster, d.JobCores
		f.useNamed(d.Cluster)
		return
	}
	if d.Mode == place.Multicore {
		return
	}
	c := d.Cluster
	f.BatchType = c.Kind
	f.Hybrid = d.Mode == place.Hybrid
	f.Cluster, f.JobCores = c, d.JobCores
	f.useNamed(c)
}

// useNamed takes the Work Queue project and port the cluster's setting
// names, where the command line gives none.
func (f *Flags) useNamed(c *place.Cluster) {
	if c == nil {
		return
	}
	if c.Project != "" && f.Project == "" {
		f.Project = c.Project
	}
	if c.Port != 0 && !f.portSet {
		f.Port = c.Port
	}
}

// SaveJobCost keeps what the run's jobs cost beyond their work — their
// mean running time less cellsPerJob cells of cellTime seconds — as the
// measurement of f.Tool's jobs on the cluster it placed the run on, for
// the tool's next decision.
func (f *Flags) SaveJobCost(meanJob time.Duration, cellsPerJob, cellTime float64) {
	if f.Cluster == nil || meanJob <= 0 {
		return
	}
	cost := max(meanJob.Seconds()-cellsPerJob*cellTime, 0)
	// Best effort: a lost measurement only leaves the next decision with
	// the older one.
	cluster.SaveJobCost(cluster.Options{Tool: f.Tool}, f.BatchType, cost)
}

// SaveDispatch keeps the dispatch latency a Work Queue run measured (its
// jobs' least time from submission to start), for the next decision: no
// probe job can measure it before the master exists. Batch systems' are
// measured by a probe job (model/cluster), not by runs.
func (f *Flags) SaveDispatch(least time.Duration) {
	if f.BatchType != "wq" || least <= 0 {
		return
	}
	// Best effort, as SaveJobCost.
	cluster.SaveDispatch(cluster.Options{}, f.BatchType, least.Seconds())
}

// Transfers shorter than these say more of latency than of bandwidth.
const (
	minMeasuredBytes = 1 << 20
	minMeasuredTime  = 50 * time.Millisecond
)

// SaveBandwidth keeps the bandwidth driver d of batch type kind measured
// while it moved the run's data to and from the workers (a Work Queue
// master's bytes over their transfers' time), for the next decision, when
// there was enough of it to say. Call it before closing d.
func SaveBandwidth(kind string, d batch.Driver) {
	t, ok := d.(interface {
		Transferred() (int64, time.Duration)
	})
	if !ok {
		return
	}
	bytes, took := t.Transferred()
	if bytes < minMeasuredBytes || took < minMeasuredTime {
		return
	}
	// Best effort, as SaveJobCost.
	cluster.SaveBandwidth(cluster.Options{}, kind, float64(bytes)/took.Seconds())
}

// ExplainDecision prints decision d of tool's placement: in full with
// explain (--explain), in one line with verbose (-v).
func ExplainDecision(w io.Writer, tool string, explain, verbose bool, d *place.Decision) {
	switch {
	case explain:
		p := Prefixed(w, tool+": ")
		fmt.Fprintf(p, "placement (--local or -T TYPE forces a mode):\n")
		d.Explain(Prefixed(p, "  "))
	case verbose:
		fmt.Fprintf(w, "%s: placement: %s\n", tool, d.Line())
	}
}

// RecordRun compares decision d's prediction with the time the run took,
// says so on w if show, and appends it to hist under key, so that the next
// run of the same work starts from corrected predictions. A partial run
// (one that resumed a checkpoint, or whose prediction rests on a guess)
// says nothing of the models: it is not recorded.
func RecordRun(w io.Writer, tool string, show bool, hist place.History, key string, d *place.Decision, took time.Duration, partial bool) {
	predicted := d.Predicted(d.Mode)
	if show {
		fmt.Fprintf(w, "%s: %s: %s\n", tool, d.Mode, place.Summary(predicted, took.Seconds()))
	}
	if partial {
		return
	}
	backend := ""
	if d.Mode != place.Multicore {
		backend = d.Cluster.Kind
	}
	// The history keeps the models' own figure: corrections are computed
	// against it, not against an already corrected one.
	var modelSeconds float64
	for _, p := range d.Predictions {
		if p.Mode == d.Mode {
			modelSeconds = p.Model
		}
	}
	err := hist.Append(place.Record{
		Tool: tool, Key: key, Mode: d.Mode.String(), Backend: backend,
		Predicted: modelSeconds, Measured: took.Seconds(),
	})
	if err != nil {
		fmt.Fprintf(w, "%s: warning: %v\n", tool, err)
	}
}

// FunctionKey names a function in the run history: its name, its
// program's or library's content, and its -e arguments, with what else
// identifies the work (the problem's kind).
func FunctionKey(info funcs.Info, extraArgs string, more ...string) string {
	content := ""
	if info.Path != "" {
		content, _ = provenance.FileDigest(info.Path)
	}
	return place.Key(append([]string{info.Name, content, extraArgs}, more...)...)
}

// CoresSource says where a core count came from: the -c flag, or this
// machine.
func CoresSource(flag int) string {
	if flag > 0 {
		return "-c"
	}
	return "this machine's CPUs"
}
