package batch_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rightsize/rightsize/batch"
)

// A caller's event loop: submit jobs, then follow their events until each
// has ended. The same loop runs with batch.New("slurm", ...) or any other
// driver.
func Example() {
	ctx := context.Background()
	d, err := batch.New("local", batch.Options{Slots: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close(ctx)

	names := map[string]string{}
	for _, cmd := range []string{"echo hello", "exit 3"} {
		id, err := d.Submit(ctx, &batch.Job{Name: "example", Command: cmd})
		if err != nil {
			log.Fatal(err)
		}
		names[id] = cmd
	}
	results := map[string]string{}
	for ev := range d.Events() {
		if !ev.State.Final() {
			continue
		}
		results[names[ev.ID]] = fmt.Sprintf("%v, exit %d, stdout %q", ev.State, ev.ExitCode, ev.Stdout)
		if len(results) == len(names) {
			break
		}
	}
	fmt.Println("echo hello:", results["echo hello"])
	fmt.Println("exit 3:", results["exit 3"])
	// Output:
	// echo hello: done, exit 0, stdout "hello\n"
	// exit 3: done, exit 3, stdout ""
}

// Removing a job: its final event is Failed with ErrRemoved.
func ExampleDriver_remove() {
	ctx := context.Background()
	d := batch.NewLocal(batch.Options{})
	defer d.Close(ctx)

	id, err := d.Submit(ctx, &batch.Job{Command: "sleep 600"})
	if err != nil {
		log.Fatal(err)
	}
	for ev := range d.Events() {
		if ev.State == batch.Running {
			if err := d.Remove(ctx, id); err != nil {
				log.Fatal(err)
			}
		}
		if ev.State.Final() {
			fmt.Println(ev.State, ev.Err)
			break
		}
	}
	// Output: failed job removed
}
