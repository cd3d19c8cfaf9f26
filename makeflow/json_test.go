package makeflow

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseJSON(t *testing.T) {
	src := `{
  "environment": {"A": "a", "B": "b"},
  "categories": {"big": {"resources": {"cores": 4, "memory": 2048}, "environment": {"C": "c"}}},
  "rules": [
    {"command": "echo $A > A", "outputs": ["A"]},
    {"command": "echo $B > B", "outputs": [{"dag_name": "B", "task_name": "b.remote"}],
     "inputs": ["./A"], "environment": {"B": "x"}, "category": "big", "resources": {"cores": 2, "wall-time": 60},
     "local_job": true, "allocation": "max"},
    {"makeflow": {"path": "sub.json", "cwd": "subdir"}, "outputs": ["S"]},
    {"command": "[ -e A ]", "inputs": ["A"]}
  ]
}`
	w, err := ParseJSON("w.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Rules) != 4 {
		t.Fatalf("%d rules", len(w.Rules))
	}
	r0, r1, r2, r3 := w.Rules[0], w.Rules[1], w.Rules[2], w.Rules[3]
	if r0.Command != "echo $A > A" || !slices.Equal(viewFiles(r0.Targets), []string{"A"}) || r0.Pos.String() != "w.json:5:5" {
		t.Errorf("rule 0 = %+v", r0)
	}
	if !slices.Equal(r0.Env, []string{"A=a", "B=b", "CORES=1", "OMP_NUM_THREADS=1"}) {
		t.Errorf("rule 0 env = %q", r0.Env)
	}
	if !slices.Equal(viewFiles(r1.Targets), []string{"B->b.remote"}) || !slices.Equal(viewFiles(r1.Sources), []string{"A"}) ||
		!r1.Local || r1.Category != "big" || r1.Resources != (Resources{Cores: 2, MemoryMB: 2048, WallTimeS: 60}) {
		t.Errorf("rule 1 = %+v", r1)
	}
	if !slices.Equal(r1.Env, []string{"A=a", "B=x", "C=c", "CATEGORY=big", "CORES=2", "OMP_NUM_THREADS=2"}) {
		t.Errorf("rule 1 env = %q", r1.Env)
	}
	if r2.Nested == nil || *r2.Nested != (Nested{File: "sub.json", Dir: "subdir", JSON: true}) ||
		!slices.Equal(viewFiles(r2.Sources), []string{"sub.json"}) {
		t.Errorf("rule 2 = %+v", r2)
	}
	if len(r3.Targets) != 0 || &r3.Env[0] != &r0.Env[0] {
		t.Errorf("rule 3 = %+v (equal environments should be shared)", r3)
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"syntax", "{\n  \"rules\": [\n    {\"command\": \"x\",}\n  ]\n}", "e.json:3:21: invalid character '}'"},
		{"not an object", "[1]", "e.json:1:1: json: cannot unmarshal array"},
		{"no rules", "{}", `e.json:1:1: a JSON workflow needs a "rules" list`},
		{"unknown key", "{\"rules\": [\n  {\"comand\": \"x\"}]}", `e.json:2:3: rule 0: json: unknown field "comand"`},
		{"no command", "{\"rules\": [{\"command\": \"true\"},\n {\"outputs\": [\"a\"]}]}", `e.json:2:2: a rule needs a "command"`},
		{"both", `{"rules": [{"command": "x", "makeflow": {"path": "s"}}]}`, "e.json:1:12: a rule has one of"},
		{"bad allocation", `{"rules": [{"command": "x", "allocation": "most"}]}`, `e.json:1:12: unknown allocation "most"`},
		{"negative", `{"rules": [{"command": "x", "resources": {"cores": -1}}]}`, "e.json:1:12: resources must not be negative"},
		{"bad file", `{"rules": [{"command": "x", "outputs": [{"name": "a"}]}]}`, "e.json:1:12: a file is a name or"},
		{"bad remote", `{"rules": [{"command": "x", "outputs": [{"dag_name": "a", "task_name": "/a"}]}]}`, `e.json:1:12: remote name "/a"`},
		{"wrong type", `{"rules": [{"command": 3}]}`, "e.json:1:12: rule 0: json: cannot unmarshal number"},
		{"JX", `{"define": {"N": 3}, "rules": []}`, `e.json:1:1: JX "define" and "variables" are not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseJSON("e.json", []byte(tt.src))
			var list ErrorList
			if !errors.As(err, &list) || !strings.HasPrefix(list[0].Error(), tt.want) {
				t.Errorf("error = %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestRunJSON(t *testing.T) {
	// CCTools' json/env.json: the rule's environment wins.
	tr := newTestRun(t, "")
	tr.write("w.json", `{
  "environment": {"A": "a", "B": "b"},
  "rules": [
    {"command": "echo $A > A", "outputs": ["A"]},
    {"command": "echo $B > B", "outputs": ["B"], "environment": {"B": "x"}},
    {"inputs": ["A", "B"], "command": "[ \"$A\" = $(cat A) ] && [ x = $(cat B) ]"}
  ]
}`)
	w, err := ParseJSONFile(tr.dir + "/w.json")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLocal(LocalOptions{Environ: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep, err := Run(context.Background(), w, Options{Dir: tr.dir, Executor: l})
	if err != nil || rep.Ran != 3 {
		t.Fatalf("Run: %v (%+v)", err, rep)
	}
}
