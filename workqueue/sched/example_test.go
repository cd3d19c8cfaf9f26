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
	fmt.Printf("%+v\n", s.TaskDone(1, 1, true, now.Add(time.Second)))
	// Output:
	// {Task:1 Worker:1 Alloc:{Cores:1 MemoryMB:2000 DiskMB:4000 GPUs:0} Copy:false}
	// {Task:2 Worker:1 Alloc:{Cores:1 MemoryMB:2000 DiskMB:4000 GPUs:0} Copy:false}
	// [{Task:3 Worker:1 Alloc:{Cores:1 MemoryMB:2000 DiskMB:4000 GPUs:0} Copy:false}]
}
