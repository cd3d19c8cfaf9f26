package sim_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rightsize/rightsize/model/sim"
)

// A run of 100 one-minute tasks on ten four-core workers, two of which
// are half as fast: the scheduler's choices decide the makespan.
func ExampleRun() {
	sc, err := sim.Parse([]byte(`{
		"workers": [{"count": 8, "cores": 4}, {"count": 2, "cores": 4, "speed": 0.5}],
		"tasks": [{"count": 100, "runtime": 60, "input_mb": 10, "output_mb": 1}]
	}`))
	if err != nil {
		log.Fatal(err)
	}
	r, err := sim.Run(context.Background(), sc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d tasks in %.0f s, %.0f MB moved\n", r.Finished, r.Makespan, r.MBToWorkers+r.MBFromWorkers)
	// Output:
	// 100 tasks in 183 s, 1100 MB moved
}
