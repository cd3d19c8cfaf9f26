package makeflowcmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/testutil"
)

// analyze runs our makeflow_analyze in dir and returns its exit code and
// outputs.
func analyze(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var out, errb bytes.Buffer
	code := AnalyzeMain(context.Background(), args, cmdutil.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// analyzeWorkflows are workflows of several shapes, for makeflow_analyze.
var analyzeWorkflows = map[string]string{
	"diamond.mf": "b c: a\n\tcp a b; cp a c\nd: b\n\tcat b > d\ne: c\n\tcat c > e\nf: d e\n\tcat d e > f\n",
	"fan.mf":     "parts.0 parts.1 parts.2: in.txt split.sh\n\t./split.sh\nout.0: parts.0\n\twc parts.0 > out.0\nout.1: parts.1\n\twc parts.1 > out.1\nout.2: parts.2 /usr/bin/wc\n\twc parts.2 > out.2\nall: out.0 out.1 out.2\n\tcat out.* > all\n",
	"chain.mf":   "X=1\nb: a\n\tcp a b\nc: b\n\tcp b c\nd -> remote: c -> local\n\tcp local remote\n",
	"single.mf":  "out:\n\techo hi > out\n",
	"many.jx":    `{"rules": [{"command": "sort in." + x + " > out." + x, "inputs": ["in." + x], "outputs": ["out." + x]} for x in ["a", "b", "c"]] + [{"command": "cat out.* > all", "inputs": ["out.a", "out.b", "out.c"], "outputs": ["all"]}]}`,
}

// TestAnalyzeAsCCTools: our makeflow_analyze says what CCTools' does of
// each workflow (-i, -I, -O, -k), the files in any order.
func TestAnalyzeAsCCTools(t *testing.T) {
	cctools := testutil.NeedCCTools(t, "makeflow_analyze")
	dir := t.TempDir()
	writeFiles(t, dir, analyzeWorkflows)
	for name := range analyzeWorkflows {
		for _, flag := range []string{"-i", "-I", "-O", "-k"} {
			args := []string{flag, name}
			if strings.HasSuffix(name, ".jx") {
				args = []string{"--jx", flag, name} // CCTools' needs it said
			}
			code, ours, errs := analyze(t, dir, args...)
			if code != 0 {
				t.Errorf("%s %s: exit %d: %s", flag, name, code, errs)
				continue
			}
			cmd := exec.Command(cctools, args...)
			cmd.Dir = dir
			theirs, err := cmd.Output()
			if err != nil {
				t.Fatalf("CCTools' makeflow_analyze %s %s: %v", flag, name, err)
			}
			if a, b := sortedLines(ours), sortedLines(string(theirs)); !slices.Equal(a, b) {
				t.Errorf("%s %s: ours\n%s\nCCTools'\n%s", flag, name, ours, theirs)
			}
		}
	}
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return lines
}

// TestAnalyzeErrors: a workflow in error is reported at its position, exit
// status 1; a missing input is no syntax error; the modes exclude each
// other.
func TestAnalyzeErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"bad.mf":     "a: b\n\tcat b > a\nc d\n",
		"cycle.mf":   "a: b\n\tcp b a\nb: a\n\tcp a b\n",
		"missing.mf": "a: not-here\n\tcat not-here > a\n",
	})
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-k", "bad.mf"}, 1, "bad.mf:3:"},
		{[]string{"-i", "cycle.mf"}, 1, "cycle"},
		{[]string{"-k", "missing.mf"}, 0, "missing.mf: Syntax OK."},
		{[]string{"-I", "missing.mf"}, 0, "not-here"},
		{[]string{"missing.mf"}, 0, ""},
		{[]string{"bad.mf"}, 1, "bad.mf:3:"},
		{[]string{"-k", "-I", "missing.mf"}, cmdutil.ExitUsage, "ask different questions"},
		{[]string{"-k"}, cmdutil.ExitUsage, "./Makeflow does not exist"},
		{[]string{"-b", "bundle", "missing.mf"}, cmdutil.ExitUsage, "unknown shorthand flag: 'b'"},
	} {
		code, out, errs := analyze(t, dir, tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s%s", tc.args, code, tc.code, tc.want, out, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bundle")); err == nil {
		t.Error("-b made a bundle")
	}
}
