package factory_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/workqueue/factory"
)

// The plan on its own, driven by hand with logical time, as Run and the
// worker pool drive it.
func ExamplePlan() {
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := factory.NewPlan(factory.Limits{Min: 1, Max: 4, Backoff: time.Minute}, now)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("nothing known:", p.Next(now).Submit)
	p.Submitted("101", 1)
	p.Started("101")

	// The master has 10 tasks: as many workers as allowed.
	p.Observe(factory.Demand{Masters: 1, Tasks: 10, Workers: 1}, now)
	fmt.Println("10 tasks:", p.Next(now).Submit)
	for _, id := range []string{"102", "103", "104"} {
		p.Submitted(id, 1)
	}

	// A worker killed is replaced at once; a rejected job pauses submissions.
	p.Ended(batch.Event{ID: "102", Status: batch.Status{State: batch.Done, ExitCode: 137}}, now)
	fmt.Println("after a kill:", p.Next(now).Submit)
	p.SubmitFailed(errors.New("sbatch: error: QOSMaxSubmitJobPerUserLimit"), now)
	fmt.Println("after a rejection:", p.Next(now).Retry)
	fmt.Println("a minute later:", p.Next(now.Add(time.Minute)).Submit)
	// Output:
	// nothing known: 1
	// 10 tasks: 3
	// after a kill: 1
	// after a rejection: 1m0s
	// a minute later: 1
}

// Keep between 2 and 50 workers on SLURM for the master at head.example.org,
// until interrupted.
func ExampleRun() {
	d, err := batch.New("slurm", batch.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close(context.Background())
	self, _ := os.Executable() // a program with rightsize's worker command
	err = factory.Run(context.Background(), factory.Config{
		Driver: d,
		Master: "head.example.org:9123",
		Worker: factory.Worker{Command: []string{self, "worker"}, Cores: 4, MemoryMB: 8000},
		Limits: factory.Limits{Min: 2, Max: 50},
	})
	log.Print(err)
}
