package makeflow

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CleanMode says what Clean removes. A workflow's outputs are the files
// named in MAKEFLOW_OUTPUTS; a workflow that does not set it has as outputs
// the files some rule makes and no rule reads (as in CCTools: an empty
// MAKEFLOW_OUTPUTS means no outputs). Its intermediates are the other files
// rules make.
type CleanMode int

const (
	// CleanAll removes every file a rule makes, failed-rule and stale-output
	// directories, and the transaction log.
	CleanAll CleanMode = iota
	// CleanOutputs removes only the workflow's outputs.
	CleanOutputs
	// CleanIntermediates removes the files rules make that are not outputs.
	CleanIntermediates
)

// CleanOptions configures Clean.
type CleanOptions struct {
	Mode CleanMode
	// Dir and LogPath are as in Options.
	Dir     string
	LogPath string
	// Out receives a "deleted <file>" line per file removed; nil discards.
	Out io.Writer
	// Environ is passed to ParseFile for nested workflows.
	Environ []string
}

// Clean removes what a workflow made. It never removes a file that no rule
// makes, a file named in MAKEFLOW_INPUTS, the workflow file itself or a
// directory that holds one of them or the workflow directory. Nested
// workflows ("MAKEFLOW sub.mf" rules) are cleaned too, when their files can
// be read.
//
// Clean first locks the transaction log of the workflow and of every nested
// one, as a run does; if another process holds one (a makeflow running the
// workflow), it removes nothing and returns a *LockedError.
func Clean(w *Workflow, opts CleanOptions) error {
	c := &cleaner{opts: opts, out: opts.Out, visited: map[string]bool{}}
	if c.out == nil {
		c.out = io.Discard
	}
	defer c.unlock()
	if err := c.lock(w, opts.Dir, opts.LogPath); err != nil {
		return fmt.Errorf("clean: nothing was removed: %w", err)
	}
	for _, job := range c.jobs {
		c.clean(job)
	}
	if len(c.errs) > 0 {
		return fmt.Errorf("clean: %s", strings.Join(c.errs, "; "))
	}
	return nil
}

type cleaner struct {
	opts    CleanOptions
	out     io.Writer
	visited map[string]bool // workflow files seen, against nesting loops
	jobs    []cleanJob
	errs    []string
}

// A cleanJob is one workflow to clean, with its log locked.
type cleanJob struct {
	w       *Workflow
	dir     string
	logPath string
	log     *os.File // the locked log; nil if its directory does not exist
	created bool     // the log did not exist before Clean locked it
}

// lock locks the logs of w and of its nested workflows, in that order, and
// records a job for each.
func (c *cleaner) lock(w *Workflow, dir, logPath string) error {
	if dir == "" {
		dir = "."
	}
	if logPath == "" {
		logPath = w.Path + ".makeflowlog"
	}
	if abs, err := filepath.Abs(w.Path); err == nil {
		// The log tells apart JX sub-workflows run with different args.
		key := abs + "\x00" + logPath
		if c.visited[key] {
			return nil
		}
		c.visited[key] = true
	}
	job := cleanJob{w: w, dir: dir, logPath: logPath}
	_, statErr := os.Lstat(logPath)
	f, err := openLocked(logPath, os.O_RDONLY)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// No directory for a log: nothing of this workflow runs.
	case err != nil:
		return err
	default:
		job.log, job.created = f, statErr != nil
	}
	c.jobs = append(c.jobs, job)
	for _, r := range w.Rules {
		if r.Nested == nil {
			continue
		}
		sub, subDir, err := r.Nested.Open(dir, c.opts.Environ)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(c.out, "warning: cannot clean nested workflow %s: %v\n", r.Nested.File, err)
			}
			continue
		}
		subLog := r.nestedLog()
		if subLog != "" {
			subLog = inDir(dir, subLog)
		}
		if err := c.lock(sub, subDir, subLog); err != nil {
			return err
		}
	}
	return nil
}

func (c *cleaner) unlock() {
	for _, job := range c.jobs {
		if job.log != nil {
			job.log.Close()
		}
	}
}

func (c *cleaner) clean(job cleanJob) {
	w, dir := job.w, job.dir
	g := newGuard(w, dir)
	keep := map[string]bool{}
	for _, f := range w.Inputs {
		keep[f] = true
	}
	outputs := outputFiles(w)
	for _, r := range w.Rules {
		for _, f := range r.Targets {
			switch {
			case keep[f.Name]:
				continue
			case c.opts.Mode == CleanOutputs && !outputs[f.Name]:
				continue
			case c.opts.Mode == CleanIntermediates && outputs[f.Name]:
				continue
			}
			c.remove(dir, f.Name, g)
		}
	}
	if c.opts.Mode == CleanAll {
		for _, r := range w.Rules {
			c.remove(dir, failedDir(r.ID), g)
			for _, d := range staleDirs(dir, r.ID) {
				c.remove(dir, d, g)
			}
		}
		if leftovers, err := filepath.Glob(filepath.Join(dir, ".makeflow-sandbox-*")); err == nil {
			for _, p := range leftovers {
				os.RemoveAll(p)
			}
		}
	}
	if job.log != nil && (c.opts.Mode == CleanAll || job.created) {
		// Removed while still locked: a run that opened it meanwhile finds
		// it gone once it has the lock, and makes a new one (lockLog).
		quiet := job.created && c.opts.Mode != CleanAll
		if quiet {
			os.Remove(job.logPath)
		} else {
			c.remove("", job.logPath, g)
		}
	}
}

// OutputFiles returns the workflow's outputs, sorted: the files
// MAKEFLOW_OUTPUTS names, or, if it is not set, the files rules make that
// no rule reads.
func (w *Workflow) OutputFiles() []string {
	return slices.Sorted(maps.Keys(outputFiles(w)))
}

// outputFiles returns the workflow's outputs: the files MAKEFLOW_OUTPUTS
// names, or, if it is not set, the files rules make that no rule reads.
func outputFiles(w *Workflow) map[string]bool {
	outputs := map[string]bool{}
	if w.Outputs != nil {
		for _, f := range w.Outputs {
			outputs[f] = true
		}
		return outputs
	}
	read := map[string]bool{}
	for _, r := range w.Rules {
		for _, f := range r.Sources {
			read[f.Name] = true
		}
	}
	for _, r := range w.Rules {
		for _, f := range r.Targets {
			if !read[f.Name] {
				outputs[f.Name] = true
			}
		}
	}
	return outputs
}

// remove deletes name (relative to dir) unless the guard keeps it or
// something under it.
func (c *cleaner) remove(dir, name string, g *guard) {
	p := inDir(dir, name)
	if what := g.holds(p); what != "" {
		fmt.Fprintf(c.out, "warning: not removing %s: it holds %s\n", name, what)
		return
	}
	if _, err := os.Lstat(p); err != nil {
		return
	}
	if err := os.RemoveAll(p); err != nil {
		c.errs = append(c.errs, err.Error())
		return
	}
	fmt.Fprintf(c.out, "deleted %s\n", name)
}
