package workqueuecmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
)

func TestFactoryUsageErrors(t *testing.T) {
	cases := [][]string{
		{"factory", "h", "1"},                           // no -T
		{"factory", "-T", "wq", "h", "1"},               // workers on Work Queue itself
		{"factory", "-T", "pbs", "h", "1"},              // unknown
		{"factory", "-T", "local"},                      // no master
		{"factory", "-T", "local", "h"},                 // no port
		{"factory", "-T", "local", "-M", "p", "h", "1"}, // both
		{"factory", "-T", "local", "h", "port"},
		{"factory", "-T", "local", "--min", "3", "--max", "2", "h", "1"},
		{"factory", "-T", "local", "--max", "0", "h", "1"},
		{"factory", "-T", "local", "--cores", "-1", "h", "1"},
		{"factory", "-T", "local", "--max-failures", "0", "h", "1"},
		{"factory", "-T", "local", "--env", "NOEQUALS", "h", "1"},
		{"factory", "-T", "local", "-t", "soon", "h", "1"},
		{"factory", "-T", "local", "--strategy", "greedy", "h", "1"},
		{"factory", "-T", "local", "--shapes", "4", "h", "1"},
		{"factory", "-T", "sge", "--strategy", "optimal", "h", "1"}, // sge does not say what is free
	}
	for _, args := range cases {
		if code, _, stderr := run(context.Background(), args...); code != cmdutil.ExitUsage {
			t.Errorf("%v: exit %d, want %d (usage)\n%s", args, code, cmdutil.ExitUsage, stderr)
		}
	}
}

func TestFactoryFailures(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		// More cores than this machine's slots: every job is refused.
		{[]string{"--min", "1", "--cores", "100000", "--max-failures", "2"}, "giving up after 2 failures in a row"},
	}
	for _, tt := range tests {
		args := append(append([]string{"factory", "-T", "local", "-q"}, tt.args...), "127.0.0.1", "1")
		code, _, stderr := run(context.Background(), args...)
		if code != cmdutil.ExitFailure || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s", tt.args, code, cmdutil.ExitFailure, tt.want, stderr)
		}
	}
}

// TestFactoryCommand runs the real workqueue binary's factory for a master:
// its workers (the same binary's worker command) run the master's tasks,
// and SIGTERM makes it remove them all before it exits.
func TestFactoryCommand(t *testing.T) {
	bin := t.TempDir()
	if err := testutil.BuildCommands(bin, "workqueue"); err != nil {
		t.Fatal(err)
	}
	m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	marker := t.TempDir() // the workers' workspace, to find their processes by
	cmd := exec.Command(filepath.Join(bin, "workqueue"), "factory", "-T", "local", "--min", "1", "--max", "2",
		"--cores", "1", "--memory", "100", "--disk", "100", "-t", "60", "--interval", "0.1",
		"-E", "-s "+marker+" -i 0.05", "127.0.0.1", strconv.Itoa(m.Port()))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	for i := range 6 {
		m.Submit(&workqueue.Task{Command: "sleep 0.2; echo " + strconv.Itoa(i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for range 6 {
		r, err := m.Wait(ctx)
		if err != nil {
			t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
		}
		if !r.OK() {
			t.Errorf("task: %v %s", r.Status, r.Output)
		}
	}
	if n := len(workerProcesses(t, bin, marker)); n < 1 || n > 2 {
		t.Errorf("%d worker processes, want 1 or 2", n)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != cmdutil.ExitInterrupted {
		t.Errorf("factory exit: %v, want status %d\n%s", err, cmdutil.ExitInterrupted, &stderr)
	}
	if pids := workerProcesses(t, bin, marker); len(pids) != 0 {
		t.Errorf("worker processes left after SIGTERM: %v", pids)
	}
	// The factory's state, in its one log format, on standard error.
	for _, want := range []string{"msg=workers", "target=2 masters=1 tasks=6"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, &stderr)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("standard output: %q", &stdout)
	}
	if !strings.Contains(stderr.String(), "removing workers") {
		t.Errorf("stderr does not say the workers were removed:\n%s", &stderr)
	}
}

// workerProcesses returns the PIDs of bin's worker processes whose command
// line mentions marker.
func workerProcesses(t *testing.T, bin, marker string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[0] == filepath.Join(bin, "workqueue") && args[1] == "worker" && strings.Contains(string(b), marker) {
			pid, _ := strconv.Atoi(e.Name())
			pids = append(pids, pid)
		}
	}
	return pids
}
