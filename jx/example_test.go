package jx_test

import (
	"context"
	"fmt"

	"github.com/rightsize/rightsize/jx"
)

func ExampleEvalDocument() {
	src := `{
  "define": {"N": 3},
  "rules": [{"command": format("sim %d > out.%d", i, i), "outputs": ["out." + i]} for i in range(N)]
}`
	x, err := jx.Parse("wf.jx", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	// A variable given on the command line wins over "define".
	vars := (*jx.Scope)(nil).Bind("N", int64(2))
	v, err := jx.EvalDocument(context.Background(), x, vars, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	rules, _ := v.(*jx.Object).Lookup("rules")
	fmt.Println(jx.Format(rules))
	// Output:
	// [{"command":"sim 0 > out.0","outputs":["out.0"]},{"command":"sim 1 > out.1","outputs":["out.1"]}]
}

func ExampleParse_error() {
	_, err := jx.Parse("wf.jx", []byte("{\n  \"a\": [1, 2\n}"))
	fmt.Println(err)
	// Output:
	// wf.jx:3:1: expected "," or "]" in the list, found "}"
}

func ExampleEval() {
	x, _ := jx.Parse("expr", []byte(`[x * x for x in range(5) if x % 2 == 0]`))
	v, err := jx.Eval(context.Background(), x, nil, nil)
	fmt.Println(jx.Format(v), err)
	// Output:
	// [0,4,16] <nil>
}
