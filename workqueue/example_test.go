package workqueue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// A master on a free port, one worker, three tasks with a shared cached
// input, a per-task buffer and an output file each.
func Example() {
	m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	// Workers usually run elsewhere (`workqueue worker HOST PORT`); this
	// one runs in-process for the example.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	go worker.Run(ctx, worker.Config{Masters: []string{"127.0.0.1:" + strconv.Itoa(m.Port())}, Workdir: dir})

	words := filepath.Join(dir, "words")
	os.WriteFile(words, []byte("alpha\nbeta\ngamma\n"), 0o644)
	for i := 1; i <= 3; i++ {
		t := &workqueue.Task{Command: "head -n $N words > picked", Env: []string{"N=" + strconv.Itoa(i)}, Tag: strconv.Itoa(i)}
		t.AddInput(words, "", true) // sent to the worker once
		t.AddOutput(filepath.Join(dir, "picked."+strconv.Itoa(i)), "picked", false)
		m.Submit(t)
	}
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lines := map[string]int{}
	for !m.Empty() {
		r, err := m.Wait(wctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		b, _ := os.ReadFile(r.Task.Outputs[0].Local)
		lines[r.Tag] = len(b)
		if !r.OK() {
			fmt.Println("task", r.Tag, "failed:", r.Status, r.ExitCode)
		}
	}
	fmt.Println(lines["1"], lines["2"], lines["3"])
	// Output: 6 11 17
}
