package makeflow

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/jx"
)

func TestParseJX(t *testing.T) {
	src := `# CCTools' manual: a gather workflow
{
  "define": {
    "N": 3,
    "outs": ["out." + i + ".txt" for i in range(N)]
  },
  "environment": {"GREETING": greeting},
  "categories": {"sim": {"resources": {"cores": 2}}},
  "rules": [
    {"command": format("echo %d > out.%d.txt", i, i), "outputs": ["out." + i + ".txt"], "category": "sim"}
      for i in range(N),
    {"command": "cat " + join(outs) + " > all.txt", "inputs": outs, "outputs": ["all.txt"], "local_job": true},
    {"workflow": "sub.jx", "args": {"n": N, "name": "x" + N}, "outputs": ["sub.out"]}
  ]
}`
	vars := (*jx.Scope)(nil).Bind("greeting", "hello").Bind("N", int64(2))
	w, err := ParseJX(context.Background(), "w.jx", []byte(src), JXOptions{Vars: vars})
	if err != nil {
		t.Fatal(err)
	}
	// N=2 from the variables wins over "define".
	if len(w.Rules) != 4 {
		t.Fatalf("%d rules, want 4", len(w.Rules))
	}
	r0, r2, r3 := w.Rules[0], w.Rules[2], w.Rules[3]
	if r0.Command != "echo 0 > out.0.txt" || r0.Pos.String() != "w.jx:10:5" || r0.Resources.Cores != 2 ||
		!slices.Contains(r0.Env, "GREETING=hello") || !slices.Equal(viewFiles(r0.Targets), []string{"out.0.txt"}) {
		t.Errorf("rule 0 = %+v", r0)
	}
	if r2.Command != "cat out.0.txt out.1.txt > all.txt" || !r2.Local || !slices.Equal(viewFiles(r2.Sources), []string{"out.0.txt", "out.1.txt"}) {
		t.Errorf("rule 2 = %+v", r2)
	}
	if r3.Nested == nil || *r3.Nested != (Nested{File: "sub.jx", JX: true, Args: `{"n":2,"name":"x2"}`}) ||
		!slices.Equal(viewFiles(r3.Sources), []string{"sub.jx"}) || r3.Pos.String() != "w.jx:13:5" {
		t.Errorf("rule 3 = %+v", r3)
	}
	d := &driver{dir: "."}
	if got, want := d.command(r3), `makeflow -T local --jx --jx-define n=2 --jx-define 'name="x2"' -l sub.jx.3.makeflowlog sub.jx`; got != want {
		t.Errorf("nested command\n got %s\nwant %s", got, want)
	}
}

func TestParseJXErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"syntax", "{\n  \"rules\": [\n    {\"command\": \"x\" \"outputs\": []}\n  ]\n}", `e.jx:3:21: expected "," or "}" in the object, found "outputs"`},
		{"undefined", "{\"rules\": [\n  {\"command\": \"echo \" + x}]}", "e.jx:2:25: undefined symbol x"},
		{"not an object", "[1]", "e.jx:1:1: a workflow is an object with \"rules\", not array"},
		{"no rules", "{}", `e.jx:1:1: a workflow needs a "rules" list`},
		{"rules not a list", `{"rules": 1}`, `e.jx:1:2: "rules" must be a list, not integer`},
		{"unknown key", "{\"rules\": [],\n \"variables\": {}}", `e.jx:2:2: unknown key "variables"`},
		{"bad environment", `{"rules": [], "environment": [1]}`, `e.jx:1:15: "environment" must be an object, not a list`},
		{"unknown rule key", "{\"rules\": [\n  {\"comand\": \"x\"} for i in range(2)]}", `e.jx:2:4: rule 0: unknown key "comand" (did you mean "command"?)`},
		{"no command", "{\"rules\": [{\"command\": \"true\"},\n {\"outputs\": [\"a\"]}]}", `e.jx:2:2: rule 1: a rule needs a "command"`},
		{"args without workflow", `{"rules": [{"command": "x", "args": {}}]}`, `e.jx:1:29: rule 0: "args" go with`},
		{"args not an object", `{"rules": [{"workflow": "s.jx", "args": [1]}]}`, `e.jx:1:33: rule 0: "args" must be an object`},
		{"workflow and command", `{"rules": [{"workflow": "s.jx", "command": "x"}]}`, `e.jx:1:12: rule 0: a rule has one of`},
		{"infinite", `{"rules": [{"command": "x", "resources": {"cores": 1e400}}]}`, `e.jx:1:12: rule 0: inf cannot be written in JSON`},
		{"wrong type", "{\"rules\": [\n  {\"command\": \"x\"},\n  {\"command\": 1 + 2} for i in range(2)]}", `e.jx:3:4: rule 1: "command" must be a string, not a number`},
		{"bad file", `{"rules": [{"command": "x", "outputs": [{"dag_name": "a", "task_nam": "b"}]}]}`, `e.jx:1:59: rule 0: "outputs[0]": unknown key "task_nam" (did you mean "task_name"?)`},
		{"division", "{\n\"rules\": [{\"command\": \"x\" + 1/0}]}", `e.jx:2:30: division by zero`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseJX(context.Background(), "e.jx", []byte(tt.src), JXOptions{})
			var list ErrorList
			if !errors.As(err, &list) || !strings.HasPrefix(list[0].Error(), tt.want) {
				t.Errorf("error = %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestNestedJX(t *testing.T) {
	// CCTools' TR_makeflow_050_sub_workflow_jx_for: one sub-workflow run
	// with ten different args; each instance is checked with its args.
	tr := newTestRun(t, "")
	tr.write("nested.jx", `{"rules": [{"workflow": "nested2.jx", "args": {"nested_var": n}, "outputs": ["output." + n]} for n in range(10)]}`)
	tr.write("nested2.jx", `{"rules": [{"command": format("echo %d > output.%d", nested_var, nested_var), "outputs": ["output." + nested_var]}]}`)
	w, err := ParseJXFile(context.Background(), tr.dir+"/nested.jx", JXOptions{Dir: tr.dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckNested(w, tr.dir, nil, nil); err != nil {
		t.Fatal(err)
	}
	sub, _, err := w.Rules[9].Nested.Open(tr.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := sub.Rules[0].Command; got != "echo 9 > output.9" {
		t.Errorf("instance 9 runs %q", got)
	}
	// A sub-workflow whose args leave a variable undefined is reported
	// where the sub-workflow uses it.
	tr.write("bad.jx", `{"rules": [{"workflow": "nested2.jx", "args": {"other": 1}, "outputs": ["output.x"]}]}`)
	w, err = ParseJXFile(context.Background(), tr.dir+"/bad.jx", JXOptions{Dir: tr.dir})
	if err != nil {
		t.Fatal(err)
	}
	err = CheckNested(w, tr.dir, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "nested2.jx:1:54: undefined symbol nested_var") {
		t.Errorf("CheckNested = %v", err)
	}
}
