package distcmd

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/report"
	"github.com/rightsize/rightsize/wavefront"
)

// A RunReport collects what --report shows of an All-Pairs or Wavefront
// run (package report): a distributed run's block jobs, which Config
// passes it, or the pieces a multicore run reports with Add. A nil
// RunReport (no --report) does nothing. Its methods are safe for
// concurrent use.
type RunReport struct {
	path string
	mu   sync.Mutex
	run  report.Run
	// where the jobs that were not done in this process ran
	elsewhere string
}

// maxReported bounds the pieces a report keeps, so that a run of millions
// of cells does not hold them all; the others are counted.
const maxReported = 100_000

// StartReport begins the report of tool's run of title, whose pieces are
// units ("cell", "job"); nil without --report. It says where the run goes
// and why, as placement left the flags (Place).
func (f *Flags) StartReport(tool, title, unit string) *RunReport {
	if f.Report == "" {
		return nil
	}
	r := &RunReport{path: f.Report, elsewhere: "here"}
	r.run = report.Run{Tool: tool, Title: title, Unit: unit, Command: os.Args, Started: time.Now(), Mode: "multicore", Predicted: f.Predicted}
	if f.Distributed() {
		r.run.Mode, r.run.Backend, r.elsewhere = "distributed", f.BatchType, f.BatchType
		if f.Hybrid {
			r.run.Mode = "hybrid"
		}
	}
	if f.decision != nil {
		var b strings.Builder
		f.decision.Explain(&b)
		r.run.Explain = b.String()
	}
	f.report = r
	return r
}

// Add records a piece of the run.
func (r *RunReport) Add(t report.Task) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.run.Tasks) >= maxReported {
		r.run.Omitted++
		return
	}
	r.run.Tasks = append(r.run.Tasks, t)
}

// Failed records a piece that failed (a cell) where the run reports it,
// with how and the end of its standard error.
func (r *RunReport) Failed(name, how, stderr string) {
	now := time.Now()
	r.Add(report.Task{ID: -1, Name: name, Where: "here", Started: now, Ended: now, Status: how, Stderr: stderr})
}

// job records a distributed run's block job.
func (r *RunReport) job(e distmaster.JobEnd) {
	t := report.Task{
		ID: e.Block, Name: "block " + e.Name, Where: r.elsewhere, Started: e.Started, Ended: e.Ended,
		OK: e.Err == nil, Parents: e.Parents,
	}
	if e.Here {
		t.Where = "here"
	}
	if e.Err != nil {
		t.Status, t.Stderr = e.Err.Error(), string(e.Stderr)
	}
	r.Add(t)
}

// WavefrontBlocks returns what tells r of each block (a cell, unless -b is
// larger) a multicore Wavefront run of region computes
// (multicore.Wavefront.Timed), or nil for a nil r. A block's parents are
// those left of and below it.
func (r *RunReport) WavefrontBlocks(region wavefront.Rect) func(wavefront.Rect, time.Time, time.Time, bool) {
	if r == nil {
		return nil
	}
	id := func(x, y int) int { return (y-region.Y)*region.W + (x - region.X) }
	return func(b wavefront.Rect, started, ended time.Time, failed bool) {
		t := report.Task{ID: id(b.X, b.Y), Where: "here", Started: started, Ended: ended, OK: !failed}
		t.Name = fmt.Sprintf("cell (%d,%d)", b.X, b.Y)
		if b.W > 1 || b.H > 1 {
			t.Name = fmt.Sprintf("block (%d,%d) %d×%d", b.X, b.Y, b.W, b.H)
		}
		if failed {
			t.Status = "a cell failed"
		}
		if b.X-b.W >= region.X {
			t.Parents = append(t.Parents, id(b.X-b.W, b.Y))
		}
		if b.Y-b.H >= region.Y {
			t.Parents = append(t.Parents, id(b.X, b.Y-b.H))
		}
		r.Add(t)
	}
}

// AllPairsUnits returns what tells r of each unit of work (a tile of
// cells one core computed) a multicore All-Pairs run computes
// (multicore.AllPairs.Timed), or nil for a nil r.
func (r *RunReport) AllPairsUnits() func(multicore.Unit, time.Time, time.Time) {
	if r == nil {
		return nil
	}
	var n atomic.Int64 // units need no other identity: none needs another
	return func(u multicore.Unit, started, ended time.Time) {
		r.Add(report.Task{
			ID: int(n.Add(1)), Where: "here", Started: started, Ended: ended, OK: true,
			Name: fmt.Sprintf("rows %d–%d × columns %d–%d", u.I0, u.I1-1, u.J0, u.J1-1),
		})
	}
}

// Write writes the report of the run that ended with err and says where
// on msgs.
func (r *RunReport) Write(tool string, err error, msgs io.Writer) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.run.Ended, r.run.Err = time.Now(), err
	if err := report.WriteFile(r.path, &r.run); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	fmt.Fprintf(msgs, "%s: report in %s\n", tool, r.path)
	return nil
}
