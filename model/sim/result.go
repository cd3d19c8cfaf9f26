package sim

import (
	"fmt"
	"image/color"
	"io"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Result is what a simulated run did. Times are simulated seconds, sizes
// MB.
type Result struct {
	Name string
	// Tasks were submitted; Finished completed, Failed failed (lost their
	// workers too often). Unfinished says the run stopped with tasks left:
	// at the scenario's limit, or with no worker left or to come.
	Tasks, Finished, Failed int
	// Blocks of a distributed All-Pairs or Wavefront; done; given up.
	Blocks, BlocksDone, BlocksFailed int
	Unfinished                       bool
	// Stalled says the run stopped because nothing more could happen
	// (see Run).
	Stalled bool
	// Makespan is when the last task ended.
	Makespan float64
	// Attempts counts the tasks sent to workers, copies included; Copies
	// the speculative copies, FastAborts the attempts fast-aborted,
	// Discarded the reports that came after another attempt's.
	Attempts, Copies, FastAborts, Discarded int
	// Workers that connected, died (killed or vanished), were dropped by
	// the master (keepalive, fast abort); factory jobs submitted.
	WorkersJoined, WorkersDied, WorkersDropped, JobsSubmitted int
	// Warnings the scheduler gave.
	Warnings int
	// Steals that brought tasks and that found none (Masters.Steal).
	Steals, StealsFailed int
	// FactoryErr is why the factory gave up, if it did.
	FactoryErr string
	// WorkerSeconds and CoreSeconds are the time workers were connected
	// (what a run costs on a cluster); BusyCoreSeconds the cores' time in
	// attempts whose result was taken. Utilisation is their ratio.
	WorkerSeconds, CoreSeconds, BusyCoreSeconds float64
	Utilisation                                 float64
	// IdleAfterSeconds is the time the factory's workers still connected
	// at the end stay on, idle, until their idle timeout ends them (the
	// factory never removes a worker): what the run still costs after its
	// makespan, which WorkerSeconds does not count. Seed 000's Table 4.2
	// counts it in its worker time.
	IdleAfterSeconds float64
	// MBToWorkers and MBFromWorkers are the data moved.
	MBToWorkers, MBFromWorkers float64
	// Events is how many simulated events were handled.
	Events int
	// Timeline samples the run over time (at most 2000 points).
	Timeline []Sample
}

// Sample is the state of a run at a time.
type Sample struct {
	Time                                float64
	Workers, Running, Waiting, Finished int
	// Target is the workers the factory wants, submitted or running, and
	// Capacity the master's capacity as the factory last read it (0: none
	// yet); both 0 without a factory.
	Target, Capacity int
}

// String writes the result as "name value" lines.
func (r *Result) String() string {
	var b strings.Builder
	line := func(name string, format string, v ...any) {
		fmt.Fprintf(&b, "%-18s "+format+"\n", append([]any{name}, v...)...)
	}
	line("scenario", "%s", r.Name)
	if r.Tasks > 0 {
		line("tasks", "%d finished, %d failed of %d", r.Finished, r.Failed, r.Tasks)
	}
	if r.Blocks > 0 {
		line("blocks", "%d done, %d given up of %d", r.BlocksDone, r.BlocksFailed, r.Blocks)
	}
	left := r.Tasks - r.Finished - r.Failed + r.Blocks - r.BlocksDone - r.BlocksFailed
	switch {
	case r.Stalled:
		line("unfinished", "%d tasks or blocks left: nothing more could happen", left)
	case r.Unfinished:
		line("unfinished", "%d tasks or blocks left at the time limit", left)
	}
	line("makespan", "%.3f s", r.Makespan)
	line("utilisation", "%.1f%%", 100*r.Utilisation)
	line("worker time", "%s, %s", amount(r.WorkerSeconds, "worker"), amount(r.CoreSeconds, "core"))
	if r.IdleAfterSeconds > 0 {
		line("idle after", "%s until the factory's workers time out", amount(r.IdleAfterSeconds, "worker"))
	}
	line("busy core time", "%s", amount(r.BusyCoreSeconds, "core"))
	line("transferred", "%.1f MB to workers, %.1f MB from them", r.MBToWorkers, r.MBFromWorkers)
	line("attempts", "%d (%d copies, %d fast aborts, %d late reports)", r.Attempts, r.Copies, r.FastAborts, r.Discarded)
	line("workers", "%d joined, %d died, %d dropped", r.WorkersJoined, r.WorkersDied, r.WorkersDropped)
	if r.JobsSubmitted > 0 || r.FactoryErr != "" {
		line("factory jobs", "%d submitted", r.JobsSubmitted)
	}
	if r.FactoryErr != "" {
		line("factory error", "%s", r.FactoryErr)
	}
	if r.Steals+r.StealsFailed > 0 {
		line("steals", "%d brought tasks, %d found none", r.Steals, r.StealsFailed)
	}
	if r.Warnings > 0 {
		line("warnings", "%d", r.Warnings)
	}
	line("events", "%d", r.Events)
	return b.String()
}

// amount writes seconds of a unit's time, in hours when there are many.
func amount(sec float64, unit string) string {
	if sec < 36000 {
		return fmt.Sprintf("%.0f %s-seconds", sec, unit)
	}
	return fmt.Sprintf("%.1f %s-hours", sec/3600, unit)
}

// WriteTimeline draws the timeline — workers connected, tasks running and
// tasks waiting over time — as a PNG image.
func (r *Result) WriteTimeline(w io.Writer) error {
	p := plot.New()
	p.Title.Text = r.Name
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "count"
	p.Legend.Top = true
	series := []struct {
		name  string
		color color.RGBA
		value func(Sample) int
	}{
		{"workers", color.RGBA{R: 31, G: 119, B: 180, A: 255}, func(s Sample) int { return s.Workers }},
		{"tasks running", color.RGBA{R: 44, G: 160, B: 44, A: 255}, func(s Sample) int { return s.Running }},
		{"tasks waiting", color.RGBA{R: 214, G: 39, B: 40, A: 255}, func(s Sample) int { return s.Waiting }},
	}
	for _, sr := range series {
		xys := make(plotter.XYs, len(r.Timeline))
		for i, s := range r.Timeline {
			xys[i] = plotter.XY{X: s.Time, Y: float64(sr.value(s))}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("timeline: %w", err)
		}
		l.Color = sr.color
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(sr.name, l)
	}
	wt, err := p.WriterTo(8*vg.Inch, 4*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}
