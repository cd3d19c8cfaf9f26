package localworkers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
)

var binDir string

func TestMain(m *testing.M) {
	os.Exit(testutil.RunWithCommands(m, func(dir string) { binDir = dir }, "workqueue"))
}

// TestRun: the workers are connected when do is called, run a task whose
// output lands in the run's directory, and are gone, with that directory,
// once Run returns.
func TestRun(t *testing.T) {
	parent := t.TempDir()
	var workers []*exec.Cmd
	var runDir string
	err := Run(filepath.Join(binDir, "workqueue"), parent, workqueue.Config{}, 2, func(m *workqueue.Master, ws []*exec.Cmd, dir string) error {
		workers, runDir = ws, dir
		if got := m.Stats().WorkersConnected; got != 2 {
			t.Errorf("%d workers connected when do is called, want 2", got)
		}
		task := &workqueue.Task{Command: "echo hi > out", Tag: "t"}
		task.AddOutput(filepath.Join(dir, "out"), "out", false)
		if _, err := m.Submit(task); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := m.Wait(ctx)
		if err != nil {
			return err
		}
		if !r.OK() {
			t.Errorf("task: %v (exit %d): %v", r.Status, r.ExitCode, r.Err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(b) != "hi\n" {
			t.Errorf("output %q (%v), want \"hi\\n\"", b, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(workers) != 2 {
		t.Fatalf("%d workers, want 2", len(workers))
	}
	for i, c := range workers {
		if c.ProcessState == nil {
			t.Errorf("worker %d not waited for", i)
		}
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Errorf("the run's directory %s is left (%v)", runDir, err)
	}
}

func TestCounts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"10,50, 100", []int{10, 50, 100}},
		{"3", []int{3}},
		{"", nil},
		{"1,0", nil},
		{"1,x", nil},
	} {
		got, err := Counts(tc.in)
		if !slices.Equal(got, tc.want) || (err == nil) != (tc.want != nil) {
			t.Errorf("Counts(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
