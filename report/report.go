// Package report writes the HTML report of a finished run (--report
// FILE.html): one self-contained file, readable without a network, to
// keep or hand to a colleague. It holds what ran and how it ended; where
// it ran, with placement's explanation and its prediction against the
// time the run took; a timeline of every task (a Makeflow rule, a block
// job) on the lanes it ran on, drawn as inline SVG; the critical path
// through the tasks that needed each other; each task's resource use
// (wall time, CPU time, peak memory, where the runner measured them); and
// the failures, with the end of their standard error.
//
// A tool fills in a Run as its run goes and calls Write at the end, also
// when the run failed or was interrupted: the report then says so.
package report

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// A Run is what a report shows.
type Run struct {
	Tool    string   // allpairs, wavefront, makeflow
	Title   string   // what ran: the workflow, the problem
	Command []string // the command line, program first
	Unit    string   // what a task is: "rule", "job"

	Started, Ended time.Time
	// Err is how the run ended, nil for success.
	Err error

	// Mode is where it ran (multicore, distributed, hybrid), Backend the
	// batch system, if any; Predicted is placement's prediction in
	// seconds for that mode (0: none), and Explain its explanation.
	Mode, Backend string
	Predicted     float64
	Explain       string

	Tasks []Task
	// Omitted counts the tasks the tool did not keep for the report (a
	// run of millions of cells keeps the first ones): they are counted
	// but not drawn.
	Omitted int
	// MemoryFloor, if set, is the least peak memory the runner can tell
	// apart: Linux counts, in the peak of a process that a program starts,
	// the program's own size at the start (the two share memory until the
	// new process runs its command). A task at or under it is shown as
	// "≤ floor".
	MemoryFloor int64
}

// A Task is one attempt at one piece of the run.
type Task struct {
	// ID identifies the piece (a rule's number): attempts of one piece
	// share it, and Parents name pieces by it.
	ID      int
	Name    string // in words: "rule 3 (wf.mf:7)"
	Command string
	// Where says what ran it: "here" for this machine, else the batch
	// system or worker.
	Where          string
	Started, Ended time.Time
	OK             bool
	Status         string // how it ended, in words: "exit status 1"
	// CPU is the user and system time its processes used, MaxRSS the
	// largest resident set among them in bytes; zero where the runner
	// cannot tell (a batch system's job).
	CPU    time.Duration
	MaxRSS int64
	// Parents are the IDs of the pieces whose outputs it read.
	Parents []int
	Stderr  string // the end of its standard error, for a failure
}

// Wall returns how long the task ran.
func (t Task) Wall() time.Duration { return t.Ended.Sub(t.Started) }

//go:embed page.html
var pageHTML string

var page = template.Must(template.New("report").Parse(pageHTML))

// Write writes r's report to w as one HTML document.
func Write(w io.Writer, r *Run) error {
	return page.Execute(w, newView(r))
}

// CriticalPath returns the longest chain, in wall time, of the pieces
// that completed, each reading the one before: the indexes in tasks of
// their successful attempts, first to last. A parent that did not
// complete, or is not among tasks (done by an earlier run), ends the
// chain.
func CriticalPath(tasks []Task) []int {
	done := map[int]int{} // piece ID → index of its successful attempt
	for i, t := range tasks {
		if t.OK {
			done[t.ID] = i
		}
	}
	// In order of start: a parent completed before its child started.
	order := make([]int, 0, len(done))
	for _, i := range done {
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(tasks[a].Started.Compare(tasks[b].Started), cmp.Compare(a, b))
	})
	length := map[int]time.Duration{}
	prev := map[int]int{}
	best, end := time.Duration(-1), -1
	for _, i := range order {
		length[i], prev[i] = tasks[i].Wall(), -1
		for _, p := range tasks[i].Parents {
			if j, ok := done[p]; ok && j != i {
				if l, ok := length[j]; ok && l+tasks[i].Wall() > length[i] {
					length[i], prev[i] = l+tasks[i].Wall(), j
				}
			}
		}
		if length[i] > best {
			best, end = length[i], i
		}
	}
	var path []int
	for i := end; i >= 0; i = prev[i] {
		path = append(path, i)
	}
	slices.Reverse(path)
	return path
}

// Lanes assigns each task a lane within its Where, as few as the tasks
// need if a lane holds one task at a time: what a lane stands for is a
// core or a slot, though not which. It returns each task's lane and the
// lanes of each Where.
func Lanes(tasks []Task) (lane []int, count map[string]int) {
	lane = make([]int, len(tasks))
	count = map[string]int{}
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return tasks[a].Started.Compare(tasks[b].Started) })
	free := map[string][]time.Time{} // per Where: when each lane frees
	for _, i := range order {
		t := tasks[i]
		ends := free[t.Where]
		l := slices.IndexFunc(ends, func(e time.Time) bool { return !e.After(t.Started) })
		if l < 0 {
			l = len(ends)
			ends = append(ends, time.Time{})
		}
		ends[l] = t.Ended
		free[t.Where], lane[i] = ends, l
		count[t.Where] = len(ends)
	}
	return lane, count
}

// seconds says d in a few digits.
func seconds(d time.Duration) string {
	s := d.Seconds()
	switch {
	case s >= 100:
		return fmt.Sprintf("%.0f s", s)
	case s >= 1:
		return fmt.Sprintf("%.1f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.0f ms", s*1e3)
	default:
		return fmt.Sprintf("%.0f µs", s*1e6)
	}
}

// bytesOf says n bytes in a unit that suits.
func bytesOf(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// plural says n things, with the noun in the number it needs.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// A view is a Run laid out for the template.
type view struct {
	*Run
	Outcome, Took, Against string
	Failed                 bool
	Count                  string // "12 rules, 1 failed"
	Timeline               template.HTML
	Critical               []row
	CriticalTook           string
	Rows                   []row
	RowsNote               string // what Rows leaves out
	Failures               []row
}

// A row is a task as the tables show it.
type row struct {
	Name, Command, Where, Start, Wall, CPU, Busy, Memory, Status, Stderr string
	OK, Critical                                                         bool
}

func newView(r *Run) *view {
	v := &view{Run: r}
	took := r.Ended.Sub(r.Started)
	v.Took = seconds(took)
	switch {
	case r.Err == nil:
		v.Outcome = "completed"
	default:
		// Its first line: the failures have a section of their own.
		first, _, _ := strings.Cut(r.Err.Error(), "\n")
		v.Outcome, v.Failed = "failed: "+first, true
	}
	if r.Predicted > 0 {
		off := 100 * (took.Seconds() - r.Predicted) / r.Predicted
		v.Against = fmt.Sprintf("predicted %s, took %s (%+.0f%%)", seconds(time.Duration(r.Predicted*float64(time.Second))), v.Took, off)
	}
	unit := cmp.Or(r.Unit, "task")
	failed := 0
	for _, t := range r.Tasks {
		if !t.OK {
			failed++
		}
	}
	v.Count = plural(len(r.Tasks)+r.Omitted, unit)
	if failed > 0 {
		v.Count += fmt.Sprintf(", %d failed", failed)
	}
	if r.Omitted > 0 {
		v.Count += fmt.Sprintf(" (the first %d are shown)", len(r.Tasks))
	}
	critical := CriticalPath(r.Tasks)
	onPath := map[int]bool{}
	var pathTook time.Duration
	for _, i := range critical {
		onPath[i] = true
		pathTook += r.Tasks[i].Wall()
	}
	v.CriticalTook = seconds(pathTook)
	for i, t := range r.Tasks {
		rw := row{
			Name: t.Name, Command: t.Command, Where: t.Where,
			Start: seconds(t.Started.Sub(r.Started)), Wall: seconds(t.Wall()),
			Status: cmp.Or(t.Status, "ok"), OK: t.OK, Critical: onPath[i], Stderr: t.Stderr,
			CPU: "—", Busy: "—", Memory: "—",
		}
		if t.CPU > 0 {
			rw.CPU = seconds(t.CPU)
			if w := t.Wall(); w > 0 {
				rw.Busy = fmt.Sprintf("%.0f%%", 100*t.CPU.Seconds()/w.Seconds())
			}
		}
		switch {
		case t.MaxRSS > 0 && t.MaxRSS <= r.MemoryFloor:
			rw.Memory = "≤ " + bytesOf(r.MemoryFloor)
		case t.MaxRSS > 0:
			rw.Memory = bytesOf(t.MaxRSS)
		}
		v.Rows = append(v.Rows, rw)
		if !t.OK {
			v.Failures = append(v.Failures, rw)
		}
	}
	for _, i := range critical {
		v.Critical = append(v.Critical, v.Rows[i])
	}
	if len(v.Rows) > maxRows {
		// The longest, in the order they started.
		order := make([]int, len(v.Rows))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(r.Tasks[b].Wall(), r.Tasks[a].Wall()) })
		order = order[:maxRows]
		slices.Sort(order)
		rows := make([]row, len(order))
		for k, i := range order {
			rows[k] = v.Rows[i]
		}
		v.RowsNote = fmt.Sprintf("The %d longest of %d, in the order they started.", maxRows, len(v.Rows))
		v.Rows = rows
	}
	v.Timeline = timeline(r, onPath)
	return v
}

// maxRows bounds the table of every task; maxBars the timeline's bars
// before those that touch on a lane are drawn as one.
const (
	maxRows = 1000
	maxBars = 2000
)

// Geometry of the timeline, in SVG units (pixels at 100%).
const (
	chartWidth  = 960
	labelWidth  = 130
	laneHeight  = 16
	laneGap     = 2
	axisHeight  = 28
	maxLanes    = 400 // beyond, lanes are drawn thinner to fit
	chartHeight = maxLanes * (laneHeight + laneGap)
)

// timeline draws the tasks on their lanes against time, as an SVG.
func timeline(r *Run, critical map[int]bool) template.HTML {
	lane, count := Lanes(r.Tasks)
	wheres := make([]string, 0, len(count))
	for w := range count {
		wheres = append(wheres, w)
	}
	// This machine first, then the others by name.
	slices.SortFunc(wheres, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "here":
			return -1
		case b == "here":
			return 1
		}
		return strings.Compare(a, b)
	})
	first := map[string]int{}
	lanes := 0
	for _, w := range wheres {
		first[w] = lanes
		lanes += count[w]
	}
	h := float64(laneHeight + laneGap)
	if lanes > maxLanes {
		h = float64(chartHeight) / float64(lanes)
	}
	span := math.Max(r.Ended.Sub(r.Started).Seconds(), 1e-3)
	plotW := float64(chartWidth - labelWidth)
	x := func(t time.Time) float64 { return labelWidth + plotW*t.Sub(r.Started).Seconds()/span }
	height := axisHeight + float64(lanes)*h + 4
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="%d" height="%.0f" viewBox="0 0 %d %.0f" role="img" aria-label="timeline of %s">`,
		chartWidth, height, chartWidth, height, template.HTMLEscapeString(plural(len(r.Tasks), cmp.Or(r.Unit, "task"))))
	// The time axis: about eight ticks at round seconds.
	step := niceStep(span / 8)
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	for k := 0; float64(k)*step <= span+1e-9; k++ {
		s := float64(k) * step
		px := labelWidth + plotW*s/span
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.0f" class="grid"/>`, px, axisHeight-6, px, height)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick">%.*f s</text>`, px, axisHeight-10, decimals, s)
	}
	for _, w := range wheres {
		y := axisHeight + float64(first[w])*h
		label := w
		if w == "here" {
			label = "this machine"
		}
		fmt.Fprintf(&b, `<text x="4" y="%.1f" class="where">%s (%d)</text>`, y+math.Min(h, laneHeight)-4, template.HTMLEscapeString(label), count[w])
		fmt.Fprintf(&b, `<line x1="0" y1="%.1f" x2="%d" y2="%.1f" class="sep"/>`, y, chartWidth, y)
	}
	// Bars in lane order, each lane's by start; with many, those of a
	// kind that touch within a pixel are drawn as one.
	order := make([]int, len(r.Tasks))
	for i := range order {
		order[i] = i
	}
	row := func(i int) int { return first[r.Tasks[i].Where] + lane[i] }
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(row(a), row(b)), r.Tasks[a].Started.Compare(r.Tasks[b].Started))
	})
	class := func(i int) string {
		c := "ok"
		if !r.Tasks[i].OK {
			c = "failed"
		}
		if critical[i] {
			c += " critical"
		}
		return c
	}
	merge := len(r.Tasks) > maxBars
	for k := 0; k < len(order); {
		i := order[k]
		t := r.Tasks[i]
		end, n := t.Ended, 1
		for merge && k+n < len(order) {
			j := order[k+n]
			if row(j) != row(i) || class(j) != class(i) || x(r.Tasks[j].Started)-x(end) > 1 {
				break
			}
			end, n = r.Tasks[j].Ended, n+1
		}
		title := fmt.Sprintf("%s: %s, %s", t.Name, seconds(t.Wall()), cmp.Or(t.Status, "ok"))
		if n > 1 {
			title = fmt.Sprintf("%s from %s: %s", plural(n, cmp.Or(r.Unit, "task")), t.Name, seconds(end.Sub(t.Started)))
		}
		y := axisHeight + float64(row(i))*h
		x0, x1 := x(t.Started), x(end)
		fmt.Fprintf(&b, `<rect class="task %s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s</title></rect>`,
			class(i), x0, y+0.5, math.Max(x1-x0, 1), math.Max(h-laneGap, 1), template.HTMLEscapeString(title))
		k += n
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceStep returns 1, 2 or 5 times a power of ten, at least s.
func niceStep(s float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(math.Max(s, 1e-3))))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= s {
			return m * p
		}
	}
	return 10 * p
}
