package distmaster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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

// The Tracker decides what to submit, what to retry and what to abort;
// its driver does it and reports back, with the time.
func ExampleTracker() {
	tr := NewTracker(TrackerConfig{Retries: 1})
	tr.Add(0, 1)
	now := time.Unix(0, 0)
	for {
		b, attempt, ok := tr.Next()
		if !ok {
			break
		}
		id := fmt.Sprintf("job-%d-%d", b, attempt) // what the batch system calls it
		tr.Submitted(b, id, now)
	}
	o := tr.Ended("job-1-0", now, errors.New("exit status 1"))
	fmt.Printf("block %d: retry %v\n", o.Block, o.Retry)
	o = tr.Ended("job-0-0", now, nil)
	fmt.Printf("block %d: done %v\n", o.Block, o.Done)
	b, attempt, _ := tr.Next()
	fmt.Printf("next: block %d, attempt %d\n", b, attempt+1)
	// Output:
	// block 1: retry true
	// block 0: done true
	// next: block 1, attempt 2
}
