package makeflow

import (
	"fmt"
	"os"
)

// A recovery is what an earlier run's log means for this one: which rules
// are done and up to date, and which left outputs that must go before they
// run again.
type recovery struct {
	done  []bool
	reset []int    // rules that started before and must run (again), in id order
	why   []string // one line per rule that is out of date, and why
}

// planRecovery decides, from the log and the files on disk, which rules
// are done. A rule the log records as complete stays done unless
//   - one of its outputs is gone,
//   - one of the workflow's own input files changed after the rule started,
//   - an output of a rule it reads was changed after makeflow made it, or
//   - a rule it depends on must run again.
//
// Everything downstream of a rule that runs again runs again too. With
// check false the files are not looked at (--skip-file-check).
func planRecovery(g *graph, rec *logRecord, dir string, check bool) *recovery {
	n := len(g.w.Rules)
	rc := &recovery{done: make([]bool, n)}
	for id := range n {
		rc.done[id] = rec.state[id] == Complete
	}
	stale := make([]bool, n)
	var queue []int
	mark := func(id int, format string, args ...any) {
		if stale[id] {
			return
		}
		stale[id] = true
		queue = append(queue, id)
		r := g.w.Rules[id]
		rc.why = append(rc.why, fmt.Sprintf("rule %d (%s) must run again: %s", id, r.Pos, fmt.Sprintf(format, args...)))
	}
	if check {
		var readers map[string][]int // file -> rules that read it, built on demand
		for id, r := range g.w.Rules {
			if !rc.done[id] {
				continue
			}
			for _, f := range r.Targets {
				info, err := os.Stat(inDir(dir, f.Name))
				if err != nil && rec.collected[f.Name] {
					continue // garbage collection took it: see below
				}
				if err != nil {
					mark(id, "its output %s was deleted", quoteName(f.Name))
					continue
				}
				made, ok := rec.made[f.Name]
				if !ok || info.ModTime().UnixMicro() <= made {
					continue
				}
				if readers == nil {
					readers = fileReaders(g.w)
				}
				for _, c := range readers[f.Name] {
					if rc.done[c] {
						mark(c, "its input %s was modified after makeflow made it", quoteName(f.Name))
					}
				}
			}
			for _, f := range r.Sources {
				if _, made := g.producer[f.Name]; made || rec.started[id] == 0 {
					continue
				}
				info, err := os.Stat(inDir(dir, f.Name))
				if err == nil && info.ModTime().UnixMicro() > rec.started[id] {
					mark(id, "its input %s changed since it ran", quoteName(f.Name))
				}
			}
		}
	}
	for {
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			rc.done[id] = false
			for _, c := range g.children[id] {
				if rc.done[c] && !stale[c] {
					stale[c] = true
					queue = append(queue, int(c))
				}
			}
		}
		// A rule that runs reads a file garbage collection deleted: the
		// rule that made it runs again too.
		for id, r := range g.w.Rules {
			if rc.done[id] {
				continue
			}
			for _, f := range r.Sources {
				p, made := g.producer[f.Name]
				if made && rc.done[p] && rec.collected[f.Name] && !exists(dir, f.Name) {
					mark(p, "its output %s was collected as garbage, and rule %d needs it", quoteName(f.Name), id)
				}
			}
		}
		if len(queue) == 0 {
			break
		}
	}
	for id, r := range g.w.Rules {
		if rc.done[id] {
			continue
		}
		started := rec.logged[id]
		for _, f := range r.Targets {
			started = started || rec.expected[f.Name]
		}
		if started {
			rc.reset = append(rc.reset, id)
		}
	}
	return rc
}

func exists(dir, name string) bool {
	_, err := os.Stat(inDir(dir, name))
	return err == nil
}

// fileReaders maps each file to the rules that read it.
func fileReaders(w *Workflow) map[string][]int {
	m := map[string][]int{}
	for _, r := range w.Rules {
		for _, f := range r.Sources {
			m[f.Name] = append(m[f.Name], r.ID)
		}
	}
	return m
}
