package makeflow

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CleanMode says what Clean removes.
type CleanMode int

const (
	// CleanAll removes every file a rule makes, failed-rule directories,
	// and the transaction log.
	CleanAll CleanMode = iota
	// CleanOutputs removes only the files named in MAKEFLOW_OUTPUTS.
	CleanOutputs
	// CleanIntermediates removes the files rules make that are not named
	// in MAKEFLOW_OUTPUTS.
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
// directory that holds it or the workflow directory. Nested workflows
// ("MAKEFLOW sub.mf" rules) are cleaned too, when their files can be read.
func Clean(w *Workflow, opts CleanOptions) error {
	c := &cleaner{opts: opts, out: opts.Out, visited: map[string]bool{}}
	if c.out == nil {
		c.out = io.Discard
	}
	return c.clean(w, opts.Dir, opts.LogPath)
}

type cleaner struct {
	opts    CleanOptions
	out     io.Writer
	visited map[string]bool // workflow files cleaned, against nesting loops
	errs    []string
}

func (c *cleaner) clean(w *Workflow, dir, logPath string) error {
	if dir == "" {
		dir = "."
	}
	if logPath == "" {
		logPath = w.Path + ".makeflowlog"
	}
	if abs, err := filepath.Abs(w.Path); err == nil {
		if c.visited[abs] {
			return nil
		}
		c.visited[abs] = true
	}
	protected := c.protected(w, dir)
	keep := map[string]bool{}
	for _, f := range w.Inputs {
		keep[f] = true
	}
	outputs := map[string]bool{}
	for _, f := range w.Outputs {
		outputs[f] = true
	}
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
			c.remove(dir, f.Name, protected)
		}
		if r.Nested != nil {
			c.cleanNested(r.Nested, dir)
		}
	}
	if c.opts.Mode == CleanAll {
		for _, r := range w.Rules {
			c.remove(dir, failedDir(r.ID), protected)
		}
		if leftovers, err := filepath.Glob(filepath.Join(dir, ".makeflow-sandbox-*")); err == nil {
			for _, p := range leftovers {
				os.RemoveAll(p)
			}
		}
		c.remove("", logPath, protected)
	}
	if len(c.errs) > 0 {
		return fmt.Errorf("clean: %s", strings.Join(c.errs, "; "))
	}
	return nil
}

func (c *cleaner) cleanNested(n *Nested, dir string) {
	sub, subDir, err := n.Open(dir, c.opts.Environ)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(c.out, "warning: cannot clean nested workflow %s: %v\n", n.File, err)
		}
		return
	}
	if err := c.clean(sub, subDir, ""); err != nil {
		c.errs = append(c.errs, err.Error())
	}
}

// protected returns absolute paths that must survive: the workflow file,
// and the workflow directory and its ancestors.
func (c *cleaner) protected(w *Workflow, dir string) []string {
	var paths []string
	for _, p := range []string{w.Path, dir} {
		if abs, err := filepath.Abs(p); err == nil {
			paths = append(paths, abs)
		}
	}
	return paths
}

// remove deletes name (relative to dir) unless it is, or holds, a
// protected path.
func (c *cleaner) remove(dir, name string, protected []string) {
	p := inDir(dir, name)
	abs, err := filepath.Abs(p)
	if err != nil {
		return
	}
	for _, keep := range protected {
		if keep == abs || strings.HasPrefix(keep, abs+string(filepath.Separator)) || abs == "/" {
			fmt.Fprintf(c.out, "warning: not removing %s: it holds the workflow\n", name)
			return
		}
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
