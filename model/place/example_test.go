package place_test

import (
	"fmt"
	"os"
	"time"

	"github.com/rightsize/rightsize/model/place"
)

// A million cells of 50 ms each: on a SLURM cluster with 100 free two-core
// nodes, each job taking a node's two cores, hybrid is predicted fastest.
func ExampleDecideAllPairs() {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cluster := &place.Cluster{
		Kind: "slurm", Named: "detected: sinfo answers",
		Hosts:        place.Value{V: 100, Source: "sinfo"},
		CoresPerHost: place.Value{V: 2, Source: "sinfo"},
		Dispatch:     place.Value{V: 2, Source: "probe job", Measured: now.Add(-20 * time.Minute)},
		Bandwidth:    place.Value{V: place.DefaultBandwidth},
	}
	d := place.DecideAllPairs(place.AllPairsWork{
		N: 1000, M: 1000, Cells: 1e6,
		CellTime:  place.Value{V: 0.05, Source: "sampled here: 20 calls"},
		ItemBytes: 1e5,
	}, place.Machine{Cores: place.Value{V: 2, Source: "this machine's CPUs"}}, cluster, nil, now)
	d.Explain(os.Stdout)
	fmt.Println(d.Line())
	// Output:
	// inputs:
	//   problem         1000 × 1000 items, 1000000 cells to compute (counted)
	//   cell time       0.05 s (sampled here: 20 calls)
	//   item size       100000 bytes (the sets' mean)
	//   this machine    2 cores (this machine's CPUs)
	//   cluster         slurm (detected: sinfo answers)
	//   hosts           100 (sinfo)
	//   cores per host  2 (sinfo)
	//   dispatch        2 s (probe job, 20 min old)
	//   job cost        0 s (assumed: nothing measured yet)
	//   bandwidth       125 MB/s (assumed: nothing measured yet)
	// predictions:
	//    multicore    6h56m40s: 2 cores
	//    distributed  7m48s: jobs of 10000 cells, 2 cores each, on 100 of 100 hosts
	//  * hybrid       6m40s: jobs of 1650 cells; 2 cores here from the start, 200 slots after 2 s to 3m20s
	// choice: hybrid, because predicted 62.5× faster than this machine alone
	// hybrid: predicted 6m40s (predicted 62.5× faster than this machine alone)
}
