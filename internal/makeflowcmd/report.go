package makeflowcmd

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/rightsize/rightsize/makeflow"
	"github.com/rightsize/rightsize/report"
)

// runReport is the HTML report of --report: every attempt at a rule, as
// it ends, written to path once the run is over (package report).
type runReport struct {
	path    string
	run     report.Run
	parents [][]int // by rule ID
	remote  string  // where the rules sent to the batch system ran
}

// startReport begins the report of wf's run, on batch type bt as pl
// placed it; nil without --report.
func (o *options) startReport(path string, wf *makeflow.Workflow, bt batchType, pl *placement) *runReport {
	if o.reportPath == "" {
		return nil
	}
	r := &runReport{path: path, parents: wf.Parents(), remote: bt.name}
	r.run = report.Run{
		Tool: "makeflow", Title: wf.Path, Unit: "rule", Command: os.Args,
		Started: time.Now(), Mode: "multicore",
	}
	if bt.remote {
		r.run.Mode, r.run.Backend = "distributed", bt.name
		if o.hybrid {
			// batch.Hybrid or the master's own worker may run any of
			// them here: the report cannot tell which.
			r.run.Mode, r.remote = "hybrid", bt.name+" or here"
		}
	}
	if d := pl.decision; d != nil {
		var b strings.Builder
		d.Explain(&b)
		r.run.Explain = b.String()
		if !pl.guessed {
			// A prediction from assumed rule times says nothing.
			r.run.Predicted = d.Predicted(d.Mode)
		}
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
	r.run.Tasks = append(r.run.Tasks, t)
}

// write writes the report of the run that ended with err, and says where
// on msgs.
func (r *runReport) write(err error, msgs io.Writer) error {
	if r == nil {
		return nil
	}
	r.run.Ended, r.run.Err = time.Now(), err
	var self syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) == nil {
		r.run.MemoryFloor = self.Maxrss * 1024 // kilobytes on Linux
	}
	if err := report.WriteFile(r.path, &r.run); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	fmt.Fprintf(msgs, "makeflow: report in %s\n", r.path)
	return nil
}
