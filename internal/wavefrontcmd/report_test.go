package wavefrontcmd_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
)

// TestReport runs an 8×8 Wavefront with --report, here and then as jobs,
// and reads each report in headless Chromium: a bar for every cell (or
// job), and a critical path from the first cell to the last.
func TestReport(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("RIGHTSIZE_CLUSTER", "none")
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
		bars  int
	}{
		// The critical path of an 8×8 wavefront is 15 cells long.
		{"multicore", nil, []string{`<td id="count">64 cells</td>`, "<td>cell (1,1)</td>", "<td>cell (8,8)</td>", "<td>multicore</td>"}, 64},
		// Jobs of 4×4 cells: the critical path is three of the four.
		{"distributed", []string{"-T", "local", "--job-size", "4"},
			[]string{`<td id="count">4 jobs</td>`, "<td>block x1-y1</td>", "<td>block x5-y5</td>", "<td>distributed (local)</td>", "local (2)"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.html")
			args := append(append([]string{"--report", path}, tc.flags...), "builtin:sum", makeRdir(t, 8, 8))
			// The real program: jobs run it.
			out, err := wavefront(t, args...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "wavefront: report in "+path) {
				t.Fatalf("%v:\n%s", err, out)
			}
			dom, shot := testutil.LoadPage(t, (&url.URL{Scheme: "file", Path: path}).String(), "wavefront-report-"+tc.name)
			t.Logf("screenshot: %s", shot)
			for _, want := range append(tc.want, `class="good">completed`) {
				if !strings.Contains(dom, want) {
					t.Errorf("rendered report lacks %q", want)
				}
			}
			if n := strings.Count(dom, `<rect class="task`); n != tc.bars {
				t.Errorf("%d bars, want %d", n, tc.bars)
			}
			if tc.name == "multicore" {
				if n := strings.Count(dom, `<rect class="task ok critical"`); n != 15 {
					t.Errorf("%d cells on the critical path, want 15", n)
				}
			}
		})
	}
	for _, tc := range []struct{ flag, value, want string }{
		{"--report", "/no/such/dir/r.html", "--report /no/such/dir/r.html"},
		{"--http", "localhost", `--http "localhost": not an address`},
	} {
		rdir := makeRdir(t, 2, 2)
		if code, _, errs := runWF(t, tc.flag, tc.value, "builtin:sum", rdir); code != 2 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "resuming") {
			t.Errorf("%s %s: exit %d\n%s", tc.flag, tc.value, code, errs)
		}
		if _, err := os.Stat(filepath.Join(rdir, "R.matrix")); err == nil {
			t.Errorf("%s %s: a usage error started the run", tc.flag, tc.value)
		}
	}
}
