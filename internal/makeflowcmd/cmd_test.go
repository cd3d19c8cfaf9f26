package makeflowcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/testutil"
)

// binary and workqueueBinary are the makeflow and workqueue commands
// built for these tests.
var binary, workqueueBinary string

func TestMain(m *testing.M) {
	os.Exit(testutil.RunWithCommands(m, func(dir string) {
		binary = filepath.Join(dir, "makeflow")
		workqueueBinary = filepath.Join(dir, "workqueue")
	}, "makeflow", "workqueue"))
}

// result is what one run of a command printed and returned.
type result struct {
	out, err string
	code     int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
}

// mf runs the makeflow binary in dir.
func mf(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return runProgram(t, dir, binary, args...)
}

func runProgram(t *testing.T, dir, program string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", program, args, err)
	}
	return result{out.String(), errb.String(), code}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestHelp(t *testing.T) {
	r := mf(t, t.TempDir(), "--help")
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"THE LANGUAGE", "THE LOG, RECOVERY AND FAILURES", "ON A CLUSTER", "EXIT STATUS", "--shared-fs", "--port-file", "--batch-type", "--max-local", "--clean", "--dot", "--check"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\ttouch a\n"})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus", "w.mf"}, "unknown flag: --bogus"},
		{[]string{"-T", "nope", "w.mf"}, `-T "nope": unknown batch type (known: local, dryrun, wq, slurm, sge, condor)`},
		{[]string{"w.mf", "extra"}, "expected at most 1 argument (makeflow [flags] [WORKFLOW]), got 2: w.mf extra"},
		{[]string{}, "no workflow given, and ./Makeflow does not exist"},
		{[]string{"--clean=bogus", "w.mf"}, "--clean=bogus: expected all, outputs or intermediates"},
		{[]string{"-j", "-1", "w.mf"}, "must not be negative"},
		{[]string{"-X", "nowhere", "w.mf"}, "-X nowhere: not a directory"},
		{[]string{"-l", "nodir/w.log", "w.mf"}, "-l nodir/w.log: directory nodir does not exist"},
		{[]string{"-l", "w.mf/w.log", "w.mf"}, "-l w.mf/w.log: w.mf is not a directory"},
		{[]string{"-l", ".", "w.mf"}, "-l .: is a directory; name a file"},
		{[]string{"-f", "nodir/summary", "w.mf"}, "-f nodir/summary: directory nodir does not exist"},
		{[]string{"-L", "nodir/batch.log", "w.mf"}, "-L nodir/batch.log: directory nodir does not exist"},
		{[]string{"-T", "dryrun", "-L", "nodir/script.sh", "w.mf"}, "-L nodir/script.sh: directory nodir does not exist"},
	}
	for _, tt := range tests {
		r := mf(t, dir, tt.args...)
		if r.code != cmdutil.ExitUsage || !strings.Contains(r.err, tt.want) {
			t.Errorf("makeflow %q: want exit 2 and %q, got %v", tt.args, tt.want, r)
		}
	}
	if exists(filepath.Join(dir, "a")) {
		t.Error("a usage error ran something")
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"bad.mf":  "X=1\na: missing.txt\n\techo $UNDEFINED > a\nb: b\n\ttrue\n.MAKEFLOW CORES lots\n",
		"bad2.mf": "a: missing.txt\n\ttouch a\nb: b\n\ttrue\nc:\n\ttouch c\nc:\n\ttouch c\n",
		"good.mf": "a: in\n\tcp in a\n",
		"in":      "x",
	})
	r := mf(t, dir, "--check", "bad.mf")
	want := "bad.mf:3:7: variable UNDEFINED is not defined (write \\$UNDEFINED or $$UNDEFINED to leave it to the shell)\n" +
		"bad.mf:6:17: CORES must be a whole number, got \"lots\"\n" +
		"2 errors in bad.mf; nothing was run\n"
	if r.code != 1 || r.err != want {
		t.Errorf("got %v\nwant stderr:\n%s", r, want)
	}
	r = mf(t, dir, "--check", "bad2.mf")
	want = "bad2.mf:1:4: input missing.txt does not exist and no rule makes it\n" +
		"bad2.mf:3:1: dependency cycle: the rule reads b, which it makes itself\n" +
		"bad2.mf:7:1: c is also made by the rule at bad2.mf:5:1; a file can be made by one rule only\n" +
		"3 errors in bad2.mf; nothing was run\n"
	if r.code != 1 || r.err != want {
		t.Errorf("got %v\nwant stderr:\n%s", r, want)
	}
	// Running reports the same problems and runs nothing.
	if r := mf(t, dir, "bad2.mf"); r.code != 1 || !strings.Contains(r.err, "3 errors in bad2.mf") || exists(filepath.Join(dir, "c")) {
		t.Errorf("run of a bad workflow: %v", r)
	}
	r = mf(t, dir, "--check", "good.mf")
	if r.code != 0 || r.out != "good.mf: 1 rules, no problems found\n" || exists(filepath.Join(dir, "a")) {
		t.Errorf("good workflow: %v", r)
	}
}

// TestCheckNested: --check also checks the nested workflows that exist,
// each against the directory it runs in; it skips one that a rule makes
// and does not loop on a workflow that nests itself.
func TestCheckNested(t *testing.T) {
	dir := t.TempDir()
	top := "made.mf:\n\tprintf 'x:\\n\\ttrue\\n' > made.mf\n" +
		"done: sub.mf\n\tMAKEFLOW sub.mf work\n" +
		"also: made.mf\n\tMAKEFLOW made.mf\n" +
		"again: top.mf\n\tMAKEFLOW top.mf\n"
	writeFiles(t, dir, map[string]string{
		"top.mf":     top,
		"work/.keep": "",
		"data.txt":   "not the one the nested workflow reads",
	})
	for _, step := range []struct{ sub, want string }{
		// A nested workflow that does not parse: what ParseFile says.
		{"r: data.txt\n\tcat data.txt > r\ns: r\n\techo $NOPE > s\n",
			"sub.mf:4:7: variable NOPE is not defined (write \\$NOPE or $$NOPE to leave it to the shell)\n"},
		// One that does: what Check says, in the directory it runs in,
		// which has no data.txt.
		{"r: data.txt\n\tcat data.txt > r\n", "sub.mf:1:4: input data.txt does not exist and no rule makes it\n"},
	} {
		writeFiles(t, dir, map[string]string{"sub.mf": step.sub})
		want := step.want + "1 error in top.mf; nothing was run\n"
		if r := mf(t, dir, "--check", "top.mf"); r.code != 1 || r.err != want {
			t.Errorf("got %v\nwant stderr:\n%s", r, want)
		}
	}
	// A file the enclosing workflow makes is there when the nested one runs.
	writeFiles(t, dir, map[string]string{"top.mf": "work/data.txt:\n\techo x > work/data.txt\n" + top})
	if r := mf(t, dir, "--check", "top.mf"); r.code != 0 || r.out != "top.mf: 5 rules, no problems found\n" {
		t.Errorf("with data.txt made by a rule: %v", r)
	}
}

func TestDot(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a: in\n\tcp in a\n"})
	r := mf(t, dir, "--dot", "w.mf")
	if r.code != 0 || !strings.HasPrefix(r.out, "digraph \"w.mf\" {") || !strings.Contains(r.out, "R0 -> F0;") {
		t.Errorf("--dot: %v", r)
	}
}

func TestDryRun(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a: in\n\tcp in a\nb: a\n\tcp a b\n", "in": "x"})
	r := mf(t, dir, "-T", "dryrun", "w.mf")
	if r.code != 0 || !strings.Contains(r.out, "cp in a\n\n# rule 1 (w.mf:3:1) makes b\ncp a b\n") {
		t.Errorf("dry run: %v", r)
	}
	if exists(filepath.Join(dir, "a")) || exists(filepath.Join(dir, "w.mf.makeflowlog")) {
		t.Error("the dry run ran something or wrote a log")
	}
	// Shell syntax check of the script it printed.
	sh := exec.Command("/bin/sh", "-n")
	sh.Stdin = strings.NewReader(r.out)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Errorf("the dry-run script is not valid sh: %v\n%s", err, out)
	}
}

func TestRunAndClean(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Makeflow": "out: in\n\ttr a-z A-Z < in > out\ncount: out\n\twc -l < out > count\n",
		"in":       "hello\nworld\n",
	})
	r := mf(t, dir)
	if r.code != 0 || !strings.Contains(r.out, "workflow complete: 2 rules ran, 0 rules already done") {
		t.Fatalf("run: %v", r)
	}
	if got := readFile(t, filepath.Join(dir, "out")); got != "HELLO\nWORLD\n" {
		t.Errorf("out = %q", got)
	}
	r = mf(t, dir)
	if r.code != 0 || !strings.Contains(r.out, "nothing left to do.") || !strings.Contains(r.out, "0 rules ran, 2 rules already done") {
		t.Errorf("second run: %v", r)
	}
	r = mf(t, dir, "-c")
	if r.code != 0 || r.out != "deleted out\ndeleted count\ndeleted Makeflow.makeflowlog\n" {
		t.Errorf("clean: %v", r)
	}
	if !exists(filepath.Join(dir, "in")) || !exists(filepath.Join(dir, "Makeflow")) || exists(filepath.Join(dir, "out")) {
		t.Error("clean removed the wrong files")
	}
}

func TestDebugOutput(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\ttouch a\n"})
	r := mf(t, dir, "-d", "all", "w.mf")
	for _, want := range []string{"level=DEBUG msg=limits", "level=DEBUG msg=started rule=0 attempt=1", "level=DEBUG msg=finished rule=0 status=\"exit status 0\" ok=true"} {
		if r.code != 0 || !strings.Contains(r.err, want) {
			t.Errorf("-d all: stderr lacks %q: %v", want, r)
		}
	}
}

func TestChangeDirectory(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "sub")
	writeFiles(t, dir, map[string]string{"w.mf": "a: in\n\tcp in a; pwd > where\n", "in": "x"})
	r := mf(t, top, "-X", "sub", "w.mf")
	if r.code != 0 || !exists(filepath.Join(dir, "a")) || !exists(filepath.Join(dir, "w.mf.makeflowlog")) {
		t.Fatalf("-X: %v", r)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(dir, "where"))); got != dir {
		t.Errorf("ran in %q, want %q", got, dir)
	}
}

func TestFailure(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "bad:\n\techo boom >&2; exit 3\nafter: bad\n\ttouch after\ngood:\n\ttouch good\n"})
	r := mf(t, dir, "w.mf")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1: %v", r.code, r)
	}
	for _, want := range []string{
		"makeflow: workflow failed: 1 of 3 rules failed; 1 rule that needs its outputs did not run",
		"rule 0 (w.mf:1:1) failed: exit status 3",
		"command: echo boom >&2; exit 3",
		"stderr: boom",
	} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.err)
		}
	}
	if !exists(filepath.Join(dir, "good")) || exists(filepath.Join(dir, "after")) {
		t.Error("good should have run and after should not")
	}
	log := readFile(t, filepath.Join(dir, "w.mf.makeflowlog"))
	starts := 0
	for _, line := range strings.Split(log, "\n") {
		if f := strings.Fields(line); len(f) == 10 && f[1] == "0" && f[2] == "1" {
			starts++
		}
	}
	if !strings.Contains(log, "\n# FAILED ") || starts != 1 {
		t.Errorf("the failed rule started %d times (no retries were asked for); log:\n%s", starts, log)
	}
}

// TestKill9Recovery kills makeflow with SIGKILL in the middle of a run, then
// runs it again: the rules the log shows complete are not run again, the
// interrupted ones are, and everything ends up made once.
func TestKill9Recovery(t *testing.T) {
	dir := t.TempDir()
	c := writeChains(t, dir, "runs", true)
	cmd := exec.Command(binary, "-j", "2")
	cmd.Dir = dir
	mark := testutil.ProcessMark(t)
	cmd.Env = append(os.Environ(), mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Four rules are let finish; makeflow is killed once the next two
	// have started and wait to be let go, so that what the log shows done
	// is known. (A rule starting as makeflow dies is killed too, by the
	// mark internal/proc's Spawn gives it; internal/proc's
	// TestKill9WhileSpawning kills at those moments.)
	started := func() []string {
		runs, _ := os.ReadFile(filepath.Join(dir, "runs"))
		return strings.Fields(string(runs))
	}
	for done := 0; done < 4; {
		testutil.WaitFor(t, "a rule to start", time.Minute, func() bool { return len(started()) > done })
		c.release(t, started()[done])
		done++
		testutil.WaitFor(t, "the rule to be done", time.Minute, func() bool { return len(c.complete()) >= done })
	}
	testutil.WaitFor(t, "two rules running", time.Minute, func() bool { return len(started()) == 6 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	doneBefore := c.killed(t)
	// The rules that were running died with makeflow: left running, they
	// would wait for their release for ever.
	testutil.WaitUnmarked(t, mark, 10*time.Second)
	c.release(t, "all")
	c.checkRecovered(t, mf(t, dir, "-j", "2"), doneBefore)
}

// chains is a workflow of independent chains of slow rules, each noting in
// a file when it runs, for the kill-and-recover tests.
type chains struct {
	dir, runs     string
	count, length int
}

// writeChains writes the workflow as dir/Makeflow; its rules append their
// names to runs (relative to dir, or absolute), then take 0.3 s, or if
// gated wait until the test releases them (release), and write their
// output.
func writeChains(t *testing.T, dir, runs string, gated bool) chains {
	t.Helper()
	c := chains{dir: dir, runs: runs, count: 3, length: 5}
	var src strings.Builder
	for i := range c.count {
		for j := range c.length {
			name := fmt.Sprintf("c%d_%d", i, j)
			if j == 0 {
				fmt.Fprintf(&src, "%s:\n", name)
			} else {
				fmt.Fprintf(&src, "%s: c%d_%d\n", name, i, j-1)
			}
			wait := "sleep 0.3"
			if gated {
				wait = fmt.Sprintf("while [ ! -e go_%s ] && [ ! -e go_all ]; do sleep 0.01; done", name)
			}
			fmt.Fprintf(&src, "\techo %s >> %s; %s; echo %s > %s\n", name, runs, wait, name, name)
		}
	}
	writeFiles(t, dir, map[string]string{"Makeflow": src.String()})
	return c
}

// release lets gated rule name finish, or every rule if name is "all".
func (c chains) release(t *testing.T, name string) {
	t.Helper()
	writeFiles(t, c.dir, map[string]string{"go_" + name: ""})
}

// complete returns the ids of the rules the log shows complete.
func (c chains) complete() []string {
	data, _ := os.ReadFile(filepath.Join(c.dir, "Makeflow.makeflowlog"))
	var ids []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 10 && f[2] == "2" {
			ids = append(ids, f[1])
		}
	}
	return ids
}

// killed returns the rules complete when the run was killed, and fails the
// test if that was all of them.
func (c chains) killed(t *testing.T) []string {
	t.Helper()
	done := c.complete()
	if len(done) >= c.count*c.length {
		t.Fatal("the run finished before it was killed; nothing was tested")
	}
	return done
}

// checkRecovered checks the re-run r after a kill: it recovered the rules
// complete before (doneBefore) and ran none of them again, and every
// output is made.
func (c chains) checkRecovered(t *testing.T, r result, doneBefore []string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("re-run: %v", r)
	}
	if !strings.Contains(r.out, fmt.Sprintf("%d of %d rules already done", len(doneBefore), c.count*c.length)) {
		t.Errorf("re-run did not recover %d rules:\n%s", len(doneBefore), r.out)
	}
	runs := c.runs
	if !filepath.IsAbs(runs) {
		runs = filepath.Join(c.dir, runs)
	}
	count := map[string]int{}
	for _, name := range strings.Fields(readFile(t, runs)) {
		count[name]++
	}
	for i := range c.count {
		for j := range c.length {
			name := fmt.Sprintf("c%d_%d", i, j)
			if got := readFile(t, filepath.Join(c.dir, name)); got != name+"\n" {
				t.Errorf("%s = %q", name, got)
			}
			id := strconv.Itoa(i*c.length + j)
			switch {
			case slices.Contains(doneBefore, id) && count[name] != 1:
				t.Errorf("%s was complete before the kill but ran %d times", name, count[name])
			case count[name] < 1 || count[name] > 2:
				t.Errorf("%s ran %d times", name, count[name])
			}
		}
	}
}

func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Makeflow": "a:\n\ttouch a\nb: a\n\tsleep 30; touch b\n"})
	cmd := exec.Command(binary)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(readLog(dir), " 1 1 ") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("b never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != cmdutil.ExitInterrupted {
		t.Fatalf("exit = %v, want %d\n%s", err, cmdutil.ExitInterrupted, out.String())
	}
	if time.Since(start) > 10*time.Second {
		t.Error("the running rule was not stopped")
	}
	if !strings.Contains(out.String(), "interrupted with 1 of 2 rules done") || !strings.Contains(readLog(dir), "# ABORTED") {
		t.Errorf("output:\n%s\nlog:\n%s", out.String(), readLog(dir))
	}
}

func readLog(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "Makeflow.makeflowlog"))
	return string(b)
}

func TestNestedWorkflow(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Makeflow":          "out.actual: sublevel.makeflow\n\tMAKEFLOW sublevel.makeflow\nfinal: out.actual\n\tcat out.actual > final\n",
		"sublevel.makeflow": "out.hello:\n\techo hello > out.hello\nout.actual: out.hello\n\tcat out.hello > out.actual; echo world >> out.actual\n",
	})
	r := mf(t, dir)
	if r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	if got := readFile(t, filepath.Join(dir, "final")); got != "hello\nworld\n" {
		t.Errorf("final = %q", got)
	}
	if !exists(filepath.Join(dir, "sublevel.makeflow.makeflowlog")) {
		t.Error("the nested workflow kept no log")
	}
	r = mf(t, dir, "-c")
	if r.code != 0 || exists(filepath.Join(dir, "out.hello")) || exists(filepath.Join(dir, "out.actual")) ||
		exists(filepath.Join(dir, "sublevel.makeflow.makeflowlog")) || !exists(filepath.Join(dir, "sublevel.makeflow")) {
		t.Errorf("clean: %v", r)
	}
}
