package wire_test

import (
	"fmt"

	"github.com/rightsize/rightsize/workqueue/wire"
)

func ExampleParse() {
	m, err := wire.Parse([]byte("result 0 3 8 2316 1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := m.(wire.Result)
	fmt.Printf("task %d exited %d with %d bytes of output\n", r.TaskID, r.Exit, r.Size)
	fmt.Printf("%q\n", wire.Put{Name: "a file", Size: 3, Mode: 0o644}.AppendTo(nil))
	// Output:
	// task 1 exited 3 with 8 bytes of output
	// "put a%20file 3 0644\n"
}
