package allpairscmd

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
)

// TestReport runs All-Pairs with --report, here with a failing cell and
// then as jobs, and reads each report in headless Chromium.
func TestReport(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("RIGHTSIZE_CLUSTER", "none")
	items := napItems(t, 6)
	// Fails on the pair (i02, i03), with a word on standard error.
	fn := testutil.WriteScript(t, t.TempDir(), "f", `case "$1$2" in *i02*i03) echo "cannot align i02" >&2; exit 4;; esac; echo 1`)
	for _, tc := range []struct {
		name  string
		flags []string
		fn    string
		code  int
		want  []string
	}{
		{"multicore", nil, fn, 1, []string{"units", "cell i02 × i03", "cannot align i02", `class="bad">failed: `}},
		{"distributed", []string{"-T", "local", "--job-size", "3x3"}, "builtin:bytediff", 0,
			[]string{`<td id="count">4 jobs</td>`, ">block x0-y0</td>", "local (", `class="good">completed`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "r.html")
			args := append(append([]string{"--report", "r.html", "-q", "-o", "out.txt"}, tc.flags...), tc.fn, items, items)
			code, _, errs := runBinary(t, dir, args...)
			if code != tc.code || !strings.Contains(errs, "allpairs: report in r.html") {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, errs)
			}
			dom, shot := testutil.LoadPage(t, (&url.URL{Scheme: "file", Path: path}).String(), "allpairs-report-"+tc.name)
			t.Logf("screenshot: %s", shot)
			for _, want := range tc.want {
				if !strings.Contains(dom, want) {
					t.Errorf("rendered report lacks %q", want)
				}
			}
			if !strings.Contains(dom, `<rect class="task`) {
				t.Error("no bars")
			}
		})
	}
}
