package sched_test

import (
	"fmt"
	"time"

	"github.com/rightsize/rightsize/workqueue/sched"
)

func Example() {
	s := sched.New(sched.Config{})
	now := time.Now()
	s.WorkerJoined(1, "10.0.0.1", sched.Resources{Cores: 2, MemoryMB: 4000, DiskMB: 8000}, now)
	for id := sched.TaskID(1); id <= 3; id++ {
		for _, a := range s.Submit(sched.Task{ID: id}, now) {
			fmt.Printf("%+v\n", a)
		}
	}
	// Task 1 reports: its outputs are to be fetched, and task 3 takes its core.
	fmt.Printf("%+v\n", s.TaskDone(1, 1, true, now.Add(time.Second)))
	// Its outputs are in: the task is complete.
	fmt.Printf("%+v\n", s.Fetched(1, 1, now.Add(2*time.Second)))
	// Output:
	// {Task:1 Worker:1 Alloc:{Cores:1 MemoryMB:2000 DiskMB:4000 GPUs:0} Copy:false}
	// {Task:2 Worker:1 Alloc:{Cores:1 MemoryMB:2000 DiskMB:4000 GPUs:0} Copy:false}
	// [{Task:1 Worker:1} {Task:3 Worker:1 Alloc:{Cores:1 MemoryMB:2000 DiskMB:4000 GPUs:0} Copy:false}]
	// [{Task:1 Worker:1 FastAborts:0}]
}
