package wavefrontcmd_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/status"
)

// TestStatusPage watches a real run in headless Chromium: a 2×2 region
// whose function waits until released, so that the page is seen while the
// first cell runs; its progress picture is served with it.
func TestStatusPage(t *testing.T) {
	dir := makeRdir(t, 2, 2)
	held := testutil.HoldFunction(t)
	cmd := wavefront(t, "-c", "1", "--http", ":0", held.Program, dir)
	url := testutil.StartWithStatusPage(t, cmd, "wavefront")
	held.WaitFirst(t)
	var s status.Snapshot
	testutil.GetJSON(t, url+"status", &s)
	if s.Tool != "wavefront" || s.Total != 4 || s.Done != 0 || s.Unit != "cells" || s.Picture == "" || s.Mode != "multicore" {
		t.Errorf("status %+v", s)
	}
	if res, err := http.Get(url + s.Picture); err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/png" {
		t.Errorf("progress picture: %v %v", res, err)
	}
	dom, shot := testutil.LoadPage(t, url, "wavefront-status-page")
	for _, want := range []string{`<span id="total">4</span> <span id="unit">cells</span>`, `<div id="picture-box">`, `<img id="picture" alt="progress" src="picture.png?t=`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, dom)
		}
	}
	t.Logf("screenshot: %s", shot)
	held.Release(t)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
}
