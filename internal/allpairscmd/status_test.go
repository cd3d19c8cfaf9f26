package allpairscmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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
