package jx

import (
	"bytes"
	"context"
	"go/ast"
	goparser "go/parser"
	gotoken "go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
)

// evalString parses and evaluates src as a document with the bindings.
func evalString(t *testing.T, src string, scope *Scope, opts *Options) (string, error) {
	t.Helper()
	x, err := Parse("t.jx", []byte(src))
	if err != nil {
		return "", err
	}
	v, err := EvalDocument(context.Background(), x, scope, opts)
	if err != nil {
		return "", err
	}
	return Format(v), nil
}

func TestEval(t *testing.T) {
	scope := (*Scope)(nil).Bind("n", int64(10)).Bind("name", "sample").Bind("files", &List{Items: []Value{"a.txt", "b.txt"}})
	tests := []struct{ src, want string }{
		// Values.
		{`null`, `null`},
		{`[true, false, 0, 123, 09631, -7, 3.141592654, 1.0, 1e3, 1.0e-7, 1e21, .5]`, `[true,false,0,123,9631,-7,3.141592654,1,1000,1e-07,1e+21,0.5]`},
		{`"hello\nworld\t\"q\" \/ \a \u0041"`, `"hello\nworld\t\"q\" / a A"`},
		{`"é ü 日本"`, `"é ü 日本"`},
		{`"\u00e9\ud83d\ude00"`, `"é😀"`},
		{`{"name": "Fred", "age": 47, "temp": 98.6}`, `{"name":"Fred","age":47,"temp":98.59999999999999}`},
		{`[1, 2,]`, `[1,2]`},
		{`{"a": 1,}`, `{"a":1}`},
		{`{"a": 1, "a": 2}`, `{"a":1,"a":2}`},
		{"10 + 20 # a comment\n", `30`},
		{`1;`, `1`},
		// Symbols.
		{`{"location": name, "count": len(files)}`, `{"location":"sample","count":2}`},
		{`{name: n}`, `{"sample":10}`},
		// Arithmetic: C's integer division and remainder; floats beside floats.
		{`[7/2, -7/2, 7%3, -7%3, 7%-3, 2*3%4, 1+2.5, 2.0*3, 5/2.0, 3.0/2, 2.5%1, 1/3.0, 0.1+0.2]`, `[3,-3,1,-1,1,2,3.5,6,2.5,1.5,0,0.3333333333333333,0.3]`},
		{`[10-2-3, 100/10/5, (1+2)*3, -(1+2), +(1), - 3, 2*-3]`, `[5,2,9,-3,1,-3,-6]`},
		{`9223372036854775807 + 1`, `-9223372036854775808`},
		{`1.5e300 * 1e300`, `inf`},
		// Strings.
		{`["a" + "b", "a" + 1, 1 + "a", "abc" + 1.5, "a" + 2.0, "a" + true, "a" + 1e21, +"a"]`, `["ab","a1","1a","abc1.5","a2","atrue","a1e+21","a"]`},
		{`"file." + n + ".txt"`, `"file.10.txt"`},
		// Lists.
		{`[1] + [2, 3]`, `[1,2,3]`},
		{`[[1,2][-1], [1,2][0], {"a": {"b": 3}}["a"]["b"]]`, `[2,1,3]`},
		{`[range(10)[:3], range(10)[4:], range(10)[3:7], range(3)[-5:2], range(5)[3:1], range(5)[1:-1], range(5)[-2:], range(5)[2:99]]`,
			`[[0,1,2],[4,5,6,7,8,9],[3,4,5,6],[0,1],[],[1,2,3],[3,4],[2,3,4]]`},
		// Comparisons and logic.
		{`[1 == 1.0, 1 != 1, "x" == 1, "x" != 1, null == null, [1,2] == [1,2], [1] == [1.0], {"a":1,"b":2} == {"b":2,"a":1}]`, `[true,false,false,true,true,true,false,true]`},
		{`["a" < "b", "ab" < "b", 2 <= 2, 2.5 > 2, 3 >= 4]`, `[true,true,true,true,false]`},
		{`[not true, !true, not not true, true and false, true && true, false or true, false || false]`, `[false,false,true,false,true,true,false]`},
		{`[true or false and false, not 1 == 2, false and undefined, true or undefined]`, `[true,true,false,true]`},
		// Comprehensions.
		{`[x + x for x in ["a", "b", "c"]]`, `["aa","bb","cc"]`},
		{`[3 * i for i in range(4)]`, `[0,3,6,9]`},
		{`[i for i in range(10) if i%2 == 0]`, `[0,2,4,6,8]`},
		{`[[i, j] for i in range(5) for j in range(4) if (i + j)%2 == 0]`, `[[0,0],[0,2],[1,1],[1,3],[2,0],[2,2],[3,1],[3,3],[4,0],[4,2]]`},
		{`[0, x for x in range(1, 3), 9]`, `[0,1,2,9]`},
		{`[{"n": x} for x in files]`, `[{"n":"a.txt"},{"n":"b.txt"}]`},
		// Functions.
		{`[range(3), range(3, 7), range(7, 3), range(-1, 10, 2), range(5, 0, -1), range(5, 0, -2), range(0)]`, `[[0,1,2],[3,4,5,6],[],[-1,1,3,5,7,9],[5,4,3,2,1],[5,3,1],[]]`},
		{`[format("file%d.txt", 10), format("SM%s_%d.sam", "10001", 23), format("%%"), format("%i|%e|%E|%f|%F|%g|%G", 1, 1.5, 1.5, 1.5, 1.5, 1.5e-7, 1e20)]`,
			`["file10.txt","SM10001_23.sam","%","1|1.500000e+00|1.500000E+00|1.500000|1.500000|1.5e-07|1E+20"]`},
		{`[format("%g", 100000.0), format("%g", 1000000.0), format("%g", 0.0001), format("%g", 2.0)]`, `["100000","1e+06","0.0001","2"]`},
		{`[join(["a","b"]), join(["a","b"], ","), join([])]`, `["a b","a,b",""]`},
		{`[ceil(1.2), ceil(1), floor(1.7), floor(-1.5), ceil(1.5)]`, `[2,1,1,-2,2]`},
		{`[basename("/a/b"), basename("a/b.txt", ".txt"), basename("/"), basename(""), basename("a//"), basename("b", "b")]`, `["b","b","/",".","a",""]`},
		{`[dirname("/a/b"), dirname("a"), dirname("/a/b/"), dirname("//a"), dirname("a/"), dirname(""), dirname("/")]`, `["/a",".","/a","//",".",".","/"]`},
		{`[escape("a b"), escape("it's"), escape("a\"b$c` + "`" + `d\\e"), escape("")]`, `["\"a b\"","\"it's\"","\"a\\\"b\\$c\\` + "`" + `d\\\\e\"","\"\""]`},
		{`[template("file{n}.txt"), template("SM{PLATE}_{ID}.sam", {"PLATE": "10001", "ID": n/2 - 1}), template("{ name }{{x}}")]`, `["file10.txt","SM10001_4.sam","sample{x}"]`},
		{`[len([1,2,3]), len([])]`, `[3,0]`},
		{`[keys({"a":1,"b":2,"c":3}), values({"a":1,"b":2}), items({"a":1,"b":2})]`, `[["c","b","a"],[2,1],[["b",2],["a",1]]]`},
		{`select(x == 1, [{"x": 1}, {"x": 2}])`, `[{"x":1}]`},
		{`project(x, [{"x": 0, "y": "test"}, {"x": 1, "y": "example"}])`, `[0,1]`},
		{`project(n, [{"x": 1}])`, `[10]`},
		{`schema([{"a": 1, "b": "x"}, {"a": "y", "c": null}])`, `{"c":"null","b":"string","a":"integer"}`},
		{`[like("test", ".es.*"), like("test", "^es"), like("ab", "ab")]`, `[true,false,true]`},
		// Defines.
		{`{"define": {"N": 3, "M": N * 2}, "x": M}`, `{"define":{"N":3,"M":6},"x":6}`},
		{`{"define": {"i": 0, "sq": i * i}, "x": [sq for i in range(4)]}`, `{"define":{"i":0,"sq":0},"x":[0,1,4,9]}`},
		{`{"define": {"n": 1}, "x": n}`, `{"define":{"n":1},"x":10}`}, // the scope wins over "define"
	}
	for _, tt := range tests {
		got, err := evalString(t, tt.src, scope, nil)
		if err != nil || got != tt.want {
			t.Errorf("%s\n got %s, %v\nwant %s", tt.src, got, err, tt.want)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		// Parse errors.
		{"", "t.jx:1:1: no expression"},
		{"{\n  \"a\": 1\n  \"b\": 2\n}", `t.jx:3:3: expected "," or "}" in the object, found "b"`},
		{"[1, 2", `t.jx:1:6: unexpected end of input: the list begun at 1:1 is not closed with "]"`},
		{"{\"a\" 1}", `t.jx:1:6: expected ":" after the key`},
		{"\"abc", `t.jx:1:1: string not closed`},
		{"1 = 2", "t.jx:1:3: a single = : write == to compare"},
		{"a & b", "t.jx:1:3: a single &: write &&"},
		{"1 2", `t.jx:1:3: unexpected "2" after the expression`},
		{"1..2", `t.jx:1:1: invalid number "1..2"`},
		{"[x for 1 in y]", `t.jx:1:8: expected a variable name after "for"`},
		{"[x for x of y]", `t.jx:1:10: expected "in" after "for x"`},
		{"(1 + 2", `t.jx:1:7: expected ")" to close the ( at 1:1`},
		{"[1][0](2)", "t.jx:1:7: only a function's name can be called"},
		{"1 + not true", `t.jx:1:5: "not" here needs parentheses`},
		{"\"\\u12\"", `t.jx:1:2: \u must be followed by four hexadecimal digits`},
		{"@", `t.jx:1:1: unexpected character '@'`},
		// Evaluation errors.
		{"{\n  \"a\": [1, x]\n}", "t.jx:2:12: undefined symbol x"},
		{"1/0", "t.jx:1:2: division by zero"},
		{"1.5 % 0.5", "t.jx:1:5: division by zero"},
		{`"a" * 2`, "t.jx:1:5: mismatched types for *: string and integer"},
		{`"a" + null`, "t.jx:1:5: mismatched types for +: string and null"},
		{`1 < "a"`, "t.jx:1:3: mismatched types for <: integer and string"},
		{`true + 1`, "t.jx:1:6: mismatched types for +: boolean and integer"},
		{`null + null`, "t.jx:1:6: unsupported operator + on null"},
		{`{"a":1} + {"b":2}`, "t.jx:1:9: unsupported operator + on object"},
		{`-"a"`, "t.jx:1:1: unsupported operator - on string"},
		{`not 1`, "t.jx:1:1: unsupported operator not on integer"},
		{`1 and true`, "t.jx:1:3: and needs true or false on its left, not integer"},
		{`[1,2][5]`, "t.jx:1:6: index 5 out of range: the list has 2 items"},
		{`[1,2][1.0]`, "t.jx:1:6: a list's index must be an integer, not float"},
		{`{"a":1}["b"]`, `t.jx:1:8: key not found: "b"`},
		{`"abc"[1]`, "t.jx:1:6: string cannot be indexed"},
		{`"abc"[1:]`, "t.jx:1:6: only lists can be sliced"},
		{`[x for x in 5]`, `t.jx:1:13: "for x in" needs a list, not integer`},
		{`[x for x in range(3) if x]`, `t.jx:1:25: the condition after "if" must be true or false, not integer 0`},
		{`{1: 2}`, "t.jx:1:2: an object's key must be a string, not integer 1"},
		{`error("boom")`, "t.jx:1:1: boom"},
		{`[1, error({"a": 1})]`, `t.jx:1:5: {"a":1}`},
		{`nosuch(1)`, "t.jx:1:1: unknown function nosuch"},
		{`[NAM for NAME in [1]]`, "t.jx:1:2: undefined symbol NAM (did you mean NAME?)"},
		{`formt("%d", 1)`, "t.jx:1:1: unknown function formt (did you mean format?)"},
		{`lenght([1])`, "t.jx:1:1: unknown function lenght"}, // too far from len to guess
		{`range(1.5)`, "t.jx:1:1: range: takes integers, not float"},
		{`range(1, 10, 0)`, "t.jx:1:1: range: the step must not be zero"},
		{`range(1, 2, 3, 4)`, "t.jx:1:1: range: takes 1 to 3 arguments, not 4"},
		{`range(100000000)`, "t.jx:1:1: range: more than 4194304 items"},
		{`format("%5d", 1)`, "t.jx:1:1: format: unknown conversion %5"},
		{`format("%d")`, `t.jx:1:1: format: too few arguments for the format "%d"`},
		{`format("%d", 1.5)`, "t.jx:1:1: format: %d does not take float 1.5"},
		{`format("%f", 1)`, "t.jx:1:1: format: %f does not take integer 1"},
		{`format("abc%")`, "t.jx:1:1: format: the format ends with a lone %"},
		{`format("%d", 1, 2)`, `t.jx:1:1: format: 1 argument more than the format "%d" uses`},
		{`join([1,2])`, "t.jx:1:1: join: the list must hold strings only, not integer 1"},
		{`join(["a"], 1)`, "t.jx:1:1: join: the separator must be a string, not integer"},
		{`ceil("a")`, "t.jx:1:1: ceil: takes a number, not string"},
		{`len("abc")`, "t.jx:1:1: len: takes a list, not string"},
		{`keys([1])`, "t.jx:1:1: keys: takes an object, not array"},
		{`escape(1)`, "t.jx:1:1: escape: the argument must be a string, not integer"},
		{`template("{x}")`, "t.jx:1:1: template: undefined symbol x"},
		{`template("}")`, "t.jx:1:1: template: a } without its {"},
		{`template("{x", {"x": 1})`, "t.jx:1:1: template: a { without its }"},
		{`template("{x y}", {"x": 1})`, "t.jx:1:1: template: {x y}: between braces goes one name"},
		{`template("{x}", {"x": [1]})`, "t.jx:1:1: template: {x} is array"},
		{`select(x, [{"x": 1}])`, "t.jx:1:1: select: the condition must be true or false, not integer 1"},
		{`project(x + 1, [1])`, "t.jx:1:1: project: the second argument must be a list of objects, not of integer"},
		{`like("a", "(")`, "t.jx:1:1: like: error parsing regexp"},
		{`listdir("/nonexistent")`, "t.jx:1:1: listdir: open /nonexistent: no such file or directory"},
		{`fetch("/nonexistent")`, "t.jx:1:1: fetch: open /nonexistent: no such file or directory"},
		{`{"define": {"a": b, "b": a}, "x": a}`, "t.jx:1:18: b is defined in terms of itself"},
		{`{"define": [1]}`, `t.jx:1:12: "define" must be an object`},
	}
	for _, tt := range tests {
		_, err := evalString(t, tt.src, nil, nil)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s\n got error %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

func TestListdirAndFetch(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.txt", "a.txt", "c.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"x": 0, "y": "test", "z": 1.0, "w": 2 + 3}`), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	opts := &Options{Dir: dir}
	tests := []struct{ src, want string }{
		{`listdir(".")`, `["a.txt","b.txt","c.json"]`},
		{`[f for f in listdir(".") if like(f, "[.]txt$")]`, `["a.txt","b.txt"]`},
		{`fetch("c.json")`, `{"x":0,"y":"test","z":1,"w":5}`},
	}
	for _, tt := range tests {
		got, err := evalString(t, tt.src, nil, opts)
		if err != nil || got != tt.want {
			t.Errorf("%s: got %s, %v; want %s", tt.src, got, err, tt.want)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/doc.json" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"n": [1, 2]}`))
	}))
	defer srv.Close()
	if got, err := evalString(t, `fetch("`+srv.URL+`/doc.json")["n"]`, nil, nil); err != nil || got != `[1,2]` {
		t.Errorf("fetch over HTTP: %s, %v", got, err)
	}
	if _, err := evalString(t, `fetch("`+srv.URL+`/none")`, nil, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("fetch of a missing URL: %v", err)
	}
}

// jx2json is CCTools 9.9's evaluator, the reference.
const jx2json = "/usr/bin/jx2json"

// TestSameAsCCTools evaluates expressions with ours and CCTools' jx2json
// and compares what they print. Expressions where this package follows
// the manual rather than CCTools 9.9 (see the package doc) are not here.
func TestSameAsCCTools(t *testing.T) {
	testutil.NeedCommand(t, jx2json, "apt-get install coop-computing-tools")
	dir := t.TempDir()
	args := filepath.Join(dir, "args.jx")
	if err := os.WriteFile(args, []byte(`{"n": 10, "name": "sample", "files": ["a.txt", "b.txt"]}`), 0o666); err != nil {
		t.Fatal(err)
	}
	exprs := []string{
		`null`, `true`, `[0, 123, 09631, -7, 3.141592654, 1.0, 1e3, 1.0e-7, 1e21, .5, 98.6, 123456789.123, 100000000000000000000.0]`,
		`"hello\nworld\t\"q\" \/ \a \u0041"`, `"it's"`,
		`{"name": "Fred", "age": 47, "temp": 98.6}`, `[1, 2,]`, `{"a": 1,}`, `{"a": 1, "a": 2}`,
		"10 + 20 # a comment\n", `1;`,
		`{"location": name, "count": len(files), "m": m}`, `{name: n}`,
		`[7/2, -7/2, 7%3, -7%3, 7%-3, 1+2.5, 2.0*3, 5/2.0, 3.0/2, 2.5%1, 1/3.0, 0.1+0.2]`,
		`[(1+2)*3, -(1+2), +(1), - 3, 2*-3, 2+3*4, 10-(2+3*4)]`,
		`9223372036854775807 + 1`,
		`["a" + "b", "a" + 1, 1 + "a", "abc" + 1.5, "a" + 2.0, "a" + true, "a" + 1e21, +"a"]`,
		`"file." + n + ".txt"`, `"file." + name`,
		`[1] + [2, 3]`, `[[1,2][-1], [1,2][0], {"a": {"b": 3}}["a"]["b"]]`,
		`[range(10)[:3], range(10)[4:], range(10)[3:7], range(3)[-5:2], range(5)[3:1], range(5)[1:-1], range(5)[-2:], range(5)[2:99], range(5)[:]]`,
		`[1 == 1.0, 1 != 1, "x" == 1, "x" != 1, null == null, [1,2] == [1,2], [1] == [1.0], true == false]`,
		`["a" < "b", "ab" < "b", 2 <= 2, 2.5 > 2, 3 >= 4, 1 < 1.5]`,
		`[not true, !true, not not true, true and false, true && true, false or true, false || false]`,
		`[x + x for x in ["a", "b", "c"]]`, `[3 * i for i in range(4)]`, `[i for i in range(10) if i%2 == 0]`,
		`[[i, j] for i in range(5) for j in range(4) if (i + j)%2 == 0]`, `[0, x for x in range(1, 3), 9]`,
		`[{"n": x, "f": "out." + x} for x in files]`,
		`[range(3), range(3, 7), range(7, 3), range(-1, 10, 2), range(5, 0, -1), range(5, 0, -2), range(0), range(-3)]`,
		`[format("file%d.txt", 10), format("SM%s_%d.sam", "10001", 23), format("%%"), format("%i|%e|%E|%f|%F|%g|%G", 1, 1.5, 1.5, 1.5, 1.5, 1.5e-7, 1e20)]`,
		`[format("%g", 100000.0), format("%g", 1000000.0), format("%g", 0.0001), format("%g", 2.0), format("%e", 0.0), format("%f", -2.5)]`,
		`[join(["a","b"]), join(["a","b"], ","), join([])]`,
		`[ceil(1.2), ceil(1), floor(1.7), floor(-1.5), ceil(1.5)]`,
		`[basename("/a/b"), basename("a/b.txt", ".txt"), basename("/"), basename(""), basename("a//"), basename("b", "b")]`,
		`[dirname("/a/b"), dirname("a"), dirname("/a/b/"), dirname("//a"), dirname("a/"), dirname(""), dirname("/"), dirname("///a//b//")]`,
		`[escape("a b"), escape("a\"b$c` + "`" + `d\\e"), escape("")]`,
		`[template("file{n}.txt"), template("SM{PLATE}_{ID}.sam", {"PLATE": "10001", "ID": n/2 - 1}), template("{ name }{{x}}"), template("{x}", {"x": 1.5})]`,
		`[len([1,2,3]), len([])]`,
		`[keys({"a":1,"b":2,"c":3}), values({"a":1,"b":2}), items({"a":1,"b":2})]`,
		`select(x == 1, [{"x": 1}, {"x": 2}])`, `project(x, [{"x": 0, "y": "test"}, {"x": 1, "y": "example"}])`,
		`project(n, [{"x": 1}])`, `select(n > 5, [{"n": 1}, {"n": 7}])`,
		`schema([{"a": 1, "b": "x"}, {"a": "y", "c": null}])`,
		`{"define": {"N": 3, "M": N * 2}, "x": M}`,
		`{"define": {"i": 0, "sq": i * i}, "x": [sq for i in range(4)]}`,
		`{"define": {"n": 1}, "x": n}`,
		`{"define": {"outs": ["out." + x for x in files]}, "rules": [{"command": "touch " + join(outs), "outputs": outs}]}`,
	}
	for _, src := range exprs {
		cmd := exec.Command(jx2json, "-a", args, "-d", "m=n*2")
		cmd.Stdin = strings.NewReader(src)
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%s: jx2json: %v", src, err)
			continue
		}
		// jx2json escapes ' as \', which JSON does not have.
		want := strings.ReplaceAll(strings.TrimSpace(string(out)), `\'`, `'`)
		scope, err := ArgsFile(context.Background(), nil, args, nil)
		if err != nil {
			t.Fatal(err)
		}
		if scope, err = DefineArg(context.Background(), scope, "m=n*2", nil); err != nil {
			t.Fatal(err)
		}
		got, err := evalString(t, src, scope, nil)
		if err != nil {
			t.Errorf("%s: %v; jx2json: %s", src, err, want)
			continue
		}
		if got != want {
			t.Errorf("%s\n    ours %s\njx2json %s", src, got, want)
		}
	}
	// Where this package follows the manual (see the package doc).
	for _, d := range []struct{ src, ours, theirs string }{
		{`[10-2-3, 100/10/5, 2*3%4, 10-2+3*4]`, `[5,2,2,20]`, `[11,50,6,-4]`},
		{`true or false and false`, `true`, `false`},
		{`not 1 == 2`, `true`, `error(...)`},
		{`like("test", ".es.*")`, `true`, `false`},
		{`{"a":1} == {"a":1}`, `true`, `error(...)`},
	} {
		cmd := exec.Command(jx2json)
		cmd.Stdin = strings.NewReader(d.src)
		out, _ := cmd.Output()
		theirs := strings.TrimSpace(string(out))
		if strings.HasSuffix(d.theirs, "error(...)") {
			if !strings.Contains(theirs, "error(") {
				t.Errorf("%s: jx2json %s, expected an error", d.src, theirs)
			}
		} else if theirs != d.theirs {
			t.Errorf("%s: jx2json %s, expected %s", d.src, theirs, d.theirs)
		}
		if got, err := evalString(t, d.src, nil, nil); err != nil || got != d.ours {
			t.Errorf("%s: ours %s, %v; expected %s", d.src, got, err, d.ours)
		}
	}
	// Errors are errors in both.
	for _, src := range []string{`1/0`, `x`, `"a" * 2`, `[1][3]`, `{"a":1}["b"]`, `range(1.5)`, `format("%d", 1.5)`, `len("a")`, `error("e")`, `[x for x in 5]`} {
		cmd := exec.Command(jx2json)
		cmd.Stdin = strings.NewReader(src)
		out, err := cmd.Output()
		if err != nil || !bytes.HasPrefix(out, []byte("error(")) {
			t.Errorf("%s: jx2json gave %s (%v), not an error", src, out, err)
		}
		if got, err := evalString(t, src, nil, nil); err == nil {
			t.Errorf("%s: ours gave %s, not an error", src, got)
		}
	}
}

func TestArgs(t *testing.T) {
	dir := t.TempDir()
	args := filepath.Join(dir, "args.jx")
	if err := os.WriteFile(args, []byte(`{"n": base + 1, "s": "x"}`), 0o666); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	scope := (*Scope)(nil).Bind("base", int64(1))
	scope, err := ArgsFile(ctx, scope, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if scope, err = DefineArg(ctx, scope, `m=n * 10`, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := evalString(t, `[base, n, s, m]`, scope, nil); err != nil || got != `[1,2,"x",20]` {
		t.Errorf("got %s, %v", got, err)
	}
	for _, def := range []string{"m", "1x=2", "m=1 +", "m=q"} {
		if _, err := DefineArg(ctx, scope, def, nil); err == nil {
			t.Errorf("DefineArg(%q) accepted", def)
		}
	}
	if _, err := DefineArg(ctx, nil, "m=1/0", nil); err == nil || err.Error() != "m=1/0: 1:2: division by zero" {
		t.Errorf("DefineArg error = %v", err)
	}
	if err := os.WriteFile(args, []byte("[1]"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := ArgsFile(ctx, nil, args, nil); err == nil || !strings.HasSuffix(err.Error(), "args.jx:1:1: expected an object, not array") {
		t.Errorf("ArgsFile of a list: %v", err)
	}
}

// TestFunctionNames: the names an unknown function is compared with are
// the functions there are, every case of builtin's switch (read from its
// source, so that a function added there and not to the list fails here)
// and select and project.
func TestFunctionNames(t *testing.T) {
	for _, name := range functionNames() {
		if builtin(name) == nil && name != "select" && name != "project" {
			t.Errorf("%s is not a function", name)
		}
	}
	file, err := goparser.ParseFile(gotoken.NewFileSet(), "funcs.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := 0
	ast.Inspect(file, func(n ast.Node) bool {
		if fn, ok := n.(*ast.FuncDecl); ok && fn.Name.Name != "builtin" {
			return false
		}
		cc, ok := n.(*ast.CaseClause)
		if !ok {
			return true
		}
		for _, e := range cc.List {
			lit, ok := e.(*ast.BasicLit)
			if !ok || lit.Kind != gotoken.STRING {
				continue
			}
			name, _ := strconv.Unquote(lit.Value)
			cases++
			if !slices.Contains(functionNames(), name) {
				t.Errorf("builtin has %s, functionNames does not", name)
			}
		}
		return true
	})
	if cases == 0 {
		t.Error("no case of builtin's switch found in funcs.go")
	}
}
