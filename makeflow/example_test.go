package makeflow_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rightsize/rightsize/makeflow"
)

func ExampleParse() {
	src := `
SAMPLES=a b
export THREADS=2
$(SAMPLES): input.txt
	split -n l/2 input.txt && mv xaa a && mv xab b
merged: a b
	cat a b > merged
`
	w, err := makeflow.Parse("example.mf", []byte(src), []string{})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range w.Rules {
		fmt.Printf("rule %d at %s: %v <- %v\n  %s\n", r.ID, r.Pos, r.Targets[0].Name, len(r.Sources), r.Command)
	}
	fmt.Println(w.Rules[1].Env)
	// Output:
	// rule 0 at example.mf:4:1: a <- 1
	//   split -n l/2 input.txt && mv xaa a && mv xab b
	// rule 1 at example.mf:6:1: merged <- 2
	//   cat a b > merged
	// [OMP_NUM_THREADS=1 CORES=1 THREADS=2]
}

func ExampleWorkflow_Check() {
	src := "a: b\n\tcp b a\nb: a\n\tcp a b\nc: missing.txt\n\tcp missing.txt c\n"
	w, err := makeflow.Parse("cycle.mf", []byte(src), []string{})
	if err != nil {
		log.Fatal(err)
	}
	exists := func(name string) bool { return false }
	fmt.Println(w.Check(exists))
	// Output:
	// cycle.mf:1:1: dependency cycle: this rule makes a, which the rule at line 3 reads to make b, which this rule reads
	// cycle.mf:5:4: input missing.txt does not exist and no rule makes it
}

func ExampleRun() {
	dir, err := os.MkdirTemp("", "makeflow-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "Makeflow")
	src := "upper.txt: in.txt\n\ttr a-z A-Z < in.txt > upper.txt\ncount.txt: upper.txt\n\twc -c < upper.txt > count.txt\n"
	os.WriteFile(path, []byte(src), 0o666)
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("hello\n"), 0o666)

	w, err := makeflow.ParseFile(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	local, err := makeflow.NewLocal(makeflow.LocalOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer local.Close()
	rep, err := makeflow.Run(context.Background(), w, makeflow.Options{Dir: dir, Executor: local})
	if err != nil {
		log.Fatal(err)
	}
	upper, _ := os.ReadFile(filepath.Join(dir, "upper.txt"))
	fmt.Printf("ran %d rules; upper.txt = %q\n", rep.Ran, upper)

	// A second run finds everything done in the log.
	rep, err = makeflow.Run(context.Background(), w, makeflow.Options{Dir: dir, Executor: local})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ran %d rules, %d already done\n", rep.Ran, rep.Skipped)
	// Output:
	// ran 2 rules; upper.txt = "HELLO\n"
	// ran 0 rules, 2 already done
}

// The scheduler is a state machine: tell it which rule ended, and it says
// what to start.
func ExampleScheduler() {
	src := "a:\n\ttouch a\nb:\n\ttouch b\nab: a b\n\tcat a b > ab\n"
	w, err := makeflow.Parse("s.mf", []byte(src), []string{})
	if err != nil {
		log.Fatal(err)
	}
	s, err := makeflow.NewScheduler(w, makeflow.SchedulerConfig{Local: makeflow.Limits{Jobs: 1}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("start", s.Next())
	fmt.Println("a done, start", s.Ended(0, true))
	fmt.Println("b done, start", s.Ended(1, true))
	fmt.Println("ab done, start", s.Ended(2, true), "finished:", s.Finished())
	// Output:
	// start [{0 1 false}]
	// a done, start [{1 1 false}]
	// b done, start [{2 1 false}]
	// ab done, start [] finished: true
}
