package workqueue

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// TestKilledWorkerLeavesNothing kills a worker process with SIGKILL while
// it runs a task that started a grandchild in the background: the task's
// processes die with the worker, and its workspace goes.
func TestKilledWorkerLeavesNothing(t *testing.T) {
	m := startMaster(t, Config{})
	mark := testutil.ProcessMark(t)
	workdir := t.TempDir()
	w := exec.Command(filepath.Join(binDir, "workqueue"), "worker", "--cores", "1",
		"--memory", "1000", "--disk", "1000", "-t", "60", "-s", workdir, "-q",
		"127.0.0.1", fmt.Sprint(m.Port()))
	w.Env = append(os.Environ(), mark)
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Process.Kill(); w.Wait() })
	started := filepath.Join(t.TempDir(), "started")
	if _, err := m.Submit(&Task{Command: "sleep 1000 & echo $$ > " + started + ".tmp && mv " + started + ".tmp " + started + "; exec sleep 1000"}); err != nil {
		t.Fatal(err)
	}
	var data []byte
	testutil.WaitFor(t, "the task to start", time.Minute, func() bool {
		var err error
		data, err = os.ReadFile(started)
		return err == nil
	})
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	testutil.WaitKept(t, pid)
	w.Process.Signal(syscall.SIGKILL)
	w.Wait()
	testutil.WaitUnmarked(t, mark, 30*time.Second)
	testutil.WaitFor(t, "the killed worker's workspace in "+workdir+" to go", 30*time.Second, func() bool {
		left, _ := os.ReadDir(workdir)
		return len(left) == 0
	})
}
