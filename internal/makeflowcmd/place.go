package makeflowcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/distcmd"
	"github.com/rightsize/rightsize/makeflow"
	"github.com/rightsize/rightsize/model"
	"github.com/rightsize/rightsize/model/cluster"
	"github.com/rightsize/rightsize/model/place"
)

// placement is automatic placement's part of a run: the rules' predicted
// times (which order ready rules by the critical path in time), the rules
// kept on this machine, and the decision to check against the run.
type placement struct {
	decision *place.Decision // nil when nothing was decided
	cost     []float64       // by rule
	here     []bool          // by rule; nil keeps only LOCAL rules here
	costs    makeflow.RuleCosts
	path     string // where costs are kept; "" for nowhere
	key      string // the workflow in the run history
	logPath  string
	// guessed says some rule's time was assumed: such a run says nothing
	// about the models, only about the guess, and is not recorded.
	guessed bool
}

// oldCosts is the rule-cost cache of earlier versions, beside the costs
// file. It is no longer read (its rules are learnt again from their
// workflows' logs) and is removed once the costs file is written.
const oldCosts = "makeflow-rules.json"

// costsPath is where rule costs are kept: beside the run history.
func costsPath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "rightsize", "makeflow-rules.costs")
}

// estimates says in words where the rules' predicted times came from:
// how many from each source, and for those from earlier runs how many
// runs and how long ago the last ended.
func estimates(wf *makeflow.Workflow, costs makeflow.RuleCosts, src []makeflow.Source, now time.Time) string {
	var n [makeflow.Assumed + 1]int
	for _, s := range src {
		n[s]++
	}
	var parts []string
	for s, k := range n {
		if k == 0 {
			continue
		}
		what := makeflow.Source(s).String()
		switch makeflow.Source(s) {
		case makeflow.FromHistory:
			what += " (" + history(wf, costs, src, now) + ")"
		case makeflow.Assumed:
			what = fmt.Sprintf("assumed %s (no earlier run)", place.Seconds(makeflow.DefaultRuleSeconds))
		}
		parts = append(parts, fmt.Sprintf("%d from %s", k, what))
	}
	return strings.Join(parts, ", ")
}

// history says how many earlier runs the rules timed by them had and when
// the last of them ended: "2 runs each, the last 5 min ago".
func history(wf *makeflow.Workflow, costs makeflow.RuleCosts, src []makeflow.Source, now time.Time) string {
	least, most, last := 0, 0, int64(0)
	for id, s := range src {
		c, ok := costs.Of(wf.Rules[id])
		if s != makeflow.FromHistory || !ok {
			continue
		}
		if least == 0 || c.Runs < least {
			least = c.Runs
		}
		most, last = max(most, c.Runs), max(last, c.Last)
	}
	runs := fmt.Sprintf("%d to %d runs each", least, most)
	switch {
	case least == most && most == 1:
		runs = "1 run each"
	case least == most:
		runs = fmt.Sprintf("%d runs each", most)
	}
	switch age := now.Sub(time.UnixMicro(last)); {
	case last == 0:
		return runs
	case age < time.Second:
		return runs + ", the last just now"
	default:
		return fmt.Sprintf("%s, the last %s ago", runs, place.Age(age))
	}
}

// place estimates the rules' times and, when the batch type was left to
// it (auto), decides between this machine and the cluster the user has,
// returning the batch type to run on. With -T it decides nothing unless
// asked (--explain, --auto-local), and then only says what the models
// predict and keeps short rules here with --auto-local, and with --hybrid
// measures the cluster for the hybrid hold. -T local with a
// local "cluster" named (RIGHTSIZE_CLUSTER="local hosts=16 delay=1", for
// trying placement out) runs the rules on it, as allpairs -T local does.
func (o *options) place(ctx context.Context, wf *makeflow.Workflow, dir, logPath string, auto bool, bt batchType, msgs io.Writer) (*placement, batchType, error) {
	p := &placement{path: costsPath(), logPath: logPath}
	p.costs = makeflow.LoadRuleCosts(p.path, wf)
	// Rules a run before this one completed teach their times too.
	p.costs.Learn(wf, logPath)
	cost, src := p.costs.Estimate(wf)
	p.cost = cost
	p.guessed = slices.Contains(src, makeflow.Assumed)
	var standIn *place.Cluster
	if !auto && bt.name == "local" {
		c, err := cluster.Find(ctx, cluster.Options{Kind: "local"})
		if err != nil {
			return nil, bt, fmt.Errorf("finding the cluster: %w", err)
		}
		if c.Named != cluster.ByFlag {
			standIn = c
		}
	}
	if o.hybrid && !bt.remote && standIn == nil {
		return nil, bt, cmdutil.Usagef("--hybrid: -T %s runs every rule here already", bt.name)
	}
	forced := !auto && (bt.remote || standIn != nil)
	// A forced hybrid run measures the cluster too: its hold (below)
	// weighs the cluster's dispatch against this machine's cores.
	if !auto && !(forced && (o.explain || o.autoLocal || o.hybrid)) {
		return p, o.onStandIn(standIn, bt), nil
	}
	flow, order, err := wf.Flow(cost, nil, dir)
	if err != nil {
		// The run reports what is wrong with the workflow.
		return p, o.onStandIn(standIn, bt), nil
	}
	abs, _ := filepath.Abs(wf.Path)
	p.key = place.Key(abs)
	kind := ""
	if forced {
		kind = bt.name
	}
	copts := cluster.Options{Kind: kind, Project: o.project, Tool: "makeflow"}
	cl, err := cluster.Find(ctx, copts)
	if err != nil {
		return nil, bt, fmt.Errorf("finding the cluster: %w", err)
	}
	cores := runtime.NumCPU()
	if cl != nil && cl.Dispatch.Assumed() {
		// Worth a probe job only if the workflow could gain from the
		// cluster (or -T asks for it).
		if forced || distcmd.WorthProbing(cl, model.Makespan(flow, model.FlowPlaces{LocalSlots: cores})) {
			copts.Probe = true
			if cl, err = cluster.Find(ctx, copts); err != nil {
				return nil, bt, fmt.Errorf("finding the cluster: %w", err)
			}
		}
	}
	cs, err := place.DefaultHistory().Corrections("makeflow", p.key)
	if err != nil {
		fmt.Fprintf(msgs, "makeflow: warning: %v\n", err)
	}
	d := place.DecideFlow(place.FlowWork{Rules: flow, Estimates: estimates(wf, p.costs, src, time.Now()), SendAll: forced && !o.autoLocal},
		place.Machine{Cores: place.Value{V: float64(cores), Source: "this machine's CPUs"}}, cl, cs, time.Now())
	if forced {
		m := place.Distributed
		if o.hybrid {
			m = place.Hybrid
		}
		d.Force(m, fmt.Sprintf("-T %s asks for it", bt.name))
	}
	p.decision = &d
	if o.explain {
		pm := distcmd.Prefixed(msgs, "makeflow: ")
		fmt.Fprintf(pm, "placement (--local or -T TYPE forces one):\n")
		d.Explain(distcmd.Prefixed(pm, "  "))
	} else if d.Mode != place.Multicore && (!forced || o.verbose) {
		fmt.Fprintf(msgs, "makeflow: placement: %s on %s (%s); --explain says more\n", d.Line(), cl.Kind, cl.Named)
	} else if o.verbose {
		fmt.Fprintf(msgs, "makeflow: placement: %s\n", d.Line())
	}
	if d.KeepHere != nil && d.Mode != place.Multicore && (!forced || o.autoLocal) {
		p.here = make([]bool, len(wf.Rules))
		for i, id := range order {
			p.here[id] = d.KeepHere[i]
		}
	}
	if d.Mode == place.Hybrid && cl != nil {
		// A rule this machine's cores start sooner than the cluster's
		// dispatch stays here: on a first run, before the rules' times
		// are known, short rules never reach the cluster's queue. So
		// too when -T --hybrid forces the mode: the dispatch is the one
		// measured (probed above, or cached), not every rule sent at
		// once and removed again as the cores reach it.
		o.hold = batch.HybridHold{Dispatch: seconds(cl.Dispatch.V + cl.JobCost.V), RemoteSlots: cl.Slots()}
		if !p.guessed {
			o.hold.Mean = seconds(meanRemote(flow, d.KeepHere))
		}
	}
	switch {
	case forced:
		return p, o.onStandIn(standIn, bt), nil
	case d.Mode == place.Multicore:
		return p, bt, nil
	}
	o.hybrid = d.Mode == place.Hybrid
	if cl.Kind == "local" {
		return p, o.onStandIn(cl, bt), nil
	}
	nbt, err := lookupBatchType(cl.Kind)
	if err != nil || !nbt.remote {
		o.hybrid = false
		return p, bt, nil
	}
	if cl.Project != "" {
		o.project = cl.Project
	}
	if cl.Port != 0 {
		o.port = cl.Port
	}
	return p, nbt, nil
}

// meanRemote returns the mean predicted time of the rules that may go to
// the cluster: those neither marked nor kept here.
func meanRemote(rules []model.FlowRule, keepHere []bool) float64 {
	var sum float64
	n := 0
	for i, r := range rules {
		if r.Here || i < len(keepHere) && keepHere[i] {
			continue
		}
		sum += r.Seconds
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// onStandIn returns the batch type that runs rules on local "cluster" c
// (RIGHTSIZE_CLUSTER=local ...), which stands for a real one: the local
// batch driver, as wide and as slow to start jobs as it says, takes the
// rules, as many at once as it has slots (and this machine's cores, in a
// hybrid run). Without one, bt.
func (o *options) onStandIn(c *place.Cluster, bt batchType) batchType {
	if c == nil {
		return bt
	}
	o.localCluster = c
	jobs := max(c.Slots(), 1)
	if o.hybrid {
		jobs += runtime.NumCPU()
	}
	return batchType{name: "local", remote: true, maxRemote: jobs}
}

// finish learns the rules' times from the run's log and keeps them, and
// compares the decision's prediction with the run's time: said with
// --explain, and appended to the run history when the run did the whole
// workflow.
func (p *placement) finish(wf *makeflow.Workflow, rep *makeflow.Report, explain bool, msgs io.Writer) {
	if p.path != "" {
		// The log's times of the rules this run ran include a batch
		// system's queue; the run's own replace them.
		_, err := p.costs.Learn(wf, p.logPath)
		if rep != nil {
			p.costs.Ran(wf, rep.Took)
		}
		if err == nil || rep != nil && len(rep.Took) > 0 {
			if err := p.costs.Save(p.path); err != nil {
				fmt.Fprintf(msgs, "makeflow: warning: %v\n", err)
			} else {
				// Earlier versions' cache, replaced by the costs file:
				// it grew with every rule ever run (9 MB and more).
				os.Remove(filepath.Join(filepath.Dir(p.path), oldCosts))
			}
		}
	}
	if p.decision == nil || rep == nil {
		return
	}
	distcmd.RecordRun(msgs, "makeflow", explain, place.DefaultHistory(), p.key, p.decision, rep.Elapsed, rep.Skipped > 0 || p.guessed)
}
