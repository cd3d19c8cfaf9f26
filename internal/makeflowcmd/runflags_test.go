package makeflowcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBatchLogDryRun: with -T dryrun, -L takes the shell script, as
// CCTools writes its dry run to the batch log.
func TestBatchLogDryRun(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\techo a > a\nb: a\n\tcat a > b\n"})
	r := mf(t, dir, "-T", "dryrun", "-L", "script.sh", "w.mf")
	if r.code != 0 || strings.Contains(r.out, "cat a > b") {
		t.Fatalf("makeflow -T dryrun -L: %v", r)
	}
	script := readFile(t, filepath.Join(dir, "script.sh"))
	if !strings.HasPrefix(script, "#!/bin/sh\n") || !strings.Contains(script, "echo a > a\n") || !strings.Contains(script, "cat a > b\n") {
		t.Errorf("script.sh:\n%s", script)
	}
	if exists(filepath.Join(dir, "a")) {
		t.Errorf("a dry run ran a rule")
	}
}

// TestBatchLogWorkQueue: with -T wq, -L holds the master's statistics in
// the columns of CCTools' Work Queue log; the last line counts every task
// done.
func TestBatchLogWorkQueue(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\techo a > a\nb: a\n\tcat a > b\n"})
	port := freePort(t)
	m := start(t, dir, nil, "-T", "wq", "-p", port, "-P", "5", "-L", "w.wqlog", "w.mf")
	m.until(t, "listening message", func() bool { return strings.Contains(m.out.String(), "listening for workers on port "+port+".\n") })
	ourWorkers(t, 1, port)
	if r := m.wait(t); r.code != 0 {
		t.Fatalf("makeflow -T wq -L: %v", r)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "w.wqlog"))), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "# timestamp workers_connected workers_init ") {
		t.Fatalf("w.wqlog:\n%s", strings.Join(lines, "\n"))
	}
	names := strings.Fields(strings.TrimPrefix(lines[0], "# "))
	last := strings.Fields(lines[len(lines)-1])
	if len(last) != len(names) {
		t.Fatalf("%d values for %d columns: %s", len(last), len(names), lines[len(lines)-1])
	}
	for i, name := range names {
		if name == "tasks_done" && last[i] != "2" {
			t.Errorf("the last line says %s tasks done, want 2:\n%s", last[i], strings.Join(lines, "\n"))
		}
	}
}

// TestSubmissionTimeout: a batch system whose sbatch always refuses; -S
// bounds how long makeflow keeps trying before the rule fails, and it
// says so as it goes, as CCTools does.
func TestSubmissionTimeout(t *testing.T) {
	bin := t.TempDir()
	writeFiles(t, bin, map[string]string{
		"sbatch": "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Slurm controller not responding' >&2\nexit 1\n",
		"squeue": "#!/bin/sh\nexit 0\n",
	})
	for _, name := range []string{"sbatch", "squeue"} {
		os.Chmod(filepath.Join(bin, name), 0o755)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\ttouch a\n"})
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	r := start(t, dir, env, "-T", "slurm", "-S", "2", "w.mf").wait(t)
	if r.code != 1 || exists(filepath.Join(dir, "a")) {
		t.Fatalf("makeflow -S 2 with a refusing sbatch: %v", r)
	}
	for _, want := range []string{"couldn't submit batch job, still trying in 1s", "still trying in 2s", "unable to submit the job after 2s", "Slurm controller not responding"} {
		if !strings.Contains(r.out+r.err, want) {
			t.Errorf("makeflow does not say %q: %v", want, r)
		}
	}
	if r := start(t, dir, env, "-T", "slurm", "-S", "0", "w.mf").wait(t); r.code != 1 || strings.Contains(r.out+r.err, "still trying") {
		t.Errorf("makeflow -S 0 tried again: %v", r)
	}
}
