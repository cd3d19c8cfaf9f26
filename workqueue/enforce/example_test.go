package enforce_test

import (
	"fmt"

	"github.com/rightsize/rightsize/workqueue/enforce"
)

// Seed 000 §4.5.2's example: the pool gives proj1 100 workers and proj2
// 300; 50 and 150 of its workers are connected to them. A worker picks
// proj1 with probability 50/(50+150).
func ExampleChoose() {
	slots := []enforce.Slot{{Addr: "proj1:9123", Remaining: 100 - 50}, {Addr: "proj2:9123", Remaining: 300 - 150}}
	for _, r := range []float64{0.1, 0.24, 0.25, 0.9} {
		fmt.Println(r, slots[enforce.Choose(slots, r)].Addr)
	}
	// Output:
	// 0.1 proj1:9123
	// 0.24 proj1:9123
	// 0.25 proj2:9123
	// 0.9 proj2:9123
}
