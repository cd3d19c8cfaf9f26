package makeflowcmd

import (
	"fmt"

	"github.com/rightsize/rightsize/internal/distcmd"
	"github.com/rightsize/rightsize/makeflow"
	"github.com/rightsize/rightsize/report"
)

// runReport is the HTML report of --report: every attempt at a rule, as
// it ends, written once the run is over (distcmd.RunReport, package
// report).
type runReport struct {
	*distcmd.RunReport
	parents [][]int // by rule ID
	remote  string  // where the rules sent to the batch system ran
}

// startReport begins the report, to be written to path, of wf's run on
// batch type bt as pl placed it; nil without --report.
func (o *options) startReport(path string, wf *makeflow.Workflow, bt batchType, pl *placement) *runReport {
	if o.reportPath == "" {
		return nil
	}
	mode, backend := o.where(bt)
	r := &runReport{
		RunReport: distcmd.NewRunReport(path, "makeflow", wf.Path, "rule", mode, backend, pl.decision),
		parents:   wf.Parents(),
		remote:    backend,
	}
	if pl.guessed {
		r.NoPrediction()
	}
	if mode == "hybrid" {
		// batch.Hybrid or the master's own worker may run any of them
		// here: the report cannot tell which.
		r.remote = backend + " or here"
	}
	return r
}

// ended records an attempt at rule that ended with res.
func (r *runReport) ended(rule *makeflow.Rule, res *makeflow.Result, remote bool) {
	t := report.Task{
		ID: rule.ID, Name: fmt.Sprintf("rule %d (%s)", rule.ID, rule.Pos), Command: res.Job.Command,
		Where: "here", Started: res.Started, Ended: res.Ended, OK: res.OK(),
		CPU: res.CPU, MaxRSS: res.MaxRSS, Parents: r.parents[rule.ID],
	}
	if remote {
		t.Where = r.remote
	}
	if !t.OK {
		t.Status, t.Stderr = res.Status(), string(res.Stderr)
	}
	r.Add(t)
}
