package distcmd

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/report"
	"github.com/rightsize/rightsize/wavefront"
)

// A RunReport collects what --report shows of a run (package report): an
// All-Pairs or Wavefront run's block jobs, which Config passes it, or the
// pieces a multicore run or a workflow reports with Add. A nil RunReport
// (no --report) does nothing. Its methods are safe for concurrent use.
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
	mode, backend := f.where()
	r := NewRunReport(f.Report, tool, title, unit, mode, backend, f.decision)
	if f.Distributed() {
		r.elsewhere = f.BatchType
	}
	f.report = r
	return r
}

// NewRunReport begins the report, to be written to path, of tool's run of
// title, whose pieces are units, in mode (multicore, distributed, hybrid)
// on backend, as placement decided (d, if any).
func NewRunReport(path, tool, title, unit, mode, backend string, d *place.Decision) *RunReport {
	r := &RunReport{path: path, elsewhere: "here"}
	r.run = report.Run{Tool: tool, Title: title, Unit: unit, Command: os.Args, Started: time.Now(), Mode: mode, Backend: backend}
	if d != nil {
		var b strings.Builder
		d.Explain(&b)
		r.run.Explain, r.run.Predicted = b.String(), d.Predicted(d.Mode)
	}
	return r
}

// NoPrediction drops the prediction from the report: one made from
// guesses (assumed rule times) says nothing of the models.
func (r *RunReport) NoPrediction() {
	if r != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.run.Predicted = 0
	}
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
	var self syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) == nil {
		r.run.MemoryFloor = self.Maxrss * 1024 // kilobytes on Linux
	}
	// A report already there is replaced only by a whole new one.
	out, err := cmdutil.CreateOutput(r.path)
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	defer out.Abort()
	if err := report.Write(out, &r.run); err != nil {
		return fmt.Errorf("--report %s: %w", r.path, err)
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	fmt.Fprintf(msgs, "%s: report in %s\n", tool, r.path)
	return nil
}
