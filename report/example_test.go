package report_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/rightsize/rightsize/report"
)

// A report of a two-rule workflow: the second rule read the first's
// output, so both are the critical path.
func Example() {
	start := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	run := &report.Run{
		Tool: "makeflow", Title: "wf.mf", Unit: "rule",
		Command: []string{"makeflow", "--report", "wf.html", "wf.mf"},
		Started: start, Ended: start.Add(3 * time.Second),
		Tasks: []report.Task{
			{ID: 0, Name: "rule 0 (wf.mf:1)", Where: "here", OK: true, Started: start, Ended: start.Add(time.Second), CPU: time.Second, MaxRSS: 8 << 20},
			{ID: 1, Name: "rule 1 (wf.mf:4)", Where: "here", OK: true, Started: start.Add(time.Second), Ended: start.Add(3 * time.Second), Parents: []int{0}},
		},
	}
	for _, i := range report.CriticalPath(run.Tasks) {
		fmt.Println(run.Tasks[i].Name)
	}
	var page strings.Builder
	if err := report.Write(&page, run); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Contains(page.String(), `<svg xmlns="http://www.w3.org/2000/svg" id="timeline"`))
	// Output:
	// rule 0 (wf.mf:1)
	// rule 1 (wf.mf:4)
	// true
}
