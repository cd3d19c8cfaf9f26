package makeflowcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// These tests run Debian's CCTools makeflow (the reference) next to ours.
// They need /usr/bin/makeflow by that path: under `make test` the makeflow
// found in PATH is ours.
const cctoolsMakeflow = "/usr/bin/makeflow"

func needCCTools(t *testing.T) {
	t.Helper()
	testutil.NeedCommand(t, cctoolsMakeflow, "apt-get install coop-computing-tools openmpi-bin")
}

// TestSameResultsAsCCTools runs workflows from CCTools' own syntax tests
// with both implementations and compares every file they make.
func TestSameResultsAsCCTools(t *testing.T) {
	needCCTools(t)
	workflows := map[string]string{
		// TR_makeflow_020_syntax_variable_scope, with rule-local variables
		// at the start of the line (this CCTools release rejects "\t@")
		// and no comment after VAR1's value (it misreads the next lines).
		"variable_scope": "VAR1 = 1\nout.0:\nVAR1=0\n\techo ${VAR1} > out.0\n\nout.1:\n\techo ${VAR1} > out.1\n\n" +
			"out.2:\nVAR1+=2\n\techo ${VAR1} > out.2\n\nout.3:\nVAR2+=0\n\techo ${VAR2} > out.3\n\nout.4:\nVAR2+=1\n\techo ${VAR2} > out.4\n\n" +
			"out.all: out.0 out.1 out.2 out.3 out.4\n\tcat out.0 out.1 out.2 out.3 out.4 > out.all\n",
		// TR_makeflow_021_export, plus a rule-local override of an exported variable.
		"export": "\nMAKEFLOW_INPUTS=\"\"\nMAKEFLOW_OUTPUTS=\"out.all\"\n\nVAR0=0\nVAR1=1\nexport VAR1\n\nout.0:\n\techo \\$VAR0 > out.0\n\n" +
			"out.1:\n\techo $VAR1 > out.1\n\nout.2:\nVAR1=2\n\techo $VAR1 > out.2\n\nout.3:\n\techo \\$ > out.3\t    # Display $\n\n" +
			"out.4:\n\techo \\\\\\$ > out.4\n\nout.5:\nVAR1=5\n\techo \\$VAR1 > out.5\n\n" +
			"out.all: out.0 out.1 out.2 out.3 out.4 out.5\n\tcat out.0 out.1 out.2 out.3 out.4 out.5 > out.all\n",
		// TR_makeflow_025_quoting.
		"quotes": "\"A\":\n\t/bin/echo A > A\n\n'B':\n\t/bin/echo B > B\n\nVAR_CD=C D\n$(VAR_CD) E:\n\t/bin/echo C > C; /bin/echo D > D; /bin/echo E > E\n\n" +
			"F \"$(VAR_CD)\" G:\n\t/bin/echo \"$(VAR_CD) \\'$(VAR_CD)\\' \\\\\\\"$(VAR_CD)\\\\\\\"\" > \"$(VAR_CD)\"; /bin/echo F > F; /bin/echo G > G \n\n" +
			"VAR_HK=\"H I\" \"J K\"\n$(VAR_HK):\n    /bin/echo H I > \"H I\"; /bin/echo J K > \"J K\"\n",
		// (TR_makeflow_020_syntax_dashes is not compared: this CCTools
		// release rejects "a--b"; parse_test.go covers it.)
		// TR_makeflow_020_line_continuation.
		"line_continuation": "\nMAKEFLOW_INPUTS=\nMAKEFLOW_OUTPUTS=out2\n\nout1:\n\techo \"One\" \"Two\" \\\n    \"Three\" > out1\n\n\nout2: out1\n\tgrep \"One Two Three\" out1 > out2 \\\n\n",
		// TR_makeflow_020_category_variable_scope.
		"category_scope": ".MAKEFLOW CATEGORY one\nout_rule_1:\n    /bin/echo \\${CATEGORY} > out_rule_1\n\n.MAKEFLOW CATEGORY two\nout_rule_2a:\n    /bin/echo ${CATEGORY} > out_rule_2a\n\n" +
			"out_rule_2b:\n    /bin/echo \\${CATEGORY} > out_rule_2b\n\n.MAKEFLOW CATEGORY three\nout_rule_3:\n    /bin/echo ${CATEGORY} > out_rule_3\n",
		// LOCAL with redirections first (TR_makeflow_020_syntax_meta).
		"meta": "correct.makeflow: typo.makeflow\n\tLOCAL < typo.makeflow > correct.makeflow sed \"s!capital!capitol!g\"\n",
		// The JSON form (TR_makeflow_json_simple, _env, _local).
		"simple.json": `{"rules": [{"command": "echo A > A", "outputs": ["A"]}, {"command": "echo B > B", "outputs": ["B"]},
			{"command": "echo C > C && cat A B >> C", "outputs": ["C"], "inputs": ["A", "B"]},
			{"command": "sort C > D", "outputs": ["D"], "inputs": ["C"]}, {"command": "[ -e C ] && [ -e D ]", "inputs": ["C", "D"]}]}`,
		"env.json": `{"environment": {"A": "a", "B": "b"}, "rules": [{"command": "echo $A > A", "outputs": ["A"]},
			{"command": "echo $B > B", "outputs": ["B"], "environment": {"B": "x"}},
			{"inputs": ["A", "B"], "command": "[ \"$A\" = $(cat A) ] && [ x = $(cat B) ] && echo ok > ok", "outputs": ["ok"]}]}`,
		"local.json": `{"rules": [{"command": "echo A > A", "local_job": true, "outputs": ["A"]},
			{"command": "cat A > B && echo B >> B", "inputs": ["A"], "outputs": ["B"], "local_job": true}]}`,
	}
	for name, src := range workflows {
		t.Run(name, func(t *testing.T) {
			ours, theirs := t.TempDir(), t.TempDir()
			args := []string{"w.mf"}
			if strings.HasSuffix(name, ".json") {
				args = []string{"--json", "w.json"}
			}
			for _, dir := range []string{ours, theirs} {
				writeFiles(t, dir, map[string]string{args[len(args)-1]: src, "typo.makeflow": "capital.jpg: capital.360.jpg\n"})
			}
			if r := mf(t, ours, args...); r.code != 0 {
				t.Fatalf("ours: %v", r)
			}
			if r := runProgram(t, theirs, cctoolsMakeflow, args...); r.code != 0 {
				t.Fatalf("CCTools: %v", r)
			}
			got, want := madeFiles(t, ours), madeFiles(t, theirs)
			if !slices.Equal(keys(got), keys(want)) {
				t.Fatalf("ours made %q, CCTools made %q", keys(got), keys(want))
			}
			for f, content := range want {
				if got[f] != content {
					t.Errorf("%s: ours %q, CCTools %q", f, got[f], content)
				}
			}
		})
	}
}

// madeFiles returns the contents of the files in dir other than the
// workflow, its inputs and logs.
func madeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if name == "typo.makeflow" || strings.HasPrefix(name, "w.") || e.IsDir() {
			continue
		}
		files[name] = readFile(t, filepath.Join(dir, name))
	}
	return files
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// copyChain is CCTools' TR_makeflow_restart workflow: file.1 is copied
// along a chain to file.10, each rule noting that it ran.
func copyChain() string {
	var b strings.Builder
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "file.%d: file.%d\n\techo %d >> runs; cp file.%d file.%d\n", i+1, i, i, i, i+1)
	}
	return b.String()
}

// TestLogsAreInterchangeable finishes a workflow with one implementation
// and runs it again with the other: both read the other's log, the rules
// --log-verbose wrote into it too, and find nothing left to do.
func TestLogsAreInterchangeable(t *testing.T) {
	needCCTools(t)
	tests := []struct {
		name          string
		first, second string
	}{
		{"CCTools reads ours", binary, cctoolsMakeflow},
		{"we read CCTools'", cctoolsMakeflow, binary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"w.mf": copyChain(), "file.1": "data\n"})
			if r := runProgram(t, dir, tt.first, "--log-verbose", "w.mf"); r.code != 0 {
				t.Fatalf("first run: %v", r)
			}
			if log := readFile(t, filepath.Join(dir, "w.mf.makeflowlog")); !strings.Contains(log, "# PARENTS\t1\t0\n") || !strings.Contains(log, "# TARGETS\t8\tfile.10\n") {
				t.Errorf("--log-verbose wrote no rules into the log:\n%s", log)
			}
			os.Remove(filepath.Join(dir, "runs"))
			r := runProgram(t, dir, tt.second, "w.mf")
			if r.code != 0 || !strings.Contains(r.out, "nothing left to do.") || exists(filepath.Join(dir, "runs")) {
				t.Errorf("second run: %v", r)
			}
		})
	}
}

// TestRecoveryLikeCCTools repeats TR_makeflow_restart with both
// implementations: after an output is deleted or an intermediate file
// changed, both rerun the same rules.
func TestRecoveryLikeCCTools(t *testing.T) {
	needCCTools(t)
	tests := []struct {
		name   string
		change func(dir string)
		want   []string // rules that run again
	}{
		{"file.5 deleted", func(dir string) { os.Remove(filepath.Join(dir, "file.5")) }, []string{"4", "5", "6", "7", "8", "9"}},
		{"file.2 modified", func(dir string) {
			// CCTools compares modification times in whole seconds.
			time.Sleep(1100 * time.Millisecond)
			writeFiles(t, dir, map[string]string{"file.2": "changed\n"})
		}, []string{"2", "3", "4", "5", "6", "7", "8", "9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, program := range []string{binary, cctoolsMakeflow} {
				dir := t.TempDir()
				writeFiles(t, dir, map[string]string{"w.mf": copyChain(), "file.1": "data\n"})
				if r := runProgram(t, dir, program, "w.mf"); r.code != 0 {
					t.Fatalf("%s: first run: %v", program, r)
				}
				os.Remove(filepath.Join(dir, "runs"))
				tt.change(dir)
				if r := runProgram(t, dir, program, "w.mf"); r.code != 0 {
					t.Fatalf("%s: second run: %v", program, r)
				}
				got := strings.Fields(readFile(t, filepath.Join(dir, "runs")))
				slices.Sort(got)
				if !slices.Equal(got, tt.want) {
					t.Errorf("%s reran %v, want %v", program, got, tt.want)
				}
			}
		})
	}
}

// TestCleanLikeCCTools runs every clean mode with both implementations on
// the same finished workflow, with and without MAKEFLOW_OUTPUTS: the same
// files remain.
func TestCleanLikeCCTools(t *testing.T) {
	needCCTools(t)
	const rules = "mid log.txt: in\n\tcat in > mid; echo made > log.txt\nfinal: mid\n\tcat mid > final\nside:\n\techo s > side\n"
	for _, decl := range []string{"", "MAKEFLOW_OUTPUTS=final\n", "MAKEFLOW_OUTPUTS=\"\"\n"} {
		for _, mode := range []string{"all", "outputs", "intermediates"} {
			t.Run(fmt.Sprintf("%q/%s", strings.TrimSpace(decl), mode), func(t *testing.T) {
				var remaining [2][]string
				for i, program := range []string{binary, cctoolsMakeflow} {
					dir := t.TempDir()
					writeFiles(t, dir, map[string]string{"w.mf": decl + rules, "in": "data\n"})
					if r := runProgram(t, dir, program, "w.mf"); r.code != 0 {
						t.Fatalf("%s: run: %v", program, r)
					}
					if r := runProgram(t, dir, program, "--clean="+mode, "w.mf"); r.code != 0 {
						t.Fatalf("%s: clean: %v", program, r)
					}
					entries, err := os.ReadDir(dir)
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range entries {
						if !strings.HasSuffix(e.Name(), ".batchlog") {
							remaining[i] = append(remaining[i], e.Name())
						}
					}
				}
				if !slices.Equal(remaining[0], remaining[1]) {
					t.Errorf("after --clean=%s ours left %q, CCTools left %q", mode, remaining[0], remaining[1])
				}
			})
		}
	}
}
