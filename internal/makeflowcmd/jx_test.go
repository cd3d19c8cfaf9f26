package makeflowcmd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestJXSameResultsAsCCTools runs JX workflows with ours and with
// CCTools' makeflow --jx and compares every file they make: the examples
// of CCTools' JX manual and tests (simulate.py replaced by a shell
// script), with variables from --jx-args and --jx-define.
func TestJXSameResultsAsCCTools(t *testing.T) {
	needCCTools(t)
	tests := []struct {
		name  string
		files map[string]string
		args  []string // after --jx for CCTools; ours reads *.jx as JX
	}{
		{"define-hello", map[string]string{"w.jx": `{
    "define":{
                "message" : "hello world!"
             },
    "rules": [
                {
                    "command": "/bin/echo " +message+ " > output-from-define.txt",
                    "outputs": [ "output-from-define.txt" ],
                    "inputs":  [ ],
                }
             ]
}`}, []string{"w.jx"}},
		{"gather", map[string]string{"simulate.sh": "echo \"simulated $1\"; echo $(( $1 * $1 ))\n", "w.jx": `{
    "define" : {
        "RANGE"    : range(1,4),
        "FILELIST" : [ "output." + N + ".txt" for N in RANGE ],
    },

    "rules" : [
                {
                    "command" : "sh ./simulate.sh " + N + " > output."+N+".txt",
                    "inputs"  : [ "simulate.sh" ],
                    "outputs" : [ "output." + N + ".txt" ]
                } for N in RANGE,
                {
                    "command" : "/bin/cat " + join(FILELIST," ") + " > output.all.txt",
                    "inputs"  : FILELIST,
                    "outputs" : [ "output.all.txt" ]
                }
              ]
}`}, []string{"w.jx"}},
		{"categories and environment", map[string]string{"w.jx": `# comments, categories, environment, functions
{
  "define": {"names": ["alpha", "beta", "gamma"]},
  "environment": {"PREFIX": "run"},
  "categories": {"big": {"resources": {"cores": 1, "memory": 10}, "environment": {"SIZE": "big"}}},
  "rules": [
    {"command": format("echo $PREFIX %s %d $SIZE > %s.out", n, len(names), basename("/x/" + n + ".in", ".in")),
     "outputs": [n + ".out"], "category": "big"} for n in names if n != "beta",
    {"command": "ls " + join([n + ".out" for n in names if n != "beta"]) + " > list; echo " + escape("a $b") + " >> list",
     "inputs": [n + ".out" for n in names if n != "beta"], "outputs": ["list"], "local_job": true},
    {"command": "echo " + template("{x}-{y}", {"x": 1, "y": 2.5}) + " " + format("%s", dirname("a/b/c")) + " > t", "outputs": ["t"]}
  ]
}`}, []string{"w.jx"}},
		{"jx-args and jx-define", map[string]string{
			"w.args.jx": `{"N": 3, "word": "x" + "y"}`,
			"w.jx":      `{"rules": [{"command": "echo " + word + i + " " + M + " > o." + i, "outputs": ["o." + i]} for i in range(N)]}`,
		}, []string{"--jx-args", "w.args.jx", "--jx-define", "M=N*10", "w.jx"}},
		// In command-line order, each seeing those before it: the file's N
		// wins over the --jx-define before it, and its M is computed from
		// that N.
		{"jx-define then jx-args", map[string]string{
			"w.args.jx": `{"N": 2, "M": N + 1}`,
			"w.jx":      `{"rules": [{"command": "echo " + N + " " + M + " > o", "outputs": ["o"]}]}`,
		}, []string{"--jx-define", "N=5", "--jx-args", "w.args.jx", "w.jx"}},
		// CCTools' TR_makeflow_050_sub_workflow_jx_for.
		{"sub-workflows", map[string]string{
			"w.jx": `{
	"rules": [
		{
			"workflow" : "w.nested2.jx",
 			"args" : { "nested_var": n },
			"outputs" : [ "output." + n ]
        } for n in range(10)
	]
}`,
			"w.nested2.jx": `{
	"rules": [
 		{
            "command":format("echo %d > output.%d", nested_var, nested_var),
   			"outputs" : [ "output."+nested_var ]
   		}
	]
}`,
		}, []string{"w.jx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours, theirs := t.TempDir(), t.TempDir()
			writeFiles(t, ours, tt.files)
			writeFiles(t, theirs, tt.files)
			if r := mf(t, ours, tt.args...); r.code != 0 {
				t.Fatalf("ours: %v", r)
			}
			if r := runProgram(t, theirs, cctoolsMakeflow, append([]string{"--jx"}, tt.args...)...); r.code != 0 {
				t.Fatalf("CCTools: %v", r)
			}
			got, want := madeFiles(t, ours), madeFiles(t, theirs)
			delete(got, "simulate.sh")
			delete(want, "simulate.sh")
			if len(want) == 0 || !slices.Equal(keys(got), keys(want)) {
				t.Fatalf("ours made %q, CCTools made %q", keys(got), keys(want))
			}
			for f, content := range want {
				if got[f] != content {
					t.Errorf("%s: ours %q, CCTools %q", f, got[f], content)
				}
			}
			// Cleaning removes what the sub-workflows made too.
			if r := mf(t, ours, append([]string{"--clean"}, tt.args...)...); r.code != 0 {
				t.Fatalf("clean: %v", r)
			}
			if left := madeFiles(t, ours); len(left) > 0 && !(len(left) == 1 && left["simulate.sh"] != "") {
				t.Errorf("left after --clean: %q", keys(left))
			}
		})
	}
}

// TestJXVarsInOrder: --jx-args files and --jx-defines bind their
// variables in the order given, a later one winning and each evaluated
// with those before it, as in CCTools.
func TestJXVarsInOrder(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"one.jx": `{"N": 1}`,
		"two.jx": `{"N": N + 1, "M": "two"}`,
		"w.jx":   `{"rules": [{"command": "echo " + N + " " + M + " > o", "outputs": ["o"]}]}`,
	})
	tests := []struct {
		args []string
		want string // the rule's command
	}{
		{[]string{"--jx-args", "one.jx", "--jx-define", "N=7", "--jx-define", `M="d"`}, "echo 7 d > o"},
		{[]string{"--jx-define", "N=7", "--jx-define", `M="d"`, "--jx-args", "one.jx"}, "echo 1 d > o"},
		{[]string{"--jx-define", "N=7", "--jx-args", "two.jx"}, "echo 8 two > o"},
		{[]string{"--jx-args", "one.jx", "--jx-args", "two.jx", "--jx-define", "N=7"}, "echo 7 two > o"},
		{[]string{"--jx-define", "N=7", "--jx-args", "two.jx", "--jx-define", "M=N*2"}, "echo 8 16 > o"},
		{[]string{"--jx-args", "one.jx", "--jx-args", "two.jx"}, "echo 2 two > o"},
		{[]string{"--jx-define", "N=3", "--jx-context", "two.jx"}, "echo 4 two > o"},
	}
	for _, tt := range tests {
		r := mf(t, dir, append(append([]string{"-T", "dryrun"}, tt.args...), "w.jx")...)
		if r.code != 0 || !strings.Contains(r.out, tt.want+"\n") {
			t.Errorf("makeflow %q: %v\nwant the command %q", tt.args, r, tt.want)
		}
	}
}

// TestJXErrors: errors in a JX workflow, its --jx-args or --jx-define are
// reported at their file:line:column, and nothing runs.
func TestJXErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"bad.jx":     "{\n  \"define\": {\"N\": 3},\n  \"rules\": [\n    {\"command\": \"touch out.\" + i, \"outputs\": [\"out.\" + i]} for i in range(N),\n    {\"command\": \"cat out.0 > x\", \"outputs\": [\"x\"], \"inputs\": [missing]}\n  ]\n}\n",
		"syntax.jx":  "{\"rules\": [\n  {\"command\": \"touch a\" \"outputs\": [\"a\"]}\n]}\n",
		"rules.jx":   "{\"rules\": [\n  {\"command\": \"touch a\", \"outputs\": [\"a\"]},\n  {\"comand\": \"touch b\"},\n  {\"command\": \"cat a > c\", \"inputs\": [\"a\", \"nothere\"], \"outputs\": [\"c\"]}\n]}\n",
		"args.jx":    "{\"N\": 1 +}\n",
		"w.jx":       `{"rules": [{"command": "touch o." + N, "outputs": ["o." + N]}]}`,
		"cycle.json": `{"rules": [{"command": "touch a", "inputs": ["b"], "outputs": ["a"]}, {"command": "touch b", "inputs": ["a"], "outputs": ["b"]}]}`,
	})
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--check", "bad.jx"}, 1, "bad.jx:5:63: undefined symbol missing\n1 error in bad.jx; nothing was run\n"},
		{[]string{"bad.jx"}, 1, "bad.jx:5:63: undefined symbol missing\n1 error in bad.jx; nothing was run\n"},
		{[]string{"--check", "syntax.jx"}, 1, "syntax.jx:2:25: expected \",\" or \"}\" in the object, found \"outputs\"\n1 error in syntax.jx; nothing was run\n"},
		{[]string{"--check", "rules.jx"}, 1, "rules.jx:3:4: rule 1: unknown key \"comand\" (did you mean \"command\"?)\n1 error in rules.jx; nothing was run\n"},
		{[]string{"--check", "--jx", "cycle.json"}, 1, "dependency cycle"},
		{[]string{"--check", "--jx-args", "args.jx", "w.jx"}, 1, "makeflow: --jx-args: args.jx:1:10: unexpected \"}\": expected a value\n"},
		{[]string{"--check", "--jx-define", "N=1/0", "w.jx"}, 2, "makeflow: --jx-define N=1/0: 1:2: division by zero\n"},
		{[]string{"--check", "--jx-define", "N", "w.jx"}, 2, "makeflow: --jx-define \"N\": expected VAR=EXPR"},
		{[]string{"--check", "w.jx"}, 1, "w.jx:1:37: undefined symbol N\n"},
		{[]string{"--json", "--jx", "w.jx"}, 2, "--json and JX"},
	}
	for _, tt := range tests {
		r := mf(t, dir, tt.args...)
		if r.code != tt.code || !strings.Contains(r.err, tt.err) {
			t.Errorf("makeflow %q: got %v\nwant exit %d and stderr with %q", tt.args, r, tt.code, tt.err)
		}
	}
	for _, f := range []string{"out.0", "a", "o.1", "x"} {
		if exists(filepath.Join(dir, f)) {
			t.Errorf("%s was made", f)
		}
	}
	r := mf(t, dir, "--check", "--jx-define", "N=7", "w.jx")
	if r.code != 0 || r.out != "w.jx: 1 rules, no problems found\n" {
		t.Errorf("--jx-define N=7: %v", r)
	}
}

// TestArgv: options read from --argv files, as CCTools'
// TR_makeflow_json_argv and TR_makeflow_json_argv_nested give them.
func TestArgv(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"simple.json": `{"rules": [{"command": "echo A > A", "outputs": ["A"]}, {"command": "cat A > B", "inputs": ["A"], "outputs": ["B"]}]}`,
		"w.mf.json":   `{"rules": [{"command": "echo C > C", "outputs": ["C"]}]}`,
		"argv.json":   `{"json": null}`,
		// argv0 names argv1, which names argv2 (the workflow) and argv3.
		"argv0.json": `{"argv": "argv1.json", "json": null, "argv": "argv4.json", "retry-count": 6}`,
		"argv1.json": `{"argv": "argv2.json", "debug": "makeflow"}`,
		"argv2.json": `{"MAKEFLOW": "simple.json", "argv": "argv3.json"}`,
		"argv3.json": `{}`,
		"argv4.json": `{"shared-fs": "/afs", "makeflow-log": "other.log"}`,
		"bad1.json":  `{"no-such-option": 1}`,
		"bad2.json":  `{"makeflow-log": null}`,
		"bad3.json":  `{"argv": "bad3.json"}`,
		"bad4.json":  `[1]`,
	})
	if r := mf(t, dir, "simple.json", "--argv", "argv.json"); r.code != 0 || readFile(t, filepath.Join(dir, "B")) != "A\n" {
		t.Fatalf("--argv argv.json: %v", r)
	}
	if r := mf(t, dir, "simple.json", "--argv", "argv.json", "-c"); r.code != 0 || exists(filepath.Join(dir, "B")) {
		t.Fatalf("--argv argv.json -c: %v", r)
	}
	if r := mf(t, dir, "--argv=argv0.json"); r.code != 0 || !exists(filepath.Join(dir, "B")) || !exists(filepath.Join(dir, "other.log")) {
		t.Fatalf("--argv argv0.json: %v", r)
	}
	if r := mf(t, dir, "--argv", "argv0.json", "-c"); r.code != 0 || exists(filepath.Join(dir, "B")) {
		t.Fatalf("--argv argv0.json -c: %v", r)
	}
	for _, tt := range []struct{ file, want string }{
		{"bad1.json", `makeflow: --argv bad1.json: bad1.json:1:2: unknown option "no-such-option"`},
		{"bad2.json", "makeflow: --argv bad2.json: bad2.json:1:2: --makeflow-log needs a value, not null"},
		{"bad3.json", "more than 32 --argv files within each other"},
		{"bad4.json", "makeflow: --argv bad4.json: bad4.json:1:1: expected an object, not array"},
		{"none.json", "makeflow: --argv none.json: no such file or directory\n"},
	} {
		if r := mf(t, dir, "--argv", tt.file); r.code != 2 || !strings.Contains(r.err, tt.want) {
			t.Errorf("--argv %s: %v\nwant %q", tt.file, r, tt.want)
		}
	}
}

// TestCCToolsJXTests runs CCTools' TR_makeflow_040_sub_workflow_jx with
// our makeflow, without --sandbox, which this makeflow does not have.
// (TR_makeflow_050_sub_workflow_jx_for is the "sub-workflows" case of
// TestJXSameResultsAsCCTools.)
func TestCCToolsJXTests(t *testing.T) {
	dir := t.TempDir()
	// TR_makeflow_040_sub_workflow_jx.
	writeFiles(t, dir, map[string]string{
		"nested.jx": `{
	"rules": [
		{
			"workflow" : "nested2.jx",
 			"args" : { "a":5, "b":"hello", "n":10 },
			"outputs" : [ "output.10" ]
   		}
	]
}`,
		"nested2.jx": `{
	"rules": [
 		{
 			"command":"echo " + a + " " + b + " > output."+n,
   			"outputs" : [ "output."+n ]
   		}
	]
}`,
	})
	if r := mf(t, dir, "--jx", "nested.jx"); r.code != 0 || readFile(t, filepath.Join(dir, "output.10")) != "5 hello\n" {
		t.Fatalf("040: %v", r)
	}
	if r := mf(t, dir, "--jx", "nested.jx", "--clean"); r.code != 0 || exists(filepath.Join(dir, "output.10")) {
		t.Fatalf("040 clean: %v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "nested2.jx")); err != nil {
		t.Fatalf("clean removed the sub-workflow: %v", err)
	}
}
