package makeflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// testRun is one workflow in a temporary directory.
type testRun struct {
	t      *testing.T
	dir    string
	path   string
	out    testutil.SyncBuffer // Run's messages
	jobOut testutil.SyncBuffer // the commands' stdout and stderr
}

func newTestRun(t *testing.T, src string) *testRun {
	t.Helper()
	dir := t.TempDir()
	tr := &testRun{t: t, dir: dir, path: filepath.Join(dir, "Makeflow")}
	tr.write("Makeflow", src)
	return tr
}

func (tr *testRun) write(name, content string) {
	tr.t.Helper()
	p := filepath.Join(tr.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *testRun) read(name string) string {
	tr.t.Helper()
	b, err := os.ReadFile(filepath.Join(tr.dir, name))
	if err != nil {
		tr.t.Fatal(err)
	}
	return string(b)
}

func (tr *testRun) exists(name string) bool {
	_, err := os.Lstat(filepath.Join(tr.dir, name))
	return err == nil
}

// run parses and runs the workflow with the Local executor, in an
// environment holding only PATH.
func (tr *testRun) run(ctx context.Context, opts Options) (*Report, error) {
	tr.t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH")}
	w, err := ParseFile(tr.path, env)
	if err != nil {
		tr.t.Fatalf("parse: %v", err)
	}
	l, err := NewLocal(LocalOptions{Stdout: &tr.jobOut, Stderr: &tr.jobOut, Environ: env, KillDelay: time.Second})
	if err != nil {
		tr.t.Fatal(err)
	}
	defer l.Close()
	opts.Dir = tr.dir
	opts.Executor = l
	opts.Out = &tr.out
	if opts.Local.Jobs == 0 {
		opts.Local.Jobs = 2
	}
	return Run(ctx, w, opts)
}

func (tr *testRun) mustRun(opts Options) *Report {
	tr.t.Helper()
	rep, err := tr.run(context.Background(), opts)
	if err != nil {
		tr.t.Fatalf("Run: %v\nmessages:\n%s\ncommand output:\n%s", err, tr.out.String(), tr.jobOut.String())
	}
	return rep
}

// logLines returns the log's lines.
func (tr *testRun) logLines() []string {
	return strings.Split(strings.TrimSuffix(tr.read("Makeflow.makeflowlog"), "\n"), "\n")
}

// states returns each rule's states in the log, in order.
func (tr *testRun) states() map[int][]RuleState {
	rec := map[int][]RuleState{}
	for _, line := range tr.logLines() {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 10 {
			tr.t.Fatalf("log line %q does not have 10 fields", line)
		}
		var id, st int
		id, st = atoi(tr.t, f[1]), atoi(tr.t, f[2])
		rec[id] = append(rec[id], RuleState(st))
	}
	return rec
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a number", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// runs returns the lines the commands appended to "runs" (which rules ran).
func (tr *testRun) runs() []string {
	if !tr.exists("runs") {
		return nil
	}
	lines := strings.Fields(tr.read("runs"))
	slices.Sort(lines)
	return lines
}

func TestRunWorkflow(t *testing.T) {
	tr := newTestRun(t, `
IN=input.txt
a.txt: $(IN)
	tr a-z A-Z < $(IN) > a.txt
b.txt: $(IN)
	wc -c < $(IN) | tr -d ' ' > b.txt
sub/dir/c.txt: a.txt b.txt
	cat a.txt b.txt > sub/dir/c.txt
`)
	tr.write("input.txt", "hello\n")
	rep := tr.mustRun(Options{})
	if got := tr.read("sub/dir/c.txt"); got != "HELLO\n6\n" {
		t.Errorf("c.txt = %q", got)
	}
	if rep.Ran != 3 || rep.Skipped != 0 || rep.Counts.Complete != 3 || len(rep.Failures) != 0 {
		t.Errorf("report = %+v", rep)
	}
	lines := tr.logLines()
	if !strings.HasPrefix(lines[0], "# STARTED ") || !strings.HasPrefix(lines[len(lines)-1], "# COMPLETED ") {
		t.Errorf("log starts %q and ends %q", lines[0], lines[len(lines)-1])
	}
	for id, sts := range tr.states() {
		if !slices.Equal(sts, []RuleState{Running, Complete}) {
			t.Errorf("rule %d went through %v", id, sts)
		}
	}
	if !strings.Contains(tr.read("Makeflow.makeflowlog"), "# FILE ") ||
		!strings.Contains(tr.read("Makeflow.makeflowlog"), " sub/dir/c.txt 2 8\n") {
		t.Errorf("log lacks the FILE lines:\n%s", tr.read("Makeflow.makeflowlog"))
	}
	// The commands were announced.
	if !strings.Contains(tr.out.String(), "cat a.txt b.txt > sub/dir/c.txt\n") {
		t.Errorf("messages:\n%s", tr.out.String())
	}
}

func TestRunKeepsGoingAfterAFailure(t *testing.T) {
	tr := newTestRun(t, `
bad.txt:
	echo x >> runs; echo partial > bad.txt; echo "something broke" >&2; exit 3
after-bad.txt: bad.txt
	echo y >> runs; cp bad.txt after-bad.txt
slow.txt:
	echo z >> runs; sleep 0.3; echo ok > slow.txt
after-slow.txt: slow.txt
	echo w >> runs; cp slow.txt after-slow.txt
`)
	rep, err := tr.run(context.Background(), Options{})
	var runErr *FailedError
	if !errors.As(err, &runErr) {
		t.Fatalf("Run error = %v, want a *FailedError", err)
	}
	// Everything that could run did, once; what needs bad.txt did not.
	if got := tr.runs(); !slices.Equal(got, []string{"w", "x", "z"}) {
		t.Errorf("ran %v", got)
	}
	if !tr.exists("after-slow.txt") || tr.exists("after-bad.txt") {
		t.Error("after-slow.txt should exist and after-bad.txt should not")
	}
	if len(rep.Failures) != 1 || rep.Failures[0].Rule.ID != 0 || rep.Failures[0].Result.ExitCode != 3 || rep.Failures[0].Attempts != 1 {
		t.Fatalf("failures = %+v", rep.Failures)
	}
	if len(rep.Blocked) != 1 || rep.Blocked[0].ID != 1 {
		t.Errorf("blocked = %v", rep.Blocked)
	}
	msg := err.Error()
	for _, want := range []string{"1 of 4 rules failed; 1 rule that needs its outputs did not run", "rule 0 (" + tr.path + ":2:1) failed: exit status 3",
		"something broke", "partial outputs moved to makeflow.failed.0"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q\nlacks %q", msg, want)
		}
	}
	// The partial output was moved aside, not left to be taken for a result.
	if tr.exists("bad.txt") || tr.read("makeflow.failed.0/bad.txt") != "partial\n" {
		t.Error("partial output not moved to makeflow.failed.0")
	}
	lines := tr.logLines()
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "# FAILED ") {
		t.Errorf("log ends with %q", last)
	}
	if sts := tr.states()[0]; !slices.Equal(sts, []RuleState{Running, Failed}) {
		t.Errorf("failed rule went through %v (no retry was asked for)", sts)
	}
}

// TestRunWallTime: a rule that runs past its category's WALL_TIME is
// stopped and reported as such; one within it, and rules without a
// limit, are not touched.
func TestRunWallTime(t *testing.T) {
	tr := newTestRun(t, `
.MAKEFLOW CATEGORY slow
.MAKEFLOW WALL_TIME 1
hangs.txt:
	echo started > hangs.txt; sleep 60
quick.txt:
	echo ok > quick.txt
.MAKEFLOW CATEGORY default
unlimited.txt:
	sleep 1.5; echo ok > unlimited.txt
`)
	start := time.Now()
	rep, err := tr.run(context.Background(), Options{})
	var runErr *FailedError
	if !errors.As(err, &runErr) {
		t.Fatalf("Run error = %v, want a *FailedError", err)
	}
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Errorf("the run took %v: the hanging rule was not stopped at its WALL_TIME", elapsed)
	}
	if len(rep.Failures) != 1 || rep.Failures[0].Rule.ID != 0 {
		t.Fatalf("failures = %+v, want rule 0 only", rep.Failures)
	}
	if msg := err.Error(); !strings.Contains(msg, "stopped after running past its WALL_TIME of 1s") {
		t.Errorf("error %q does not say the rule ran past its WALL_TIME", msg)
	}
	if tr.read("quick.txt") != "ok\n" || tr.read("unlimited.txt") != "ok\n" {
		t.Error("the rules within their limits did not finish")
	}
}

func TestRunRetries(t *testing.T) {
	// The command succeeds on its third attempt.
	const src = `
out:
	n=$$(cat count 2>/dev/null || echo 0); n=$$((n+1)); echo $$n > count; test $$n -ge 3 && touch out
`
	t.Run("enough retries", func(t *testing.T) {
		tr := newTestRun(t, src)
		rep := tr.mustRun(Options{Retries: 2})
		if tr.read("count") != "3\n" || rep.Ran != 1 {
			t.Errorf("count = %q, report %+v", tr.read("count"), rep)
		}
		want := []RuleState{Running, Failed, Waiting, Running, Failed, Waiting, Running, Complete}
		if got := tr.states()[0]; !slices.Equal(got, want) {
			t.Errorf("states %v, want %v", got, want)
		}
		if msgs := tr.out.String(); !strings.Contains(msgs, "trying again (attempt 2 of 3)\n") ||
			!strings.Contains(msgs, "trying again (attempt 3 of 3)\n") || strings.Contains(msgs, "attempt 4") {
			t.Errorf("messages:\n%s", tr.out.String())
		}
	})
	t.Run("too few", func(t *testing.T) {
		tr := newTestRun(t, src)
		rep, err := tr.run(context.Background(), Options{Retries: 1})
		if err == nil || tr.read("count") != "2\n" || rep.Failures[0].Attempts != 2 {
			t.Errorf("err %v, count %q", err, tr.read("count"))
		}
		if !strings.Contains(err.Error(), "(after 2 attempts)") {
			t.Errorf("error %q", err)
		}
	})
}

func TestRunChecksOutputs(t *testing.T) {
	tr := newTestRun(t, "made missing:\n\ttouch made\n")
	rep, err := tr.run(context.Background(), Options{})
	if err == nil || !strings.Contains(err.Error(), "the command succeeded but did not create missing") {
		t.Fatalf("error = %v", err)
	}
	if rep.Failures[0].SavedIn != "makeflow.failed.0" || !tr.exists("makeflow.failed.0/made") {
		t.Errorf("failure %+v", rep.Failures[0])
	}
}

func TestRunReportsStructuralErrors(t *testing.T) {
	tr := newTestRun(t, "a: missing.txt\n\ttouch a\nb: b\n\ttrue\n")
	_, err := tr.run(context.Background(), Options{})
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("error = %v, want two positioned errors", err)
	}
	if tr.exists("Makeflow.makeflowlog") || tr.exists("a") {
		t.Error("something ran or was logged")
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	tr := newTestRun(t, "fast:\n\ttouch fast\nslow: fast\n\tsleep 30; touch slow\nlast: slow\n\ttouch last\n")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !strings.Contains(tr.out.String(), "sleep 30") {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	rep, err := tr.run(ctx, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want one wrapping context.Canceled", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Error("the running command was not stopped")
	}
	if rep.Counts.Complete != 1 || rep.Counts.Aborted != 1 {
		t.Errorf("counts %+v", rep.Counts)
	}
	lines := tr.logLines()
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "# ABORTED ") {
		t.Errorf("log ends with %q", last)
	}
	// A second run finishes the job without redoing the first rule.
	tr.write("Makeflow", "fast:\n\ttouch fast; echo fast >> runs\nslow: fast\n\ttouch slow; echo slow >> runs\nlast: slow\n\ttouch last; echo last >> runs\n")
	rep = tr.mustRun(Options{})
	if got := tr.runs(); !slices.Equal(got, []string{"last", "slow"}) || rep.Skipped != 1 {
		t.Errorf("second run ran %v, skipped %d", got, rep.Skipped)
	}
}

func TestRunRecovery(t *testing.T) {
	const src = `
f1: input
	echo 1 >> runs; cat input > f1
f2: f1
	echo 2 >> runs; cat f1 > f2; echo 2 >> f2
f3: f2
	echo 3 >> runs; cat f2 > f3; echo 3 >> f3
other: input2
	echo o >> runs; cat input2 > other
`
	tests := []struct {
		name   string
		change func(tr *testRun)
		reran  []string
	}{
		{"nothing changed", func(*testRun) {}, nil},
		{"an output deleted", func(tr *testRun) { os.Remove(filepath.Join(tr.dir, "f2")) }, []string{"2", "3"}},
		{"an input changed", func(tr *testRun) { tr.write("input2", "new\n") }, []string{"o"}},
		{"an intermediate file changed", func(tr *testRun) { tr.write("f1", "edited\n") }, []string{"2", "3"}},
		{"the log lost its end", func(tr *testRun) {
			lines := tr.logLines()
			// Keep everything up to the completion of the first rule to
			// complete, and a torn half line.
			var keep []string
			for _, l := range lines {
				keep = append(keep, l)
				if f := strings.Fields(l); len(f) == 10 && f[2] == "2" {
					break
				}
			}
			tr.write("Makeflow.makeflowlog", strings.Join(keep, "\n")+"\n1795326878 1 ")
		}, nil}, // filled in below: everything but the first completed rule
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTestRun(t, src)
			tr.write("input", "in\n")
			tr.write("input2", "in2\n")
			tr.mustRun(Options{Local: Limits{Jobs: 1}})
			first := tr.runs()
			firstDone := ""
			for _, l := range tr.logLines() {
				if f := strings.Fields(l); len(f) == 10 && f[2] == "2" {
					firstDone = f[1]
					break
				}
			}
			// Make sure modification times move past the log's.
			time.Sleep(20 * time.Millisecond)
			os.Remove(filepath.Join(tr.dir, "runs"))
			tt.change(tr)
			rep := tr.mustRun(Options{Local: Limits{Jobs: 1}})
			reran := tt.reran
			if tt.name == "the log lost its end" {
				for _, r := range first {
					name := map[string]string{"1": "0", "2": "1", "3": "2", "o": "3"}[r]
					if name != firstDone {
						reran = append(reran, r)
					}
				}
				slices.Sort(reran)
			}
			if got := tr.runs(); !slices.Equal(got, reran) {
				t.Errorf("reran %v, want %v\nmessages:\n%s", got, reran, tr.out.String())
			}
			if rep.Ran != len(reran) || rep.Skipped != 4-len(reran) {
				t.Errorf("report ran %d skipped %d", rep.Ran, rep.Skipped)
			}
			if tr.read("f3") != "in\n2\n3\n" && tt.name != "an intermediate file changed" {
				t.Errorf("f3 = %q", tr.read("f3"))
			}
		})
	}
}

func TestRunRecoveryMessages(t *testing.T) {
	tr := newTestRun(t, "a: in\n\tcp in a\nb: a\n\tcp a b\n")
	tr.write("in", "1\n")
	tr.mustRun(Options{})
	time.Sleep(20 * time.Millisecond)
	tr.write("in", "2\n")
	tr.out = testutil.SyncBuffer{}
	tr.mustRun(Options{})
	msgs := tr.out.String()
	for _, want := range []string{
		"recovering from " + tr.path + ".makeflowlog: 0 of 2 rules already done",
		"rule 0 (" + tr.path + ":1:1) must run again: its input in changed since it ran",
		"deleted a\n", "deleted b\n",
	} {
		if !strings.Contains(msgs, want) {
			t.Errorf("messages lack %q:\n%s", want, msgs)
		}
	}
	if tr.read("b") != "2\n" {
		t.Errorf("b = %q", tr.read("b"))
	}
}

func TestRunDamagedLog(t *testing.T) {
	tr := newTestRun(t, "a:\n\ttouch a\n")
	tr.write("Makeflow.makeflowlog", "# STARTED 1\n1 0 1 5 0 1 0 0 0 1\nthis is not a log line\n")
	_, err := tr.run(context.Background(), Options{})
	if err == nil || !strings.Contains(err.Error(), tr.path+".makeflowlog:3: malformed line") {
		t.Errorf("error = %v", err)
	}
}

func TestRunEnvironment(t *testing.T) {
	tr := newTestRun(t, `
VAR0=0
VAR1=1
export VAR1
out.0:
	echo "[$$VAR0][$$VAR1][$$CORES][$$OMP_NUM_THREADS]" > out.0
out.1:
VAR1=one
	echo "[$$VAR1]" > out.1
out.2:
	echo "[$$PATH]" > out.2
`)
	tr.mustRun(Options{})
	if got := tr.read("out.0"); got != "[][1][1][1]\n" {
		t.Errorf("out.0 = %q", got)
	}
	if got := tr.read("out.1"); got != "[one]\n" {
		t.Errorf("out.1 = %q", got)
	}
	if got := tr.read("out.2"); got != "["+os.Getenv("PATH")+"]\n" {
		t.Errorf("out.2 = %q", got)
	}
}

func TestRunRemoteRenaming(t *testing.T) {
	tr := newTestRun(t, "out.1 -> out.txt: input.txt -> input.1\n\tcat input.1 > out.txt; ls > listing.txt; cp listing.txt out.txt.ls\n"+
		"final: out.1\n\tcat out.1 > final\n")
	tr.write("input.txt", "data\n")
	tr.write("unrelated", "x")
	tr.mustRun(Options{})
	if tr.read("final") != "data\n" {
		t.Errorf("final = %q", tr.read("final"))
	}
	// The command saw only its own files, and left nothing behind.
	matches, _ := filepath.Glob(filepath.Join(tr.dir, ".makeflow-sandbox-*"))
	if len(matches) != 0 || tr.exists("out.txt") || tr.exists("listing.txt") {
		t.Errorf("sandbox leftovers: %v", matches)
	}
}

func TestRunStderrTailIsBounded(t *testing.T) {
	tr := newTestRun(t, "out:\n\tseq 1 5000 >&2; exit 1\n")
	rep, err := tr.run(context.Background(), Options{})
	if err == nil {
		t.Fatal("no error")
	}
	tail := rep.Failures[0].Result.Stderr
	if len(tail) > stderrTail || !bytes.HasSuffix(tail, []byte("4999\n5000\n")) {
		t.Errorf("tail has %d bytes, ends %q", len(tail), tail[max(0, len(tail)-20):])
	}
	if !strings.Contains(err.Error(), "stderr: 4996\n            4997") {
		t.Errorf("error = %q", err)
	}
	// The whole stream still reached the command's stderr.
	if !strings.Contains(tr.jobOut.String(), "\n1\n2\n3\n") && !strings.HasPrefix(tr.jobOut.String(), "1\n2\n3\n") {
		t.Errorf("stderr was not passed through")
	}
}

func TestDryRun(t *testing.T) {
	tr := newTestRun(t, "export G=v a\na: in\n\tcat in > a\nb c: a\n\tLOCAL cp a b; cp a c\nr->s: a->x\n\tcp x s\n")
	tr.write("in", "1")
	w, err := ParseFile(tr.path, []string{})
	if err != nil {
		t.Fatal(err)
	}
	var script bytes.Buffer
	d := NewDryRun(&script)
	rep, err := Run(context.Background(), w, Options{Dir: tr.dir, Executor: d, DryRun: true, Local: Limits{Jobs: 4}})
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := `#!/bin/sh
# Dry run: the commands that would run, in order.
set -e

# rule 0 (` + tr.path + `:2:1) makes a
export OMP_NUM_THREADS=1
export CORES=1
export G='v a'
cat in > a

# rule 1 (` + tr.path + `:4:1) makes b c
cp a b; cp a c

# rule 2 (` + tr.path + `:6:1) makes r
# runs in a sandbox: a -> x, s -> r
cp x s
`
	if script.String() != want {
		t.Errorf("script:\n%s\nwant:\n%s", script.String(), want)
	}
	if rep.Ran != 3 || tr.exists("a") || tr.exists("Makeflow.makeflowlog") {
		t.Errorf("dry run ran something: report %+v", rep)
	}
}

func TestClean(t *testing.T) {
	const src = `MAKEFLOW_INPUTS=in
MAKEFLOW_OUTPUTS=final
mid: in
	cp in mid
final: mid
	cp mid final
dir/x: in
	cp in dir/x
bad:
	echo partial > bad; false
`
	tests := []struct {
		mode          CleanMode
		gone, staying []string
	}{
		{CleanAll, []string{"mid", "final", "dir/x", "makeflow.failed.3", "Makeflow.makeflowlog"}, []string{"in", "Makeflow", "dir"}},
		{CleanOutputs, []string{"final"}, []string{"in", "mid", "dir/x", "Makeflow.makeflowlog"}},
		{CleanIntermediates, []string{"mid", "dir/x"}, []string{"in", "final", "Makeflow.makeflowlog"}},
	}
	for _, tt := range tests {
		tr := newTestRun(t, src)
		tr.write("in", "1\n")
		if _, err := tr.run(context.Background(), Options{}); err == nil {
			t.Fatal("the failing rule did not fail")
		}
		w, err := ParseFile(tr.path, []string{})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := Clean(w, CleanOptions{Mode: tt.mode, Dir: tr.dir, Out: &out}); err != nil {
			t.Fatal(err)
		}
		for _, f := range tt.gone {
			if tr.exists(f) {
				t.Errorf("mode %d: %s still exists", tt.mode, f)
			}
			if !strings.Contains(out.String(), "deleted "+f+"\n") && !strings.HasSuffix(f, "makeflowlog") {
				t.Errorf("mode %d: no 'deleted %s' line in\n%s", tt.mode, f, out.String())
			}
		}
		for _, f := range tt.staying {
			if !tr.exists(f) {
				t.Errorf("mode %d: %s was removed", tt.mode, f)
			}
		}
	}
}

func TestCleanNeverRemovesTheWorkflowOrItsDirectory(t *testing.T) {
	tr := newTestRun(t, ". ..: in\n\ttrue\nMakeflow.copy: Makeflow\n\tcp Makeflow Makeflow.copy\n")
	w, err := ParseFile(tr.path, []string{})
	if err != nil {
		t.Fatal(err)
	}
	tr.write("Makeflow.copy", "x")
	var out bytes.Buffer
	if err := Clean(w, CleanOptions{Dir: tr.dir, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if !tr.exists("Makeflow") || tr.exists("Makeflow.copy") {
		t.Errorf("clean removed the wrong things:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "warning: not removing .:") {
		t.Errorf("no warning about '.':\n%s", out.String())
	}
}

func TestWriteDot(t *testing.T) {
	w := mustParse(t, "a: in\n\tcat in > a\nb: a\n\tLOCAL cp a \"b\"\n")
	var b bytes.Buffer
	if err := WriteDot(&b, w); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"digraph \"s.mf\" {",
		`F0 [label="a", shape=ellipse];`,
		`F1 [label="in", shape=ellipse, style=filled`,
		`R0 [label="0: cat in > a", shape=box];`,
		`R1 [label="1: LOCAL cp a \"b\"", shape=box];`,
		"F1 -> R0;", "R0 -> F0;", "F0 -> R1;", "R1 -> F2;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("dot output lacks %q:\n%s", want, got)
		}
	}
	if !strings.HasSuffix(got, "}\n") {
		t.Errorf("dot output does not end the graph")
	}
}

// BenchmarkRunFlat runs the benchmark workflow of bench/makeflow_bench.sh
// in-process: n trivial rules and one rule gathering their outputs, two at
// a time. Its time per op is dominated by starting /bin/sh n times; what
// is left is the engine's own cost.
func BenchmarkRunFlat(b *testing.B) {
	const n = 500
	var src strings.Builder
	for i := range n {
		fmt.Fprintf(&src, "out_%d:\n\techo %d > out_%d\n", i, i, i)
	}
	src.WriteString("gather:")
	for i := range n {
		fmt.Fprintf(&src, " out_%d", i)
	}
	src.WriteString("\n\tcat out_* > gather\n")
	benchmarkRun(b, src.String(), n+1)
}

// BenchmarkRunChain runs the chain workflow of bench/makeflow_bench.sh
// in-process: n rules, each copying the previous rule's output, so that
// one runs at a time and the time per op is the latency from one rule's
// exit to the next one's start as much as the processes themselves.
func BenchmarkRunChain(b *testing.B) {
	const n = 500
	var src strings.Builder
	src.WriteString("c_1:\n\techo 1 > c_1\n")
	for i := 2; i <= n; i++ {
		fmt.Fprintf(&src, "c_%d: c_%d\n\tcp c_%d c_%d\n", i, i-1, i-1, i)
	}
	benchmarkRun(b, src.String(), n)
}

// benchmarkRun runs the workflow src of rules rules, two at a time, and
// reports the engine's own CPU time per rule (its children's excluded).
func benchmarkRun(b *testing.B, src string, rules int) {
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		path := filepath.Join(dir, "flat.mf")
		if err := os.WriteFile(path, []byte(src), 0o666); err != nil {
			b.Fatal(err)
		}
		w, err := ParseFile(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		l, err := NewLocal(LocalOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Run(context.Background(), w, Options{Dir: dir, Executor: l, Local: Limits{Jobs: 2}}); err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N*rules)/1e3, "cpu-µs/rule")
}

func TestRunRefusesALockedLog(t *testing.T) {
	tr := newTestRun(t, "a:\n\ttouch a\n")
	other, err := openLog(tr.path + ".makeflowlog")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.run(context.Background(), Options{})
	if err == nil || !strings.Contains(err.Error(), "another makeflow is running this workflow") || tr.exists("a") {
		t.Errorf("second run: %v", err)
	}
	other.close()
	tr.mustRun(Options{})
}

// A run killed between logging that a rule's outputs are expected and
// logging that the rule started may still have started it: its outputs
// are removed before it runs again, so that an appending command does not
// append twice.
func TestRunRemovesOutputsOfRulesThatMayHaveStarted(t *testing.T) {
	tr := newTestRun(t, "out:\n\techo line >> out\n")
	tr.write("Makeflow.makeflowlog", "# STARTED 1\n# FILE 2 out 1 1073741824\n")
	tr.write("out", "partial")
	tr.mustRun(Options{})
	if got := tr.read("out"); got != "line\n" {
		t.Errorf("out = %q", got)
	}
	if !strings.Contains(tr.out.String(), "deleted out\n") {
		t.Errorf("messages:\n%s", tr.out.String())
	}
}
