package jobs_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/rightsize/rightsize/distmaster/jobs"
)

// The Tracker decides what to submit, what to retry and what to abort;
// its driver does it and reports back, with the time.
func ExampleTracker() {
	tr := jobs.New(jobs.Config{Retries: 1})
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
