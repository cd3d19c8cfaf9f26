package makeflow

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"

	"github.com/rightsize/rightsize/jx"
)

// Open parses the nested workflow of a rule whose workflow runs in dir, and
// returns it with the directory it runs in. environ is as for ParseFile.
func (n *Nested) Open(dir string, environ []string) (w *Workflow, subDir string, err error) {
	file := inDir(dir, n.File)
	subDir = dir
	if n.Dir != "" {
		subDir = inDir(dir, n.Dir)
	}
	switch {
	case n.JX:
		var args *jx.Object
		if args, err = n.jxArgs(); err != nil {
			return nil, subDir, err
		}
		var vars *jx.Scope
		for _, p := range args.Pairs {
			vars = vars.Bind(p.Key, p.Value)
		}
		// Only fetch() could wait, and it gives up by itself.
		w, err = ParseJXFile(context.Background(), file, JXOptions{Vars: vars, Dir: subDir})
	case n.JSON:
		w, err = ParseJSONFile(file)
	default:
		w, err = ParseFile(file, environ)
	}
	return w, subDir, err
}

// nestedLog returns, for a rule that runs a JX sub-workflow with args, the
// log that run keeps, relative to the directory the enclosing workflow
// runs in: FILE.ID.makeflowlog, as in CCTools, since rules may run the
// same file with different args at once. It returns "" for other rules,
// whose nested workflows keep the log they would keep on their own.
func (r *Rule) nestedLog() string {
	if r.Nested == nil || !r.Nested.JX || r.Nested.Args == "" {
		return ""
	}
	return fmt.Sprintf("%s.%d.makeflowlog", r.Nested.File, r.ID)
}

// CheckNested checks, as Check checks w, the workflows that w's nested
// rules (MAKEFLOW file [dir]) run, and theirs in turn. w runs in dir;
// exists, if not nil, is asked about paths joined to the directory each
// nested workflow runs in; a file that a rule of an enclosing workflow
// makes counts as existing. A nested workflow whose file does not exist
// yet is skipped: a rule of w makes it (Check reports it otherwise), and
// it is checked when it runs.
func CheckNested(w *Workflow, dir string, environ []string, exists func(path string) bool) error {
	var list ErrorList
	seen := map[string]bool{}
	var walk func(w *Workflow, dir string, enclosingMade map[string]bool)
	walk = func(w *Workflow, dir string, enclosingMade map[string]bool) {
		made := maps.Clone(enclosingMade)
		for _, r := range w.Rules {
			for _, f := range r.Targets {
				if abs, err := filepath.Abs(inDir(dir, f.Name)); err == nil {
					made[abs] = true
				}
			}
		}
		for _, r := range w.Rules {
			if r.Nested == nil {
				continue
			}
			abs, err := filepath.Abs(inDir(dir, r.Nested.File))
			// A JX sub-workflow is another workflow with other args.
			abs += "\x00" + r.Nested.Args
			if err != nil || seen[abs] {
				continue
			}
			seen[abs] = true
			sub, subDir, err := r.Nested.Open(dir, environ)
			var errs ErrorList
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue
			case errors.As(err, &errs):
				list = append(list, errs...)
				continue
			case err != nil:
				list = append(list, &Error{Pos: r.Pos, Msg: fmt.Sprintf("nested workflow %s: %v", r.Nested.File, err)})
				continue
			}
			var subExists func(string) bool
			if exists != nil {
				subExists = func(name string) bool {
					path := inDir(subDir, name)
					abs, err := filepath.Abs(path)
					return err == nil && made[abs] || exists(path)
				}
			}
			if errors.As(sub.Check(subExists), &errs) {
				list = append(list, errs...)
			}
			walk(sub, subDir, made)
		}
	}
	walk(w, dir, map[string]bool{})
	if len(list) == 0 {
		return nil
	}
	return list
}
