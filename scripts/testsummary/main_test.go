package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	const pkg = `"Package":"github.com/rightsize/rightsize/batch"`
	for _, tc := range []struct {
		name   string
		events []string
		failed bool
		want   []string
		not    []string
	}{
		{
			name: "a skip is listed with its reason",
			events: []string{
				`{"Action":"run",` + pkg + `,"Test":"TestSlurm"}`,
				`{"Action":"output",` + pkg + `,"Test":"TestSlurm","Output":"=== RUN   TestSlurm\n"}`,
				`{"Action":"output",` + pkg + `,"Test":"TestSlurm","Output":"    slurm_test.go:30: SLURM is not running here: start it with scripts/slurm.sh start\n"}`,
				`{"Action":"output",` + pkg + `,"Test":"TestSlurm","Output":"--- SKIP: TestSlurm (0.00s)\n"}`,
				`{"Action":"skip",` + pkg + `,"Test":"TestSlurm"}`,
				`{"Action":"output",` + pkg + `,"Output":"ok  \tgithub.com/rightsize/rightsize/batch\t0.1s\n"}`,
				`{"Action":"pass",` + pkg + `}`,
				// A package without tests is no skipped test.
				`{"Action":"output","Package":"github.com/rightsize/rightsize/cmd/makeflow","Output":"?   \tgithub.com/rightsize/rightsize/cmd/makeflow\t[no test files]\n"}`,
				`{"Action":"skip","Package":"github.com/rightsize/rightsize/cmd/makeflow"}`,
			},
			want: []string{"ok  \tgithub.com/rightsize/rightsize/batch\t0.1s\n", "[no test files]", "skipped: 1 test\n  batch TestSlurm: SLURM is not running here: start it with scripts/slurm.sh start\n"},
			not:  []string{"=== RUN"},
		},
		{
			name: "a failure shows its output",
			events: []string{
				`{"Action":"output",` + pkg + `,"Test":"TestLocal","Output":"    local_test.go:9: exit 3, want 0\n"}`,
				`{"Action":"fail",` + pkg + `,"Test":"TestLocal"}`,
				`{"Action":"output",` + pkg + `,"Output":"FAIL\tgithub.com/rightsize/rightsize/batch\t0.2s\n"}`,
				`{"Action":"fail",` + pkg + `}`,
			},
			failed: true,
			want:   []string{"local_test.go:9: exit 3, want 0", "FAIL\tgithub.com/rightsize/rightsize/batch"},
		},
		{
			name: "a build failure fails",
			events: []string{
				`{"ImportPath":"github.com/rightsize/rightsize/batch [github.com/rightsize/rightsize/batch.test]","Action":"build-output","Output":"batch/x.go:1:1: syntax error\n"}`,
				`{"ImportPath":"github.com/rightsize/rightsize/batch [github.com/rightsize/rightsize/batch.test]","Action":"build-fail"}`,
			},
			failed: true,
			want:   []string{"batch/x.go:1:1: syntax error"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			failed, err := summarize(strings.NewReader(strings.Join(tc.events, "\n")), &out)
			if err != nil || failed != tc.failed {
				t.Errorf("failed %v, %v; want %v", failed, err, tc.failed)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("output has %q:\n%s", n, out.String())
				}
			}
		})
	}
}
