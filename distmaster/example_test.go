package distmaster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rightsize/rightsize/allpairs"
	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/funcs"
)

// A distributed All-Pairs run on local processes: the blocks are jobs of
// the local batch driver, each running the allpairs program in
// sub-problem mode; the result lines are assembled from the checkpoint.
func ExampleRunAllPairs() {
	dir, _ := os.MkdirTemp("", "example-")
	defer os.RemoveAll(dir)
	os.Mkdir(filepath.Join(dir, "A"), 0o755)
	for i, s := range []string{"GATTACA", "GATTTCA", "CATTACA"} {
		os.WriteFile(filepath.Join(dir, "A", fmt.Sprint("s", i)), []byte(s), 0o644)
	}
	set, _ := allpairs.ReadSet(filepath.Join(dir, "A"))
	fn, _ := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	defer fn.Close()

	// The checkpoint records what its cells are computed from; a re-run
	// resumes from it.
	ck, err := allpairs.OpenCheckpoint(filepath.Join(dir, "result.matrix"), allpairs.CheckpointOf{A: set, B: set, Symmetric: true, Func: fn.Info()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ck.Close()

	d := batch.NewLocal(batch.Options{})
	defer d.Close(context.Background())
	var out strings.Builder
	res, err := RunAllPairs(context.Background(), Config{
		Driver:  d,
		Program: filepath.Join(binDir, "allpairs"), // by default, this program
		WorkDir: filepath.Join(dir, "jobs"),
	}, &AllPairs{
		A: set, B: set, Symmetric: true,
		Func:       FunctionOf(fn.Info(), "", 0),
		Checkpoint: ck,
		JobW:       2, JobH: 2, // or zero: measured and modelled
		Out: &out,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d cells in %d jobs\n", res.Computed, res.Jobs)
	fmt.Print(strings.Join(sortedLines(out.String()), "\n"), "\n")
	// Output:
	// 6 cells in 3 jobs
	// s0	s0	0
	// s0	s1	1
	// s0	s2	1
	// s1	s1	0
	// s1	s2	2
	// s2	s2	0
}
