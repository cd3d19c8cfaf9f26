package makeflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRunAfterTheLogWasCut cuts the log of a finished run after each of its
// lines in turn (as a machine crash between two syncs can), and runs again:
// no rule runs on top of what an earlier instance left (the commands append,
// so that would double their outputs), whatever the log lost.
func TestRunAfterTheLogWasCut(t *testing.T) {
	const src = "a: in\n\tcat in >> a\nb: a\n\tcat a >> b\n"
	full := newTestRun(t, src)
	full.write("in", "x\n")
	full.mustRun(Options{})
	lines := full.logLines()
	for n := 0; n <= len(lines); n++ {
		t.Run(fmt.Sprintf("%d lines", n), func(t *testing.T) {
			tr := newTestRun(t, src)
			tr.write("in", "x\n")
			tr.mustRun(Options{})
			tr.write("Makeflow.makeflowlog", strings.Join(tr.logLines()[:n], "\n")+"\n")
			tr.mustRun(Options{})
			for _, f := range []string{"in", "a", "b"} {
				if got := tr.read(f); got != "x\n" {
					t.Errorf("%s = %q after the re-run\nmessages:\n%s", f, got, tr.out.String())
				}
			}
		})
	}
}

// A file in the way of a rule that the log does not say makeflow made is
// moved aside, never deleted: it may be the only copy of something. An
// earlier stale directory is kept.
func TestRunMovesUnknownFilesAside(t *testing.T) {
	tr := newTestRun(t, "out:\n\techo new >> out\n")
	tr.write("out", "precious\n")
	tr.write("makeflow.stale.0/out", "older\n")
	tr.mustRun(Options{})
	if got := tr.read("out"); got != "new\n" {
		t.Errorf("out = %q", got)
	}
	if got := tr.read("makeflow.stale.0.1/out"); got != "precious\n" {
		t.Errorf("the file in the way was not moved aside: %q", got)
	}
	if got := tr.read("makeflow.stale.0/out"); got != "older\n" {
		t.Errorf("an earlier stale directory was changed: %q", got)
	}
	want := "moved out to makeflow.stale.0.1/: rule 0 (" + tr.path + ":1:1) must run, and the log does not say that this workflow made it\n"
	if !strings.Contains(tr.out.String(), want) {
		t.Errorf("messages lack %q:\n%s", want, tr.out.String())
	}
	w, err := ParseFile(tr.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Clean(w, CleanOptions{Dir: tr.dir}); err != nil {
		t.Fatal(err)
	}
	if tr.exists("makeflow.stale.0") || tr.exists("makeflow.stale.0.1") {
		t.Error("clean left the stale directories")
	}
}

// A rule's output that holds an input (a directory with an input in it) is
// never removed to make way for the rule, even when the log says the rule
// started: the run stops before anything runs, and says why.
func TestRunNeverRemovesAnInput(t *testing.T) {
	tr := newTestRun(t, "out: out/config\n\tcat out/config > out/result\n")
	tr.write("out/config", "settings\n")
	tr.write("Makeflow.makeflowlog", "# STARTED 1\n# FILE 2 out 1 1073741824\n")
	_, err := tr.run(context.Background(), Options{})
	want := "rule 0 (" + tr.path + ":1:1) must run, but its output out holds the input out/config, which makeflow will not remove"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want %q", err, want)
	}
	if got := tr.read("out/config"); got != "settings\n" {
		t.Errorf("out/config = %q", got)
	}
}

// Without MAKEFLOW_OUTPUTS, a workflow's outputs are the files no rule
// reads, as in CCTools.
func TestCleanOutputsAreTheFilesNoRuleReads(t *testing.T) {
	const src = "mid: in\n\tcp in mid\nfinal: mid\n\tcp mid final\nside:\n\techo s > side\n"
	tests := []struct {
		mode          CleanMode
		gone, staying []string
	}{
		{CleanOutputs, []string{"final", "side"}, []string{"in", "mid", "Makeflow.makeflowlog"}},
		{CleanIntermediates, []string{"mid"}, []string{"in", "final", "side", "Makeflow.makeflowlog"}},
	}
	for _, tt := range tests {
		tr := newTestRun(t, src)
		tr.write("in", "1\n")
		tr.mustRun(Options{})
		w, err := ParseFile(tr.path, []string{})
		if err != nil {
			t.Fatal(err)
		}
		if err := Clean(w, CleanOptions{Mode: tt.mode, Dir: tr.dir}); err != nil {
			t.Fatal(err)
		}
		for _, f := range tt.gone {
			if tr.exists(f) {
				t.Errorf("mode %d: %s still exists", tt.mode, f)
			}
		}
		for _, f := range tt.staying {
			if !tr.exists(f) {
				t.Errorf("mode %d: %s was removed", tt.mode, f)
			}
		}
	}
}

// Clean takes the log's lock as a run does: while another process holds it
// — here a child that inherited the locked descriptor from a process that
// has let go of its own, as the helper that outlives a killed makeflow does
// — clean removes nothing and names the holder.
func TestCleanRefusesALockedLog(t *testing.T) {
	tr := newTestRun(t, "a:\n\ttouch a\n")
	tr.mustRun(Options{})
	logPath := tr.path + ".makeflowlog"
	f, err := openLocked(logPath, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "1000")
	holder.ExtraFiles = []*os.File{f}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	defer holder.Process.Kill()
	f.Close()

	w, err := ParseFile(tr.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Clean(w, CleanOptions{Dir: tr.dir, Out: &out})
	var locked *LockedError
	if !errors.As(err, &locked) || len(locked.Holders) != 1 || locked.Holders[0].PID != holder.Process.Pid {
		t.Fatalf("clean: %v, want a *LockedError naming process %d", err, holder.Process.Pid)
	}
	want := fmt.Sprintf("clean: nothing was removed: another makeflow is running this workflow: %s is locked by process %d (sleep 1000)", logPath, holder.Process.Pid)
	if err.Error() != want {
		t.Errorf("error = %q\nwant %q", err, want)
	}
	if !tr.exists("a") || !tr.exists("Makeflow.makeflowlog") || out.Len() > 0 {
		t.Errorf("clean removed files while the log was locked:\n%s", out.String())
	}
	if _, err := tr.run(context.Background(), Options{}); !errors.As(err, &locked) {
		t.Errorf("run: %v, want a *LockedError", err)
	}

	holder.Process.Kill()
	holder.Wait()
	if err := Clean(w, CleanOptions{Dir: tr.dir}); err != nil {
		t.Fatal(err)
	}
	if tr.exists("a") || tr.exists("Makeflow.makeflowlog") {
		t.Error("clean did not remove the workflow's files once the log was free")
	}
}

// A clean that finds no log makes none.
func TestCleanLeavesNoLogBehind(t *testing.T) {
	tr := newTestRun(t, "a:\n\ttouch a\n")
	tr.write("a", "")
	w, err := ParseFile(tr.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Clean(w, CleanOptions{Mode: CleanIntermediates, Dir: tr.dir}); err != nil {
		t.Fatal(err)
	}
	if tr.exists("Makeflow.makeflowlog") {
		t.Error("clean left a log")
	}
}
