package makeflow

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/model"
)

// predictFlow is a workflow of two categories: a and b (category big),
// c and d (category small); d, LOCAL, needs the other three and asks for
// two cores.
const predictFlow = `CATEGORY=big
a:
	echo a > a
b: in
	echo b > b
CATEGORY=small
c:
	echo c > c
CORES=2
d: a b c
	LOCAL cat a b c > d
`

func parsePredictFlow(t *testing.T) *Workflow {
	t.Helper()
	w, err := Parse("wf.mf", []byte(predictFlow), nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestEstimate(t *testing.T) {
	w := parsePredictFlow(t)
	known := func(secs map[int]float64) RuleCosts {
		c := RuleCosts{}
		for id, s := range secs {
			c[RuleKey(w.Rules[id])] = RuleCost{Seconds: s, Runs: 1}
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		costs RuleCosts
		secs  []float64
		src   []Source
	}{
		{"nothing known", RuleCosts{}, []float64{1, 1, 1, 1},
			[]Source{Assumed, Assumed, Assumed, Assumed}},
		{"one of a category", known(map[int]float64{0: 4}), []float64{4, 4, 4, 4},
			[]Source{FromHistory, FromCategory, FromWorkflow, FromWorkflow}},
		{"category before workflow", known(map[int]float64{0: 4, 2: 10}), []float64{4, 4, 10, 10},
			[]Source{FromHistory, FromCategory, FromHistory, FromCategory}},
		{"workflow's mean", known(map[int]float64{0: 4, 1: 10}), []float64{4, 10, 7, 7},
			[]Source{FromHistory, FromHistory, FromWorkflow, FromWorkflow}},
		{"all known", known(map[int]float64{0: 1, 1: 2, 2: 3, 3: 4}), []float64{1, 2, 3, 4},
			[]Source{FromHistory, FromHistory, FromHistory, FromHistory}},
	} {
		secs, src := tc.costs.Estimate(w)
		if !reflect.DeepEqual(secs, tc.secs) || !reflect.DeepEqual(src, tc.src) {
			t.Errorf("%s: Estimate = %v %v, want %v %v", tc.name, secs, src, tc.secs, tc.src)
		}
	}
}

// writeLog writes a transaction log whose lines are "µs id state" for
// rules of a 4-rule workflow.
func writeLog(t *testing.T, path string, lines ...[3]int64) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# STARTED 1\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "%d %d %d 0 0 0 0 0 0 4\n", l[0], l[1], l[2])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLearn(t *testing.T) {
	dir := t.TempDir()
	w := parsePredictFlow(t)
	w.Path = filepath.Join(dir, "wf.mf")
	if err := os.WriteFile(w.Path, []byte(predictFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	// The workflow was written at 100 s (in µs: 100e6) of the log's clock.
	edited := time.UnixMicro(100e6)
	if err := os.Chtimes(w.Path, edited, edited); err != nil {
		t.Fatal(err)
	}
	logPath := w.Path + ".makeflowlog"
	running, complete, failed := int64(Running), int64(Complete), int64(Failed)
	writeLog(t, logPath,
		[3]int64{50e6, 0, running}, [3]int64{60e6, 0, complete}, // before the edit
		[3]int64{101e6, 1, running}, [3]int64{103e6, 1, complete},
		[3]int64{104e6, 1, running}, [3]int64{104.5e6, 1, complete}, // the last run counts
		[3]int64{101e6, 2, running}, [3]int64{102e6, 2, failed},
		[3]int64{105e6, 3, running}, // never completed
	)
	c := RuleCosts{}
	n, err := c.Learn(w, "")
	if err != nil || n != 1 {
		t.Fatalf("Learn = %d, %v; want 1 run learnt", n, err)
	}
	want := RuleCosts{RuleKey(w.Rules[1]): {Seconds: 0.5, Runs: 1, Last: 104.5e6}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("costs %v, want %v", c, want)
	}
	// The same log again teaches nothing new; a later run does.
	if n, _ := c.Learn(w, ""); n != 0 || c[RuleKey(w.Rules[1])].Runs != 1 {
		t.Errorf("a log read twice: %d learnt, %v", n, c)
	}
	writeLog(t, logPath, [3]int64{200e6, 1, running}, [3]int64{202e6, 1, complete})
	if n, _ := c.Learn(w, ""); n != 1 || c[RuleKey(w.Rules[1])] != (RuleCost{Seconds: 2, Runs: 2, Last: 202e6}) {
		t.Errorf("a later run: %d learnt, %v", n, c)
	}

	// Kept and read back.
	path := filepath.Join(dir, "cache", "rules.costs")
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	if got := LoadRuleCosts(path, w); !reflect.DeepEqual(got, c) {
		t.Errorf("read back %v, want %v", got, c)
	}
}

// TestRuleCostFile: the rule-cost file keeps the costs of every workflow
// saved into it, sorted, and gives each workflow its own; a damaged file
// holds nothing and is replaced whole.
func TestRuleCostFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cache", "rules.costs")
	w := parsePredictFlow(t)
	var src strings.Builder
	for i := range 50 {
		fmt.Fprintf(&src, "o_%d:\n\techo %d > o_%d\n", i, i, i)
	}
	other, err := Parse("other.mf", []byte(src.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	otherCosts := RuleCosts{}
	for i, r := range other.Rules {
		otherCosts[RuleKey(r)] = RuleCost{Seconds: float64(i), Runs: i, Last: int64(i) * 1e6}
	}
	mustSave := func(c RuleCosts) {
		t.Helper()
		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, wf *Workflow, want RuleCosts, records int) {
		t.Helper()
		if got := LoadRuleCosts(path, wf); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read %v, want %v", what, got, want)
		}
		cf, err := openCostFile(path, costReadAll)
		if err != nil {
			t.Fatal(err)
		}
		defer cf.close()
		if cf.len() != records || !cf.sorted() {
			t.Errorf("%s: %d records, sorted %v; want %d, sorted", what, cf.len(), cf.sorted(), records)
		}
	}

	mustSave(otherCosts)
	first := RuleCosts{RuleKey(w.Rules[0]): {Seconds: 1, Runs: 2, Last: 3}, "not a key": {Seconds: 9}}
	mustSave(first)
	delete(first, "not a key")
	check("merged", w, first, 51)
	check("the other workflow's kept", other, otherCosts, 51)

	second := RuleCosts{RuleKey(w.Rules[0]): {Seconds: 5, Runs: 6, Last: 7}, RuleKey(w.Rules[2]): {Seconds: 0.25, Runs: 1, Last: 8}}
	mustSave(second)
	check("replaced and added", w, second, 52)
	check("the other workflow's still kept", other, otherCosts, 52)

	// Costs of rules the file has are written over their records, in the
	// same file.
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	second[RuleKey(w.Rules[2])] = RuleCost{Seconds: 0.5, Runs: 2, Last: 9}
	mustSave(second)
	check("written in place", w, second, 52)
	check("the other workflow's kept by the writing in place", other, otherCosts, 52)
	if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
		t.Errorf("the file was replaced (%v), not written in place", err)
	}

	for _, damaged := range []struct{ name, content string }{
		{"an earlier version's JSON", `{"0123456789abcdef01234567":{"seconds":1}}`},
		{"a record cut short", costHeader + strings.Repeat("x", costRecord-1)},
		{"another header", strings.Replace(costHeader, "v1", "v9", 1) + strings.Repeat("x", costRecord)},
		{"records out of order", costHeader + strings.Repeat("z", costRecord) + strings.Repeat("a", costRecord)},
	} {
		if err := os.WriteFile(path, []byte(damaged.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if damaged.name != "records out of order" {
			check(damaged.name, w, RuleCosts{}, 0)
		}
		mustSave(second)
		check(damaged.name+", then saved", w, second, 2)
	}
}

func TestFlow(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	w := parsePredictFlow(t)
	rules, order, err := w.Flow([]float64{1, 2, 3, 4}, []bool{false, false, true, false}, dir)
	if err != nil {
		t.Fatal(err)
	}
	byRule := make([]model.FlowRule, len(rules))
	pos := make([]int, len(rules))
	for i, id := range order {
		byRule[id], pos[id] = rules[i], i
	}
	want := []model.FlowRule{
		{Seconds: 1},
		{Seconds: 2, Bytes: 1000},
		{Seconds: 3, Here: true},
		{Seconds: 4, Here: true, Cores: 2, Parents: []int{pos[0], pos[1], pos[2]}},
	}
	if !reflect.DeepEqual(byRule, want) {
		t.Errorf("Flow = %+v, want %+v", byRule, want)
	}
	if cp, _ := model.CriticalPath(rules); cp != 7 {
		t.Errorf("critical path %v, want 7", cp)
	}
	if got, want := w.Parents(), [][]int{nil, nil, nil, {0, 1, 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Parents = %v, want %v", got, want)
	}
}

// TestRan: a run's own times replace those its log gives, which include
// a batch system's queue; what Learn noted of the log stays, so that the
// log read again teaches nothing.
func TestRan(t *testing.T) {
	w := parsePredictFlow(t)
	k := RuleKey(w.Rules[1])
	c := RuleCosts{k: {Seconds: 3, Runs: 2, Last: 77}}
	c.Ran(w, map[int]time.Duration{1: 500 * time.Millisecond, 0: 2 * time.Second, 2: 0})
	want := RuleCosts{
		k:                   {Seconds: 0.5, Runs: 2, Last: 77},
		RuleKey(w.Rules[0]): {Seconds: 2, Runs: 1},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("costs %v, want %v", c, want)
	}
}
