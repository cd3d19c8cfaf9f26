package foreman_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/foreman"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// A master's task runs on a worker behind a foreman.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	// The foreman: a worker of m whose tasks run on the workers of its
	// own master.
	fm, err := foreman.New(workqueue.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer fm.Close()
	work, _ := os.MkdirTemp("", "foreman-example-")
	defer os.RemoveAll(work)
	var workers sync.WaitGroup
	defer workers.Wait() // after cancel, before the workspace goes
	defer cancel()
	workers.Go(func() {
		worker.Run(ctx, worker.Config{Masters: []string{"127.0.0.1:" + strconv.Itoa(m.Port())}, Foreman: fm, Workdir: work})
	})
	// A worker behind it.
	workers.Go(func() {
		worker.Run(ctx, worker.Config{Masters: []string{"127.0.0.1:" + strconv.Itoa(fm.Port())}, Cores: 1, Workdir: work})
	})

	m.Submit(&workqueue.Task{Command: "echo hello from behind the foreman"})
	r, err := m.Wait(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(r.Output))
	// Output: hello from behind the foreman
}
