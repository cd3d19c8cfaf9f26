package report

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// at returns a task of piece id on where, from a to b seconds after t0.
func at(id int, where string, a, b float64, parents ...int) Task {
	return Task{
		ID: id, Name: "rule " + string(rune('0'+id)), Where: where, OK: true, Parents: parents,
		Started: t0.Add(time.Duration(a * float64(time.Second))), Ended: t0.Add(time.Duration(b * float64(time.Second))),
	}
}

func TestCriticalPath(t *testing.T) {
	failed := at(5, "here", 0, 1)
	failed.OK = false
	for _, tc := range []struct {
		name  string
		tasks []Task
		want  []int
	}{
		{"none", nil, nil},
		{"one", []Task{at(1, "here", 0, 2)}, []int{0}},
		// 1 → 3 is 2+5 s; 2 → 3 is 4+5 s.
		{"longer parent", []Task{at(1, "here", 0, 2), at(2, "here", 0, 4), at(3, "here", 4, 9, 1, 2)}, []int{1, 2}},
		// A chain beats a longer lone task.
		{"chain", []Task{at(1, "here", 0, 3), at(2, "slurm", 3, 6, 1), at(4, "here", 0, 5)}, []int{0, 1}},
		// A failed first attempt is not on the path; its retry is.
		{"retried", []Task{failed, {ID: 5, Name: "rule 5", Where: "here", OK: true, Started: t0.Add(time.Second), Ended: t0.Add(3 * time.Second)}, at(6, "here", 3, 4, 5)}, []int{1, 2}},
		// A parent done by an earlier run ends the chain.
		{"parent not run", []Task{at(7, "here", 0, 1, 9)}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CriticalPath(tc.tasks); !slices.Equal(got, tc.want) {
				t.Errorf("CriticalPath = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLanes(t *testing.T) {
	tasks := []Task{
		at(1, "here", 0, 2), at(2, "here", 1, 3), at(3, "here", 2, 4), // the third reuses the first's lane
		at(4, "slurm", 0, 5), at(5, "slurm", 0, 5),
	}
	lane, count := Lanes(tasks)
	if want := []int{0, 1, 0, 0, 1}; !slices.Equal(lane, want) {
		t.Errorf("lanes %v, want %v", lane, want)
	}
	if count["here"] != 2 || count["slurm"] != 2 {
		t.Errorf("lane counts %v, want 2 here and 2 on slurm", count)
	}
}

func TestWrite(t *testing.T) {
	bad := at(3, "slurm", 2, 2.5, 1)
	bad.OK, bad.Status, bad.Stderr, bad.Command = false, "exit status 2", "sort: cannot read: <input>\n", "sort < in > out"
	ok := at(1, "here", 0, 2)
	ok.CPU, ok.MaxRSS = 1500*time.Millisecond, 3<<20
	r := &Run{
		Tool: "makeflow", Title: "wf.mf", Command: []string{"makeflow", "--report", "r.html", "wf.mf"}, Unit: "rule",
		Started: t0, Ended: t0.Add(4 * time.Second), Err: errors.New("1 of 3 rules failed"),
		Mode: "hybrid", Backend: "slurm", Predicted: 5, Explain: "makeflow:   choice: hybrid, because <reasons>",
		Tasks: []Task{ok, at(2, "here", 2, 3, 1), bad},
	}
	var b bytes.Buffer
	if err := Write(&b, r); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"<title>makeflow report: wf.mf</title>",
		`<code>makeflow --report r.html wf.mf</code>`,
		"failed: 1 of 3 rules failed",
		"3 rules, 1 failed",
		"predicted 5.0 s, took 4.0 s (-20%)",
		"hybrid (slurm)",
		`<rect class="task ok critical"`, `<rect class="task failed"`,
		"this machine (1)", "slurm (1)",
		"3.0 s of the run's 4.0 s",         // the critical path: rules 1 and 2
		"sort: cannot read: &lt;input&gt;", // escaped
		"because &lt;reasons&gt;",
		"1.5 s", "75%", "3.0 MiB", // rule 1's CPU, busy and memory
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(html, `<rect class="task`); n != 3 {
		t.Errorf("%d bars in the timeline, want 3", n)
	}
}

// TestManyTasks: a run of thousands of cells draws the cells that touch
// on a lane as one bar, lists the longest, and says what it left out.
func TestManyTasks(t *testing.T) {
	r := &Run{Tool: "wavefront", Title: "R", Unit: "cell", Started: t0, Ended: t0.Add(50 * time.Second), Omitted: 100}
	for i := range 5000 {
		// Two cores, one cell after the other on each; cell 77 is longer.
		a := float64(i/2) * 0.02
		b := a + 0.02
		if i == 77 {
			b = a + 0.5
		}
		r.Tasks = append(r.Tasks, at(i, "here", a, b))
	}
	var b bytes.Buffer
	if err := Write(&b, r); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	if n := strings.Count(html, `<rect class="task`); n < 2 || n > 100 {
		t.Errorf("%d bars for 5000 cells back to back on 2 cores, want a few", n)
	}
	for _, want := range []string{
		"5100 cells (the first 5000 are shown)",
		"The 1000 longest of 5000, in the order they started.",
		"rule " + string(rune('0'+77)), // the longest is listed
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(html, "<tr class="); n != 1000 {
		t.Errorf("%d rows, want 1000", n)
	}
}
