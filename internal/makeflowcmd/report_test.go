package makeflowcmd

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
)

// TestReport runs a workflow with a failing rule and --report, and reads
// the report in headless Chromium: the run's outcome, a bar for every
// rule, the critical path, a local rule's memory, and the failure's
// standard error.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "" +
		"a:\n\thead -c 3000000 /dev/zero | md5sum > a\n" +
		"b:\n\techo b > b\n" +
		"c: a b\n\tcat a b > c\n" +
		"d:\n\techo no such input >&2; exit 3\n"})
	r := mf(t, dir, "--report", "r.html", "w.mf")
	if r.code != 1 || !strings.Contains(r.err, "makeflow: report in r.html") {
		t.Fatalf("want exit 1 and the report's name: %v", r)
	}
	path := filepath.Join(dir, "r.html")
	dom, shot := testutil.LoadPage(t, (&url.URL{Scheme: "file", Path: path}).String(), "makeflow-report")
	t.Logf("screenshot: %s", shot)
	for _, want := range []string{
		"<title>makeflow report: w.mf</title>",
		`class="bad">failed: workflow failed: 1 of 4 rules failed`,
		`<td id="count">4 rules, 1 failed</td>`,
		`<rect class="task failed"`,
		`<td>rule 0 (w.mf:1:1)</td>`, `<td>rule 2 (w.mf:5:1)</td>`, // the critical path: a, then c
		"no such input", "exit status 3",
		"this machine (2)", // a and b ran beside each other
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered report lacks %q", want)
		}
	}
	if n := strings.Count(dom, `<rect class="task ok critical"`); n != 2 {
		t.Errorf("%d bars on the critical path, want 2 (rules 0 and 2)", n)
	}
	if n := strings.Count(dom, `<rect class="task`); n != 4 {
		t.Errorf("%d bars, want 4", n)
	}
	// Each rule's memory: a few MB, under this program's own size, which
	// Linux counts for every process it starts.
	if n := strings.Count(dom, `<td class="n">≤ `); n != 4 {
		t.Errorf("%d rules with their memory under makeflow's own, want 4", n)
	}
	if t.Failed() {
		t.Logf("report:\n%s", dom)
	}
	// The report of a run that completes replaces it.
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\techo a > a\n"})
	if r := mf(t, dir, "--report", "r.html", "w.mf"); r.code != 0 {
		t.Fatalf("second run: %v", r)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), `class="good">completed`) {
		t.Errorf("second report: %v\n%s", err, b)
	}
}
