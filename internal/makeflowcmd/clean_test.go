package makeflowcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCleanWhileRunning cleans, and runs, a workflow that a real makeflow
// is running: both refuse, name the running makeflow, and change nothing.
func TestCleanWhileRunning(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\techo a > a\nb: a\n\ttouch started; cat gate > b\n"})
	gate := filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(gate, 0o666); err != nil {
		t.Fatal(err)
	}
	run := start(t, dir, nil, "w.mf")
	run.until(t, "rule b running", func() bool { return exists(filepath.Join(dir, "started")) })

	want := fmt.Sprintf("another makeflow is running this workflow: w.mf.makeflowlog is locked by process %d (%s w.mf)", run.cmd.Process.Pid, binary)
	for _, args := range [][]string{{"-c", "w.mf"}, {"--clean=intermediates", "w.mf"}, {"w.mf"}} {
		r := mf(t, dir, args...)
		if r.code != 1 || !strings.Contains(r.err, want) {
			t.Errorf("makeflow %v while another runs: %v\nwant %q", args, r, want)
		}
		if args[0] != "w.mf" && !strings.Contains(r.err, "nothing was removed") {
			t.Errorf("makeflow %v does not say that nothing was removed: %v", args, r)
		}
	}
	if !exists(filepath.Join(dir, "a")) || !exists(filepath.Join(dir, "w.mf.makeflowlog")) {
		t.Fatal("files were removed while makeflow ran")
	}

	g, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if r := run.wait(t); r.code != 0 {
		t.Fatalf("the running makeflow: %v", r)
	}
	if r := mf(t, dir, "-c", "w.mf"); r.code != 0 || exists(filepath.Join(dir, "a")) || exists(filepath.Join(dir, "b")) {
		t.Errorf("clean after the run: %v", r)
	}
}
