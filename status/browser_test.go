package status

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
)

// TestPageInBrowser loads the page in headless Chromium: its script
// fetches /status and shows it, so that the DOM holds what /status says
// now rather than what the page was served with.
func TestPageInBrowser(t *testing.T) {
	tr := running()
	h := Handler(tr)
	// The page is served with 10 done; /status then says 30.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.URL.Path == "/" {
			tr.Progress(40, 30, 2, 1)
		}
	}))
	defer ts.Close()
	dom, _ := testutil.LoadPage(t, ts.URL+"/", "status-page")
	for _, want := range []string{
		`<span id="done">30</span>`, `<span id="percent">75.0</span>`, `width: 75%`,
		`<td>10.0.0.7:4021</td>`, `&lt;script&gt;alert(1)&lt;/script&gt; missing input`,
		`data-refreshed="`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, dom)
		}
	}
}
