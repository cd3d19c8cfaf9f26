package workqueuecmd

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
)

// TestWorkerUnderAddressSpaceLimit runs the worker as Grid Engine runs it
// with h_vmem=1000M: address space limited to 1000 MB, stack unlimited. A
// worker built with cgo reserved more than that (its threads' malloc
// arenas) and could not start its process keeper; the workqueue command is
// built without cgo (Makefile, testutil.BuildCommands) and must run a task
// within it.
func TestWorkerUnderAddressSpaceLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workqueue command")
	}
	bin := t.TempDir()
	if err := testutil.BuildCommands(bin, "workqueue"); err != nil {
		t.Fatal(err)
	}
	m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Submit(&workqueue.Task{Command: "echo ran"}); err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	w := exec.Command("/bin/sh", "-c", `ulimit -s unlimited && ulimit -v 1024000 && exec "$@"`, "sh",
		filepath.Join(bin, "workqueue"), "worker", "--single-shot", "-t", "30", "--cores", "1", "--memory", "1000",
		"-s", t.TempDir(), "127.0.0.1", strconv.Itoa(m.Port()))
	w.Stdout, w.Stderr = &logs, &logs
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		w.Process.Kill()
		w.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := m.Wait(ctx)
	if err != nil || !r.OK() || string(r.Output) != "ran\n" {
		t.Fatalf("result %+v, %v; worker's log:\n%s", r, err, logs.String())
	}
}
