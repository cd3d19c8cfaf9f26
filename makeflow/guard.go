package makeflow

import (
	"path/filepath"
	"slices"
	"strings"
)

// A guard knows what removing a workflow's outputs must never destroy: the
// workflow file, the directory it runs in, and its inputs (the files that
// no rule makes). A target that is, or is a directory holding, one of them
// is left alone.
type guard struct {
	paths []string // absolute and clean, sorted
	what  map[string]string
}

func newGuard(w *Workflow, dir string) *guard {
	g := &guard{what: map[string]string{}}
	add := func(name, what string) {
		if abs, err := filepath.Abs(name); err == nil {
			if _, ok := g.what[abs]; !ok {
				g.what[abs] = what
				g.paths = append(g.paths, abs)
			}
		}
	}
	add(w.Path, "the workflow "+w.Path)
	add(dir, "the workflow's directory")
	made := map[string]bool{}
	for _, r := range w.Rules {
		for _, f := range r.Targets {
			made[f.Name] = true
		}
	}
	for _, r := range w.Rules {
		for _, f := range r.Sources {
			if !made[f.Name] {
				add(inDir(dir, f.Name), "the input "+quoteName(f.Name))
			}
		}
	}
	slices.Sort(g.paths)
	return g
}

// holds says what removing (or moving) path would destroy, or "" if
// nothing the guard keeps.
func (g *guard) holds(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "a path that cannot be resolved"
	}
	if what, ok := g.what[abs]; ok {
		return what
	}
	prefix := abs
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	// Everything under abs sorts together, from the first path >= prefix.
	i, _ := slices.BinarySearch(g.paths, prefix)
	if i < len(g.paths) && strings.HasPrefix(g.paths[i], prefix) {
		return g.what[g.paths[i]]
	}
	return ""
}
