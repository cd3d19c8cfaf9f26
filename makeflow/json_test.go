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

// TestParseJSONErrors: each error is at the file:line:column of the value
// it concerns, names the rule by its index in "rules", and says what is
// wrong in a user's words, not encoding/json's.
func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string // every error, in order
	}{
		{"syntax", "{\n  \"rules\": [\n    {\"command\": \"x\",}\n  ]\n}", []string{"e.json:3:21: invalid character '}'"}},
		{"not an object", "[1]", []string{"e.json:1:1: a workflow must be an object, not a list"}},
		{"no rules", "{}", []string{`e.json:1:1: a JSON workflow needs a "rules" list`}},
		{"rules not a list", `{"rules": {}}`, []string{`e.json:1:2: "rules" must be a list`}},
		{"unknown top key", "{\"rules\": [],\n \"enviroment\": {}}", []string{`e.json:2:2: unknown key "enviroment" (did you mean "environment"?)`}},
		{"environment value", "{\"rules\": [],\n \"environment\": {\"A\": \"a\", \"B\": 2}}", []string{`e.json:2:28: "environment.B" must be a string, not a number`}},
		{"unknown key", "{\"rules\": [\n  {\"comand\": \"x\"}]}", []string{`e.json:2:4: rule 0: unknown key "comand" (did you mean "command"?)`}},
		{"unknown key far from any", `{"rules": [{"command": "x", "zzz": 1}]}`, []string{`e.json:1:29: rule 0: unknown key "zzz" (known: "command", "makeflow", "workflow", "args", "inputs", "outputs", "local_job", "category", "allocation", "environment", "resources")`}},
		{"no command", "{\"rules\": [{\"command\": \"true\"},\n {\"outputs\": [\"a\"]}]}", []string{`e.json:2:2: rule 1: a rule needs a "command"`}},
		{"empty command", `{"rules": [{"command": " "}]}`, []string{`e.json:1:13: rule 0: "command" is empty`}},
		{"both", `{"rules": [{"command": "x", "makeflow": {"path": "s"}}]}`, []string{"e.json:1:12: rule 0: a rule has one of"}},
		{"bad allocation", `{"rules": [{"command": "x", "allocation": "most"}]}`, []string{`e.json:1:29: rule 0: "allocation" must be first, max or error, not "most"`}},
		{"negative", `{"rules": [{"command": "x", "resources": {"cores": -1}}]}`, []string{`e.json:1:29: rule 0: "resources": resources must not be negative`}},
		{"file not a name", `{"rules": [{"command": "x", "outputs": ["a", 7]}]}`, []string{`e.json:1:46: rule 0: "outputs[1]" must be a file name or {"dag_name": ..., "task_name": ...}, not a number`}},
		{"bad file", `{"rules": [{"command": "x", "outputs": [{"name": "a"}]}]}`, []string{`e.json:1:42: rule 0: "outputs[0]": unknown key "name" (known: "dag_name", "task_name")`}},
		{"bad file name", `{"rules": [{"command": "x", "inputs": [{"dag_name": 1}]}]}`, []string{`e.json:1:41: rule 0: "inputs[0].dag_name" must be a string, not a number`}},
		{"bad remote", `{"rules": [{"command": "x", "outputs": [{"dag_name": "a", "task_name": "/a"}]}]}`, []string{`e.json:1:59: rule 0: "outputs[0]": remote name "/a"`}},
		{"wrong type", `{"rules": [{"command": 3}]}`, []string{`e.json:1:13: rule 0: "command" must be a string, not a number`}},
		{"not a whole number", `{"rules": [{"command": "x", "resources": {"cores": 1.5}}]}`, []string{`e.json:1:43: rule 0: "resources.cores" must be a whole number, not 1.5`}},
		{"list for a boolean", `{"rules": [{"command": "x", "local_job": []}]}`, []string{`e.json:1:29: rule 0: "local_job" must be true or false, not a list`}},
		{"rule not an object", "{\"rules\": [\n  \"echo\"]}", []string{`e.json:2:3: rule 0: a rule must be an object, not a string`}},
		// Each rule by its index in the file, whatever came before it.
		{"several", "{\"rules\": [\n {\"command\": 1},\n {\"command\": \"x\"},\n {\"command\": \"y\", \"outputs\": \"o\"}]}", []string{
			`e.json:2:3: rule 0: "command" must be a string, not a number`,
			`e.json:4:19: rule 2: "outputs" must be a list, not a string`,
		}},
		{"cut short", "{\"rules\": [\n  {\"command\": \"x\"}\n", []string{`e.json:2:19: the file ends inside the JSON value`}},
		{"empty", "\n", []string{`e.json:1:1: the file is empty`}},
		{"JX", `{"define": {"N": 3}, "rules": []}`, []string{`e.json:1:1: JX "define" and "variables" are not supported`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseJSON("e.json", []byte(tt.src))
			var list ErrorList
			if !errors.As(err, &list) || len(list) != len(tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
			for i, e := range list {
				if !strings.HasPrefix(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %v, want prefix %q", i, e, tt.want[i])
				}
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
