package allpairscmd

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/sparsematrix"
)

func TestDistributedFlagErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := dataDir(t, rng, 2)
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("secret"), 0o600)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-T", "pbs"}, "unknown batch type"},
		{[]string{"-p", "9000"}, "give -T TYPE too"},
		{[]string{"--retries", "1"}, "give -T TYPE too"},
		{[]string{"--job-size", "3"}, "give -T TYPE too"},
		{[]string{"-T", "local", "-M"}, "give one of them"},
		{[]string{"-T", "local", "-c", "2"}, "one core of its worker"},
		{[]string{"-T", "local", "--job-size", "0x3"}, "--job-size"},
		{[]string{"-T", "local", "--job-size", "3xy"}, "--job-size"},
		{[]string{"-T", "wq", "--fast-abort", "0.5"}, "at least 1"},
		{[]string{"-T", "wq", "--retries", "-1"}, "negative"},
		{[]string{"-T", "slurm", "--password", pw}, "-T wq only"},
		{[]string{"-T", "wq", "-p", "0", "--password", pw + ".missing"}, "--password: " + pw + ".missing: no such file or directory"},
		{[]string{"-T", "wq", "-p", "0", "--ssl-cert", pw, "--ssl-key", pw}, "--ssl-cert: TLS certificate"},
		{[]string{"-T", "wq", "-p", "70000"}, "not a port"},
	}
	for _, tt := range tests {
		args := append(append([]string{}, tt.args...), "builtin:bytediff", a, a)
		code, out, errs := runMain(t, args...)
		if code != 2 || out != "" || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 with %q", tt.args, code, out, errs, tt.want)
		}
	}
}

// TestMatrixOutput: in sub-problem mode --matrix writes sparse-matrix
// records, which keep results with tabs and newlines whole.
func TestMatrixOutput(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a := dataDir(t, rng, 5)
	fn := testutil.WriteScript(t, t.TempDir(), "f", `printf '%s\t%s\nend' "$(basename "$1")" "$(basename "$2")"`)
	matrix := filepath.Join(t.TempDir(), "cells.matrix")
	code, out, errs := runMain(t, "-M", "-X", "2", "-Y", "3", "-W", "3", "-H", "2", "--matrix", matrix, fn, a, a)
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	cells, err := sparsematrix.Load(matrix)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 6 {
		t.Fatalf("%d cells, want 6: %v", len(cells), cells)
	}
	for x := 1; x <= 3; x++ {
		for y := 2; y <= 3; y++ {
			want := fmt.Sprintf("item%02d\titem%02d\nend", x, y)
			if got := string(cells[sparsematrix.Key{X: x, Y: y}]); got != want {
				t.Errorf("cell (%d,%d) = %q, want %q", x, y, got, want)
			}
		}
	}
}

// runBinary runs the real allpairs binary and returns its exit code,
// standard output and standard error.
func runBinary(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	return startBinary(t, dir, args...)()
}

// startBinary starts the real allpairs binary; the function it returns
// waits for it.
func startBinary(t *testing.T, dir string, args ...string) func() (int, string, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // if the test failed before waiting
	return func() (int, string, string) {
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
}

// startWorkers starts n real one-core workers for the master whose port
// file is portFile, once it is written.
func startWorkers(t *testing.T, portFile string, n int) {
	t.Helper()
	port := testutil.WaitLine(t, portFile)
	root, err := os.MkdirTemp("", "allpairscmd-workers-")
	if err != nil {
		t.Fatal(err)
	}
	var procs []*exec.Cmd
	for i := 0; i < n; i++ {
		cmd := exec.Command(filepath.Join(binDir, "workqueue"), "worker", "--cores", "1", "-s", root, "-t", "60", "-q", "--single-shot", "127.0.0.1", port)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
			p.Wait()
		}
		os.RemoveAll(root)
	})
}

func TestDistributedEqualsMulticore(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a, b := dataDir(t, rng, 9), dataDir(t, rng, 7)
	prog := testutil.BuildProgram(t, "../../multicore/testdata/bytediff_prog.c")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"local program 4x3", []string{"-T", "local", "--job-size", "4x3", prog, a, b}, naive(t, a, b, false)},
		{"local builtin symmetric", []string{"-T", "local", "--job-size", "4", "--symmetric", "builtin:bytediff", a, a}, naive(t, a, a, true)},
		{"wq program 2x5", []string{"-T", "wq", "--job-size", "2x5", prog, a, b}, naive(t, a, b, false)},
		{"wq builtin symmetric, sized by the model", []string{"-T", "wq", "--symmetric", "builtin:bytediff", a, a}, naive(t, a, a, true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"-o", "out.txt", "-v"}, tt.args...)
			wq := tt.args[1] == "wq"
			if wq {
				// -Z alone: any free port, as makeflow -Z.
				args = append([]string{"-Z", "port"}, args...)
			}
			wait := startBinary(t, dir, args...)
			if wq {
				if port := testutil.WaitLine(t, filepath.Join(dir, "port")); port == "9123" {
					t.Errorf("-Z without -p listened on the default port %s", port)
				}
				startWorkers(t, filepath.Join(dir, "port"), 2)
			}
			code, out, errs := wait()
			if code != 0 || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
			}
			got, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
			if lines := sorted(string(got)); !slices.Equal(lines, tt.want) {
				t.Errorf("%d lines, want %d:\n%s", len(lines), len(tt.want), got)
			}
			// The checkpoint and its plan served their purpose once
			// out.txt was written whole.
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				switch e.Name() {
				case "out.txt", "port":
				default:
					t.Errorf("%s left in the directory", e.Name())
				}
			}
			if !strings.Contains(errs, "jobs, mean ") || !strings.Contains(errs, " as a process") {
				t.Errorf("-v said:\n%s", errs)
			}
		})
	}
}

// TestDistributedKillAndResume kills the real master with SIGKILL while its
// jobs run, and runs it again: no cell of a block that had finished is
// computed again, and the result is that of a run never killed.
func TestDistributedKillAndResume(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	a := dataDir(t, rng, 8)
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	fn := testutil.WriteScript(t, t.TempDir(), "f", `printf '%s %s\n' "$(basename "$1")" "$(basename "$2")" >> `+log+`
sleep 0.05
cmp -l "$1" "$2" 2>/dev/null | wc -l`)
	_, want, _ := runBinary(t, dir, fn, a, a)
	os.Remove(log)

	matrix := filepath.Join(dir, "out.txt.matrix")
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), "-T", "local", "--job-size", "2", "-o", "out.txt", fn, a, a)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m, err := sparsematrix.Load(matrix); err == nil && len(m) >= 16 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the run kept too few cells in 60s")
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	kept, err := sparsematrix.Load(matrix)
	if err != nil || len(kept) >= 64 {
		t.Fatalf("%d cells kept when killed (%v)", len(kept), err)
	}
	time.Sleep(300 * time.Millisecond) // calls orphaned by the killed jobs end
	os.Remove(log)

	code, out, errs := runBinary(t, dir, "-T", "local", "-o", "out.txt", fn, a, a)
	if code != 0 || out != "" {
		t.Fatalf("re-run: exit %d, stderr:\n%s", code, errs)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	if !slices.Equal(sorted(string(got)), sorted(want)) {
		t.Errorf("after kill and re-run:\n%s\nwant\n%s", got, want)
	}
	calls, _ := os.ReadFile(log)
	t.Logf("%d cells kept when killed; the re-run made %d calls", len(kept), strings.Count(string(calls), "\n"))
	for _, call := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
		x, y := itemIndex(t, call)
		complete := true
		for i := x / 2 * 2; i < x/2*2+2; i++ {
			for j := y / 2 * 2; j < y/2*2+2; j++ {
				_, ok := kept[sparsematrix.Key{X: i, Y: j}]
				complete = complete && ok
			}
		}
		if complete {
			t.Errorf("cell %q of a block finished before the kill was computed again", call)
		}
	}
}

// itemIndex parses a logged call "itemXX itemYY".
func itemIndex(t *testing.T, call string) (int, int) {
	var x, y int
	if _, err := fmt.Sscanf(call, "item%d item%d", &x, &y); err != nil {
		t.Fatalf("log line %q: %v", call, err)
	}
	return x, y
}

// TestDistributedFailureReport: a block that keeps failing is reported with
// what its function said, the run exits 1, and every other cell is written.
func TestDistributedFailureReport(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	a := dataDir(t, rng, 6)
	fn := testutil.WriteScript(t, t.TempDir(), "f", `case "$1" in *item02) echo "item02 is unreadable" >&2; exit 4;; esac
cmp -l "$1" "$2" 2>/dev/null | wc -l`)
	dir := t.TempDir()
	code, _, errs := runBinary(t, dir, "-T", "local", "--retries", "1", "--job-size", "3", "-o", "out.txt", fn, a, a)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errs)
	}
	for _, want := range []string{"block x0-y0 failed after 2 attempts", "block x0-y3 failed after 2 attempts",
		"item02 is unreadable", "2 of 4 blocks failed", "run the same command again"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	lines := sorted(string(got))
	if len(lines) != 36-6 || slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "item02\t") }) {
		t.Errorf("%d lines written:\n%s", len(lines), got)
	}
}

// TestDistributedProjectAndPassword: with -N the master advertises itself
// to the catalog, and workers started with -M find it there; with
// --password only workers that know the password are given work.
func TestDistributedProjectAndPassword(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	a := dataDir(t, rng, 5)
	dir := t.TempDir()
	wq := filepath.Join(binDir, "workqueue")
	catalog := exec.Command(wq, "catalog", "-p", "0", "-Z", filepath.Join(dir, "catalog.port"), "-q")
	if err := catalog.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { catalog.Process.Kill(); catalog.Wait() })
	catalogAddr := "127.0.0.1:" + testutil.WaitLine(t, filepath.Join(dir, "catalog.port"))
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("open sesame\n"), 0o600)
	project := fmt.Sprintf("rightsize-test-%d", os.Getpid())

	cmd := exec.Command(filepath.Join(binDir, "allpairs"), "-T", "wq", "-p", "0", "-N", project, "--password", pw,
		"--job-size", "2", "-o", "out.txt", "builtin:bytediff", a, a)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CATALOG_HOST="+catalogAddr)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	root := t.TempDir()
	worker := func(args ...string) *exec.Cmd {
		w := exec.Command(wq, append([]string{"worker", "--cores", "1", "-s", root, "-t", "30", "-i", "0.1", "-b", "0.5", "-q",
			"-M", project, "-C", catalogAddr}, args...)...)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Process.Signal(syscall.SIGTERM); w.Wait() })
		return w
	}
	// A worker without the password is turned away; one with it works.
	worker()
	time.Sleep(2 * time.Second)
	if cells, err := sparsematrix.Load(filepath.Join(dir, "out.txt.matrix")); err != nil || len(cells) != 0 {
		t.Fatalf("a worker without the password computed %d cells (%v)", len(cells), err)
	}
	worker("--password", pw)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), `as project "`+project+`"`) {
		t.Errorf("stderr:\n%s", errb.String())
	}
	if !strings.Contains(errb.String(), `allpairs: level=WARN msg="refused connection" from=127.0.0.1:`) {
		t.Errorf("the worker without the password was not reported:\n%s", errb.String())
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	if lines := sorted(string(got)); !slices.Equal(lines, naive(t, a, a, false)) {
		t.Errorf("output:\n%s", got)
	}
}

// TestDistributedOnSlurmWorkers is seed 000's Fig. 3.2 on a real batch
// system: a distributed All-Pairs served by Work Queue workers that
// `workqueue factory -T slurm` submitted as SLURM jobs. Every cell is
// computed inside a SLURM job, the result is the multicore run's, and
// stopping the factory leaves none of its jobs in the queue.
func TestDistributedOnSlurmWorkers(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	rng := rand.New(rand.NewPCG(13, 14))
	a, b := dataDir(t, rng, 6), dataDir(t, rng, 5)
	fn := testutil.WriteScript(t, t.TempDir(), "f", `echo "$(cmp -l "$1" "$2" 2>/dev/null | wc -l) ${SLURM_JOB_ID:-none}"`)
	dir := t.TempDir()
	_, multicore, _ := runBinary(t, dir, fn, a, b)

	wait := startBinary(t, dir, "-T", "wq", "-p", "0", "-Z", "port", "--job-size", "2x3", "-o", "out.txt", fn, a, b)
	port := testutil.WaitLine(t, filepath.Join(dir, "port"))
	factory := exec.Command(filepath.Join(binDir, "workqueue"), "factory", "-T", "slurm", "-q",
		"--min", "1", "--max", "2", "--cores", "1", "--memory", "1000", "-t", "60", "--interval", "0.5",
		"-S", t.TempDir(), "127.0.0.1", port)
	var factoryErr bytes.Buffer
	factory.Stderr = &factoryErr
	if err := factory.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { factory.Process.Kill() }) // if the test failed before stopping it

	code, out, errs := wait()
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s\nfactory:\n%s", code, out, errs, &factoryErr)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	jobs := map[string]bool{}
	var withoutJobs []string
	for _, line := range sorted(string(got)) {
		count, job, _ := strings.Cut(line, " ")
		withoutJobs = append(withoutJobs, count+" none")
		if _, err := strconv.Atoi(job); err != nil {
			t.Errorf("cell %q was not computed in a SLURM job", line)
		}
		jobs[job] = true
	}
	if want := sorted(multicore); !slices.Equal(withoutJobs, want) {
		t.Errorf("distributed on SLURM:\n%s\nmulticore:\n%s", got, multicore)
	}
	if len(jobs) > 2 {
		t.Errorf("cells computed in %d SLURM jobs %v, more than the factory's maximum of 2", len(jobs), jobs)
	}

	factory.Process.Signal(syscall.SIGTERM)
	factory.Wait()
	for id := range jobs {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			state, err := exec.Command("squeue", "--noheader", "--jobs", id, "--format=%T",
				"--states=PENDING,RUNNING,CONFIGURING,SUSPENDED").CombinedOutput()
			if err != nil || len(bytes.TrimSpace(state)) == 0 {
				break // squeue no longer knows the job, or it has ended
			}
			if time.Now().After(deadline) {
				t.Errorf("SLURM job %s is still %s after the factory stopped", id, bytes.TrimSpace(state))
				break
			}
		}
	}
}

// TestStragglerWarning: a job removed as a straggler is reported on
// standard error without -v, with how long it ran and the limit it passed.
func TestStragglerWarning(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	a := dataDir(t, rng, 8)
	dir := t.TempDir()
	mark := filepath.Join(dir, "hung")
	// The first cell hangs; the 15 other blocks give the 10 samples fast
	// abort waits for.
	fn := testutil.WriteScript(t, t.TempDir(), "f", `mkdir `+mark+` 2>/dev/null && echo $$ > `+mark+`/pid && exec sleep 3600
cmp -l "$1" "$2" 2>/dev/null | wc -l`)
	t.Cleanup(func() {
		// The function runs in a process group of its own, which the
		// batch job's removal does not reach.
		if b, err := os.ReadFile(filepath.Join(mark, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	code, out, errs := runBinary(t, dir, "-T", "local", "--job-size", "2", "-o", "out.txt", fn, a, a)
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if !strings.Contains(errs, `msg="fast abort"`) || !strings.Contains(errs, "limit=") {
		t.Errorf("stderr does not report the fast abort:\n%s", errs)
	}
}

// TestWorkQueueHybrid: with -T wq --hybrid and no other worker, the
// master's own worker does every block in the master's process, and the
// result is the multicore one.
func TestWorkQueueHybrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	a := dataDir(t, rng, 7)
	dir := t.TempDir()
	code, out, errs := runBinary(t, dir, "-T", "wq", "-p", "0", "--hybrid", "--job-size", "3", "-v", "-o", "out.txt", "builtin:bytediff", a, a)
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	if lines := sorted(string(got)); !slices.Equal(lines, naive(t, a, a, false)) {
		t.Errorf("%d lines, want the %d of the naive run", len(lines), 49)
	}
	if !strings.Contains(errs, "9 jobs, 9 done here by the master's own worker") {
		t.Errorf("-v did not say the jobs were done here:\n%s", errs)
	}
}
