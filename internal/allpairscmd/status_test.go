package allpairscmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/status"
)

// TestStatusPage: with --http, a run serves its status while it runs;
// here the first cell waits until the status has been read.
func TestStatusPage(t *testing.T) {
	items := t.TempDir()
	for _, name := range []string{"x", "y"} {
		if err := os.WriteFile(filepath.Join(items, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	held := testutil.HoldFunction(t)
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), "-c", "1", "-q", "--http", ":0", "-o", filepath.Join(t.TempDir(), "out"), held.Program, items, items)
	t.Cleanup(func() { cmd.Process.Kill() })
	url := testutil.StartWithStatusPage(t, cmd, "allpairs")
	held.WaitFirst(t)
	var s status.Snapshot
	testutil.GetJSON(t, url+"status", &s)
	if s.Tool != "allpairs" || s.Total != 4 || s.Done != 0 || s.Unit != "cells" || s.Mode != "multicore" || s.Finished {
		t.Errorf("status %+v", s)
	}
	held.Release(t)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestStatusPageListsWorkers watches a real run on a Work Queue worker in
// headless Chromium: the page lists the worker that holds the first cell.
func TestStatusPageListsWorkers(t *testing.T) {
	items := t.TempDir()
	for _, name := range []string{"x", "y"} {
		if err := os.WriteFile(filepath.Join(items, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	held := testutil.HoldFunction(t)
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), "-T", "wq", "-Z", "port", "--job-size", "1", "-q", "--http", ":0", "-o", "out", held.Program, items, items)
	cmd.Dir = dir
	t.Cleanup(func() { cmd.Process.Kill() })
	url := testutil.StartWithStatusPage(t, cmd, "allpairs")
	startWorkers(t, filepath.Join(dir, "port"), 1)
	held.WaitFirst(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var s status.Snapshot
	for deadline := time.Now().Add(time.Minute); ; <-tick.C {
		testutil.GetJSON(t, url+"status", &s)
		if len(s.Workers) == 1 && s.Workers[0].Running == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never listed the worker with its task: %+v", s)
		}
	}
	if w := s.Workers[0]; w.Cores != 1 || !strings.Contains(w.Name, "(127.0.0.1:") || s.Mode != "distributed" || s.Backend != "wq" {
		t.Errorf("status %+v", s)
	}
	dom, shot := testutil.LoadPage(t, url, "allpairs-wq-status-page")
	for _, want := range []string{"<td>" + s.Workers[0].Name + "</td><td>1</td><td>1</td>", "distributed on wq"} {
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
