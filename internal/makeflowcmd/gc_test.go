package makeflowcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// collectMakeflow is CCTools' makeflow/test/syntax/collect.makeflow: each
// rule records how many files its directory holds when it runs.
const collectMakeflow = `
MAKEFLOW_INPUTS=""
MAKEFLOW_OUTPUTS="_collect.7"

_collect.0:
	touch _collect.0 ; ls | wc -l > _collect.0

_collect.1:
	touch _collect.1 ; ls | wc -l > _collect.1

_collect.2:
	touch _collect.2 ; ls | wc -l > _collect.2

_collect.3: _collect.0 _collect.1 _collect.2
	touch _collect.3 ; ls | wc -l > _collect.3

_collect.4: _collect.3
	touch _collect.4 ; ls | wc -l > _collect.4

_collect.5: _collect.3 _collect.4
	touch _collect.5 ; ls | wc -l > _collect.5

_collect.6: _collect.3 _collect.4 _collect.5
	touch _collect.6 ; cat _collect.3 _collect.4 _collect.5 > _collect.6

_collect.7: _collect.6
	touch _collect.7 ; cat _collect.6 > _collect.7 ; ls | wc -l >> _collect.7
`

// TestGarbageCollection is CCTools' tests TR_makeflow_030_gc_*: the files
// each rule sees show when intermediates were deleted, and the counts are
// CCTools' own expectations (its test directory holds a link to makeflow
// beside the workflow and its log; so does this one).
func TestGarbageCollection(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-g", "none"}, "7 8 9 11"},
		{[]string{"-g", "ref_cnt", "-G", "1"}, "7 5 6 5"},
		{[]string{"-g", "on_demand", "-G", "4"}, "7 8 6 8"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"collect.makeflow": collectMakeflow, "makeflow": ""})
			args := append(tt.args, "-j", "1", "collect.makeflow")
			if r := mf(t, dir, args...); r.code != 0 {
				t.Fatalf("makeflow %v: %v", args, r)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "_collect.7"))
			if got := strings.Join(strings.Fields(string(b)), " "); got != tt.want {
				t.Errorf("_collect.7 holds %q, want %q", got, tt.want)
			}
			if tt.args[1] == "none" {
				return
			}
			for i := range 7 {
				if exists(filepath.Join(dir, "_collect."+string(rune('0'+i)))) {
					t.Errorf("intermediate _collect.%d is left after the run", i)
				}
			}
			// Run again: the deleted intermediates are not missing outputs.
			if r := mf(t, dir, "-g", "ref_cnt", "collect.makeflow"); r.code != 0 || !strings.Contains(r.out, "nothing left to do") {
				t.Errorf("second run: %v", r)
			}
			// The result deleted: its rule runs again, and with it the
			// rules that made the intermediates it reads.
			os.Remove(filepath.Join(dir, "_collect.7"))
			if r := mf(t, dir, "-g", "ref_cnt", "collect.makeflow"); r.code != 0 || !exists(filepath.Join(dir, "_collect.7")) {
				t.Errorf("run after deleting the result: %v", r)
			}
		})
	}
}
