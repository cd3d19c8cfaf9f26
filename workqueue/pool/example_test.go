package pool_test

import (
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/rightsize/rightsize/workqueue/pool"
)

// Seed 000's worked example, decided by the plan on logical time.
func ExamplePlan() {
	pol, err := pool.ParsePolicy(strings.NewReader("max_workers: 2000\ndistribution: proj1=500, proj2.*=1500\ndecision: D3\n"), "pool.conf")
	if err != nil {
		log.Fatal(err)
	}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := pool.NewPlan(pol, pool.Limits{}, now)
	if err != nil {
		log.Fatal(err)
	}
	p.Observe([]pool.Master{
		{Project: "proj1", Addr: "h:1", Tasks: 2000, Connected: 200, Received: 100, Capacity: 1100},
		{Project: "proj2-A", Addr: "h:2", Tasks: 1000},
		{Project: "proj2-B", Addr: "h:3", Tasks: 300, Connected: 100, Capacity: 700},
	}, now)
	p.Next(now)
	for _, a := range p.Decision() {
		fmt.Printf("%s needs %d, gets %d\n", a.Project, a.Need, a.Workers)
	}
	fmt.Println(pool.FormatDecision(p.Decision()))
	// Output:
	// proj1 needs 1000, gets 800
	// proj2-A needs 1000, gets 1000
	// proj2-B needs 200, gets 200
	// proj1:800, proj2-A:1000, proj2-B:200
}
