package makeflowcmd

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/makeflow"
)

// writeSummary writes -f's end-of-run summary to path, in the layout of
// CCTools' makeflow summary: the command, how the workflow ended and when,
// its run time, its rules, the failed rules' commands and the outputs with
// their sizes.
func writeSummary(path string, wf *makeflow.Workflow, dir string, rep *makeflow.Report, runErr error, ended time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", strings.Join(os.Args, " "))
	how := "completed"
	var failed *makeflow.FailedError
	switch {
	case errors.As(runErr, &failed):
		how = "failed"
	case runErr != nil:
		how = "aborted"
	}
	fmt.Fprintf(&b, "Workflow %s:\t %s\n", how, ended.Format(time.ANSIC))
	secs := int(rep.Elapsed.Seconds())
	fmt.Fprintf(&b, "Total runtime:\t\t %d:%02d:%02d\n", secs/3600, secs/60%60, secs%60)
	fmt.Fprintf(&b, "Workflow file:\t\t %s\n", wf.Path)
	c := rep.Counts
	fmt.Fprintf(&b, "Number of tasks:\t %d\n", c.Total)
	fmt.Fprintf(&b, "Completed tasks:\t %d/%d\n", c.Complete, c.Total)
	if c.Aborted > 0 {
		fmt.Fprintf(&b, "Aborted tasks:\t %d/%d\n", c.Aborted, c.Total)
	}
	if n := c.Total - c.Complete - c.Aborted - len(rep.Failures); n > 0 {
		fmt.Fprintf(&b, "Tasks not run:\t\t %d/%d\n", n, c.Total)
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(&b, "Failed tasks:\t\t %d/%d\n", len(rep.Failures), c.Total)
		for _, f := range rep.Failures {
			fmt.Fprintf(&b, "\t%s\n", f.Rule.Command)
		}
	}
	if len(rep.Usage) > 0 {
		t := rep.TotalUsage()
		fmt.Fprintf(&b, "CPU time:\t\t %s\n", t.CPU.Round(time.Millisecond))
		if t.MaxRSS > 0 {
			fmt.Fprintf(&b, "Peak memory:\t\t %d MB (rule %d)\n", (t.MaxRSS+1<<20-1)>>20, t.MaxRSSRule)
		}
	}
	var outs []string
	for _, name := range wf.OutputFiles() {
		if info, err := os.Stat(inDir(dir, name)); err == nil {
			outs = append(outs, fmt.Sprintf("\t%s\t%d\n", name, info.Size()))
		}
	}
	if len(outs) > 0 {
		b.WriteString("Output files:\n" + strings.Join(outs, ""))
	}
	out, err := cmdutil.CreateOutput(path)
	if err != nil {
		return fmt.Errorf("--summary-log: %w", err)
	}
	defer out.Abort()
	if _, err := out.WriteString(b.String()); err != nil {
		return fmt.Errorf("--summary-log: %w", err)
	}
	return out.Commit()
}
