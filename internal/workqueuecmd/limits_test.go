package workqueuecmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/cmdutil"
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
	bin := workqueueBinary(t)
	m := masterWith(t, "echo ran")
	var logs testutil.SyncBuffer
	w := exec.Command("/bin/sh", "-c", `ulimit -s unlimited && ulimit -v 1024000 && exec "$@"`, "sh",
		bin, "worker", "--single-shot", "-t", "30", "--cores", "1", "--memory", "1000",
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

// masterWith starts a master on 127.0.0.1 with a task for each command,
// closed when the test ends.
func masterWith(t *testing.T, commands ...string) *workqueue.Master {
	t.Helper()
	m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	for _, c := range commands {
		if _, err := m.Submit(&workqueue.Task{Command: c}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

var built struct {
	once sync.Once
	dir  string
	err  error
}

// workqueueBinary builds the workqueue command once for the package's
// tests, as the Makefile builds it, and returns its path.
func workqueueBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "rightsize-workqueue-")
		if built.err == nil {
			built.err = testutil.BuildCommands(built.dir, "workqueue")
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, "workqueue")
}

// TestWorkerTakesCCToolsFlags: work_queue_factory --worker-binary and
// CCTools users' scripts run the worker with CCTools' flags: -N, -d
// SUBSYSTEM, -o FILE, --parent-death and --wall-time.
func TestWorkerTakesCCToolsFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workqueue command")
	}
	bin := workqueueBinary(t)
	m := masterWith(t, "echo ran", "sleep 60")
	logFile := filepath.Join(t.TempDir(), "worker.log")
	w := exec.Command(bin, "worker", "-d", "all", "-o", logFile, "--parent-death", "--wall-time", "3", "--cores", "2",
		"-s", t.TempDir(), "127.0.0.1", strconv.Itoa(m.Port()))
	var out testutil.SyncBuffer
	w.Stdout, w.Stderr = &out, &out
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r, err := m.Wait(ctx); err != nil || !r.OK() || string(r.Output) != "ran\n" {
		t.Fatalf("result %+v, %v\n%s", r, err, out.String())
	}
	// The sleeping task outlasts the wall time: the worker leaves, status 0.
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("worker: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		w.Process.Kill()
		t.Fatal("the worker outlived its --wall-time")
	}
	if b, _ := os.ReadFile(logFile); !strings.Contains(string(b), "level=DEBUG") || !strings.Contains(string(b), "wall time reached") {
		t.Errorf("-d all -o %s: the log holds\n%s", logFile, b)
	}
	// -N is -M.
	if code, _, stderr := run(context.Background(), "worker", "-N", "proj", "127.0.0.1", "1"); code != cmdutil.ExitUsage || !strings.Contains(stderr, "either -M PROJECT or a master address") {
		t.Errorf("worker -N proj HOST PORT: exit %d, %s", code, stderr)
	}
}
