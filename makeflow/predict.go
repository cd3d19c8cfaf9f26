package makeflow

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/rightsize/rightsize/model"
)

// RuleKey identifies a rule across runs and edits of its workflow: its
// category and its command, as substituted. Two rules with the same key
// are expected to take as long. It is hex, 24 digits: the start of a
// SHA-256, kept in r until its category or command change (so it must
// not be called for one rule by two goroutines at once).
func RuleKey(r *Rule) string {
	if r.key == "" || r.keyCategory != r.Category || r.keyCommand != r.Command {
		sum := sha256.Sum256([]byte(r.Category + "\x00" + r.Command))
		r.key, r.keyCategory, r.keyCommand = hex.EncodeToString(sum[:costKeyLen]), r.Category, r.Command
	}
	return r.key
}

// A RuleCost is what a rule's earlier runs took.
type RuleCost struct {
	Seconds float64 // the last completed run's time
	Runs    int     // completed runs learnt
	// Last is when the last completed run ended, in µs since the epoch
	// (the log's clock): a log read twice teaches it once.
	Last int64
}

// RuleCosts are the measured running times of rules, by RuleKey: what the
// workflow's earlier runs took, kept beside the user's run history (in a
// rule-cost file, costfile.go) so that they outlive the transaction log
// (a clean removes it) and follow a rule that moves in its workflow (the
// log knows rules by position only).
type RuleCosts map[string]RuleCost

// Learn takes from the transaction log at logPath ("" for the
// workflow's own) how long each rule of w took the last time it
// completed, and keeps it. The log names rules by position, so runs that
// started before w's file was last changed, when a position may have been
// another rule's, teach nothing. It returns how many rule runs it learnt
// that c did not know.
func (c RuleCosts) Learn(w *Workflow, logPath string) (int, error) {
	if logPath == "" {
		logPath = w.Path + ".makeflowlog"
	}
	rec, err := readLog(logPath, len(w.Rules))
	if err != nil {
		return 0, err
	}
	var since int64
	if fi, err := os.Stat(w.Path); err == nil {
		since = fi.ModTime().UnixMicro()
	}
	n := 0
	for id, us := range rec.took {
		end := rec.ended[id]
		if us <= 0 || end-us < since || w.Rules[id].Nested != nil {
			continue
		}
		k := RuleKey(w.Rules[id])
		old := c[k]
		if end <= old.Last {
			continue // learnt already
		}
		c[k] = RuleCost{Seconds: float64(us) / 1e6, Runs: old.Runs + 1, Last: end}
		n++
	}
	return n, nil
}

// Ran corrects what Learn took from a run's log with what the run itself
// measured (Report.Took): a rule's time where it ran, without the batch
// system's queue before it. Call it after Learn of that run's log, whose
// lines it then stands for.
func (c RuleCosts) Ran(w *Workflow, took map[int]time.Duration) {
	for id, d := range took {
		if d <= 0 || w.Rules[id].Nested != nil {
			continue
		}
		k := RuleKey(w.Rules[id])
		v := c[k]
		v.Seconds, v.Runs = d.Seconds(), max(v.Runs, 1)
		c[k] = v
	}
}

// Of returns what is known of rule r's earlier runs.
func (c RuleCosts) Of(r *Rule) (RuleCost, bool) {
	v, ok := c[RuleKey(r)]
	return v, ok
}

// Source says where an estimate of a rule's time came from.
type Source int

const (
	FromHistory  Source = iota // the rule's own earlier runs
	FromCategory               // the mean of its category's known rules
	FromWorkflow               // the mean of the workflow's known rules
	Assumed                    // nothing known: DefaultRuleSeconds
)

func (s Source) String() string {
	switch s {
	case FromHistory:
		return "its earlier runs"
	case FromCategory:
		return "its category's mean"
	case FromWorkflow:
		return "the workflow's mean"
	}
	return "assumed"
}

// DefaultRuleSeconds is a rule's time when nothing is known of it or of
// any rule of its workflow.
const DefaultRuleSeconds = 1.0

// Estimate predicts each rule's running time: its own earlier runs'; else
// the mean of the known rules of its category; else of all the
// workflow's known rules; else DefaultRuleSeconds. Nested workflows count
// as instant (their own rules are their own workflow's business).
func (c RuleCosts) Estimate(w *Workflow) ([]float64, []Source) {
	secs := make([]float64, len(w.Rules))
	src := make([]Source, len(w.Rules))
	byCat := map[string][]float64{}
	var all []float64
	for id, r := range w.Rules {
		v, ok := c[RuleKey(r)]
		if !ok || r.Nested != nil {
			src[id] = Assumed
			continue
		}
		secs[id], src[id] = v.Seconds, FromHistory
		byCat[r.Category] = append(byCat[r.Category], v.Seconds)
		all = append(all, v.Seconds)
	}
	for id, r := range w.Rules {
		switch {
		case src[id] == FromHistory:
		case r.Nested != nil:
			secs[id] = 0
		case len(byCat[r.Category]) > 0:
			secs[id], src[id] = stat.Mean(byCat[r.Category], nil), FromCategory
		case len(all) > 0:
			secs[id], src[id] = stat.Mean(all, nil), FromWorkflow
		default:
			secs[id] = DefaultRuleSeconds
		}
	}
	return secs, src
}

// Flow turns w into the makespan model's rules, parents first: secs are
// the rules' predicted times, here marks those that must run on this
// machine (nil: only LOCAL rules and nested workflows), and each rule's
// inputs are measured in dir (a missing input, made by another rule,
// counts as empty). order[i] is the workflow's rule at position i.
func (w *Workflow) Flow(secs []float64, here []bool, dir string) (rules []model.FlowRule, order []int, err error) {
	g := newGraph(w)
	if len(g.errs) > 0 {
		return nil, nil, g.errs
	}
	order, stuck := g.topoOrder()
	if len(stuck) > 0 {
		return nil, nil, g.cycles(stuck)
	}
	pos := make([]int, len(w.Rules))
	for i, id := range order {
		pos[id] = i
	}
	rules = make([]model.FlowRule, len(order))
	for i, id := range order {
		r := w.Rules[id]
		fr := model.FlowRule{Seconds: secs[id], Here: r.onThisMachine() || here != nil && here[id], Cores: int(r.Resources.Cores)}
		seen := map[int]bool{}
		for _, f := range r.Sources {
			if p, ok := g.producer[f.Name]; ok {
				if !seen[p] {
					seen[p] = true
					fr.Parents = append(fr.Parents, pos[p])
				}
				continue
			}
			name := f.Name
			if !filepath.IsAbs(name) {
				name = filepath.Join(dir, name)
			}
			fi, err := os.Stat(name)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, err
			}
			if err == nil {
				fr.Bytes += float64(fi.Size())
			}
		}
		rules[i] = fr
	}
	return rules, order, nil
}
