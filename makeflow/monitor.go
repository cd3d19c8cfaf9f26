package makeflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Usage is what one attempt at a rule used, as --monitor records it: from
// the process runner's rusage on this machine (a batch system reports only
// times).
type Usage struct {
	Wall   time.Duration
	CPU    time.Duration // user and system time; 0 where unknown
	MaxRSS int64         // bytes; 0 where unknown
	Disk   int64         // bytes of the outputs it left
}

// monitorSummaryName is the file CCTools' resource monitor writes for rule
// id under makeflow --monitor (its default --monitor-log-fmt,
// "resource-rule-%").
func monitorSummaryName(id int) string {
	return "resource-rule-" + strconv.Itoa(id) + ".summary"
}

// usageOf measures what a job used: its result's times and rusage, and the
// outputs it left on disk.
func usageOf(res *Result, dir string) Usage {
	u := Usage{Wall: res.Ended.Sub(res.Started), CPU: res.CPU, MaxRSS: res.MaxRSS}
	for _, f := range res.Job.Rule.Targets {
		u.Disk += diskUsage(inDir(dir, f.Name))
	}
	return u
}

// diskUsage is the size of the file, or of everything under the directory,
// at path.
func diskUsage(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// writeMonitorSummary writes u as the resource summary of CCTools'
// resource_monitor (resource-rule-N.summary in dir): a JSON object whose
// measures are [value, "unit"] pairs, memory and disk in whole MB rounded
// up. Memory and CPU time are left out where they are not known.
func writeMonitorSummary(dir string, res *Result, u Usage) error {
	r := res.Job.Rule
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // commands keep their > and &, as CCTools writes them
	field := func(key string, value any) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		enc.Encode(key)
		b.Truncate(b.Len() - 1)
		b.WriteByte(':')
		enc.Encode(value)
		b.Truncate(b.Len() - 1)
	}
	measure := func(key string, value any, unit string) { field(key, []any{value, unit}) }
	host, _ := os.Hostname()
	category := r.Category
	if category == "" {
		category = "default"
	}
	field("category", category)
	field("executable_type", "dynamic")
	field("host", host)
	field("command", res.Job.Command)
	exitType := "normal"
	switch {
	case res.Signal != "":
		exitType = "signal"
	case res.Err != nil || res.Canceled:
		exitType = "error"
	}
	field("exit_status", res.ExitCode)
	field("exit_type", exitType)
	if res.Signal != "" {
		field("signal", res.Signal)
	}
	seconds := func(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }
	measure("start", seconds(res.Started), "s")
	measure("end", seconds(res.Ended), "s")
	measure("wall_time", u.Wall.Round(time.Microsecond).Seconds(), "s")
	if u.CPU > 0 || u.MaxRSS > 0 {
		measure("cpu_time", u.CPU.Round(time.Microsecond).Seconds(), "s")
		measure("memory", ceilMB(u.MaxRSS), "MB")
	}
	measure("disk", ceilMB(u.Disk), "MB")
	if u.CPU > 0 && u.Wall > 0 {
		cores := math.Round(u.CPU.Seconds()/u.Wall.Seconds()*1000) / 1000
		measure("cores", cores, "cores")
		measure("cores_avg", cores, "cores")
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, monitorSummaryName(r.ID)), []byte("{"+b.String()+"}\n"), 0o666)
}

// ceilMB is bytes in whole megabytes (2^20), rounded up.
func ceilMB(bytes int64) int64 { return (bytes + 1<<20 - 1) >> 20 }

// monitor records what a finished attempt used, for --monitor: its
// summary in Options.MonitorDir, and its usage in the report.
func (d *driver) monitor(res *Result) {
	if d.opts.MonitorDir == "" || d.opts.DryRun {
		return
	}
	u := usageOf(res, d.dir)
	if d.report.Usage == nil {
		d.report.Usage = map[int]Usage{}
	}
	d.report.Usage[res.Job.Rule.ID] = u
	if err := writeMonitorSummary(inDir(d.dir, d.opts.MonitorDir), res, u); err != nil {
		fmt.Fprintf(d.out, "warning: --monitor: %v\n", err)
	}
}

// A UsageTotal sums what the rules of a run used, for its summary.
type UsageTotal struct {
	Rules      int           // rules measured
	CPU        time.Duration // summed
	Wall       time.Duration // summed
	MaxRSS     int64         // the largest peak memory of one rule
	MaxRSSRule int           // that rule's ID
	Disk       int64         // the outputs' bytes, summed
}

// TotalUsage sums Usage over the rules.
func (r *Report) TotalUsage() UsageTotal {
	t := UsageTotal{MaxRSSRule: -1}
	for id, u := range r.Usage {
		t.Rules++
		t.CPU += u.CPU
		t.Wall += u.Wall
		t.Disk += u.Disk
		if u.MaxRSS > t.MaxRSS || (u.MaxRSS == t.MaxRSS && t.MaxRSSRule >= 0 && id < t.MaxRSSRule) {
			t.MaxRSS, t.MaxRSSRule = u.MaxRSS, id
		}
	}
	return t
}

// String says it in one line.
func (t UsageTotal) String() string {
	s := fmt.Sprintf("%d rules measured: CPU time %s, wall time %s, outputs %d MB",
		t.Rules, t.CPU.Round(time.Millisecond), t.Wall.Round(time.Millisecond), ceilMB(t.Disk))
	if t.MaxRSSRule >= 0 && t.MaxRSS > 0 {
		s += fmt.Sprintf(", peak memory %d MB (rule %d)", ceilMB(t.MaxRSS), t.MaxRSSRule)
	}
	return s
}
