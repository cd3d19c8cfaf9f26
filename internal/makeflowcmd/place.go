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

// costsPath is where rule costs are kept: beside the run history.
func costsPath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "rightsize", "makeflow-rules.json")
}

// estimates says in words where the rules' predicted times came from.
func estimates(src []makeflow.Source) string {
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
		if makeflow.Source(s) == makeflow.Assumed {
			what = fmt.Sprintf("assumed %s (no earlier run)", place.Seconds(makeflow.DefaultRuleSeconds))
		}
		parts = append(parts, fmt.Sprintf("%d from %s", k, what))
	}
	return strings.Join(parts, ", ")
}

// place estimates the rules' times and, when the batch type was left to
// it (auto), decides between this machine and the cluster the user has,
// returning the batch type to run on. With -T it decides nothing unless
// asked (--explain, --auto-local), and then only says what the models
// predict and keeps short rules here with --auto-local.
func (o *options) place(ctx context.Context, wf *makeflow.Workflow, dir, logPath string, auto bool, bt batchType, msgs io.Writer) (*placement, batchType, error) {
	p := &placement{path: costsPath(), logPath: logPath}
	p.costs = makeflow.LoadRuleCosts(p.path)
	// Rules a run before this one completed teach their times too.
	p.costs.Learn(wf, logPath)
	cost, src := p.costs.Estimate(wf)
	p.cost = cost
	p.guessed = slices.Contains(src, makeflow.Assumed)
	forced := !auto && bt.remote && (o.explain || o.autoLocal)
	if !auto && !forced {
		return p, bt, nil
	}
	flow, order, err := wf.Flow(cost, nil, dir)
	if err != nil {
		// The run reports what is wrong with the workflow.
		return p, bt, nil
	}
	abs, _ := filepath.Abs(wf.Path)
	p.key = place.Key(abs)
	kind := ""
	if forced {
		kind = bt.name
	}
	copts := cluster.Options{Kind: kind, Project: o.project}
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
	d := place.DecideFlow(place.FlowWork{Rules: flow, Estimates: estimates(src)},
		place.Machine{Cores: place.Value{V: float64(cores), Source: "this machine's CPUs"}}, cl, cs, time.Now())
	if forced {
		d.Force(place.Distributed, fmt.Sprintf("-T %s asks for it", bt.name))
	}
	p.decision = &d
	if o.explain {
		pm := distcmd.Prefixed(msgs, "makeflow: ")
		fmt.Fprintf(pm, "placement (--local or -T TYPE forces one):\n")
		d.Explain(distcmd.Prefixed(pm, "  "))
	} else if d.Mode != place.Multicore {
		fmt.Fprintf(msgs, "makeflow: placement: %s on %s (%s); --explain says more\n", d.Line(), cl.Kind, cl.Named)
	}
	if d.Mode == place.Multicore || forced && !o.autoLocal {
		return p, bt, nil
	}
	if d.KeepHere != nil {
		p.here = make([]bool, len(wf.Rules))
		for i, id := range order {
			p.here[id] = d.KeepHere[i]
		}
	}
	if forced {
		return p, bt, nil
	}
	nbt, err := lookupBatchType(cl.Kind)
	if err != nil || !nbt.remote {
		// A "local" cluster is this machine: the local executor is it.
		return p, bt, nil
	}
	o.hybrid = d.Mode == place.Hybrid
	if cl.Project != "" {
		o.project = cl.Project
	}
	if cl.Port != 0 {
		o.port = cl.Port
	}
	return p, nbt, nil
}

// finish learns the rules' times from the run's log and keeps them, and
// compares the decision's prediction with the run's time: said with
// --explain, and appended to the run history when the run did the whole
// workflow.
func (p *placement) finish(wf *makeflow.Workflow, rep *makeflow.Report, explain bool, msgs io.Writer) {
	if p.path != "" {
		if _, err := p.costs.Learn(wf, p.logPath); err == nil {
			if err := p.costs.Save(p.path); err != nil {
				fmt.Fprintf(msgs, "makeflow: warning: %v\n", err)
			}
		}
	}
	if p.decision == nil || rep == nil {
		return
	}
	distcmd.RecordRun(msgs, "makeflow", explain, place.DefaultHistory(), p.key, p.decision, rep.Elapsed, rep.Skipped > 0 || p.guessed)
}
