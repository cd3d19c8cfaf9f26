package makeflow

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// DryRun is an Executor that runs nothing: it writes each job as a line of
// a shell script, in the order they would start, and reports it done at
// once. Run with DryRun writes no log and checks no outputs.
type DryRun struct {
	w       *bufio.Writer
	results chan *Result
	env     []string // the environment last written as exports

	mu    sync.Mutex
	queue []*Result
	wake  chan struct{}
	done  chan struct{}
	wrote bool
}

var _ Executor = (*DryRun)(nil)

// NewDryRun returns a DryRun executor writing to w.
func NewDryRun(w io.Writer) *DryRun {
	d := &DryRun{
		w:       bufio.NewWriter(w),
		results: make(chan *Result),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	go d.feed()
	return d
}

// Submit implements Executor.
func (d *DryRun) Submit(job *Job) (int64, error) {
	if !d.wrote {
		d.wrote = true
		fmt.Fprintf(d.w, "#!/bin/sh\n# Dry run: the commands that would run, in order.\nset -e\n")
	}
	r := job.Rule
	var names []string
	for _, f := range r.Targets {
		names = append(names, quoteName(f.Name))
	}
	fmt.Fprintf(d.w, "\n# rule %d (%s) makes %s\n", r.ID, r.Pos, strings.Join(names, " "))
	if !slices.Equal(r.Env, d.env) {
		for _, kv := range r.Env {
			name, value, _ := strings.Cut(kv, "=")
			fmt.Fprintf(d.w, "export %s=%s\n", name, shellQuote(value))
		}
		d.env = r.Env
	}
	if needsSandbox(r) {
		var links []string
		for _, f := range r.Sources {
			links = append(links, f.Name+" -> "+f.RemoteName())
		}
		for _, f := range r.Targets {
			links = append(links, f.RemoteName()+" -> "+f.Name)
		}
		fmt.Fprintf(d.w, "# runs in a sandbox: %s\n", strings.Join(links, ", "))
	}
	fmt.Fprintln(d.w, job.Command)
	if err := d.w.Flush(); err != nil {
		return 0, err
	}
	now := time.Now()
	d.mu.Lock()
	d.queue = append(d.queue, &Result{Job: job, Started: now, Ended: now})
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return int64(r.ID), nil
}

// feed delivers results in the order the jobs were submitted, so that a
// dry run prints the same script every time.
func (d *DryRun) feed() {
	for {
		d.mu.Lock()
		if len(d.queue) == 0 {
			d.mu.Unlock()
			select {
			case <-d.wake:
				continue
			case <-d.done:
				return
			}
		}
		r := d.queue[0]
		d.queue = d.queue[1:]
		d.mu.Unlock()
		select {
		case d.results <- r:
		case <-d.done:
			return
		}
	}
}

// Results implements Executor.
func (d *DryRun) Results() <-chan *Result { return d.results }

// Cancel implements Executor; dry-run jobs end at once anyway.
func (d *DryRun) Cancel(*Job) {}

// Close implements Executor.
func (d *DryRun) Close() error {
	close(d.done)
	return d.w.Flush()
}

// shellQuote quotes s for /bin/sh if it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r == '=' || r == ':' || r == ',' || r == '+' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
