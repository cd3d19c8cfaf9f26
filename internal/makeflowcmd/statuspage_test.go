package makeflowcmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/status"
)

// TestStatusPage watches a real run in headless Chromium: one rule done,
// one failed (its standard error shown), one held on a pipe until the page
// has been seen; then the run ends.
func TestStatusPage(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\techo a > a\nb: a\n\tcat go > b\nc:\n\techo no input here >&2; exit 3\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "--http", ":0", "w.mf")
	cmd.Dir = dir
	url := testutil.StartWithStatusPage(t, cmd, "makeflow")
	// Wait until a is done and c has failed, as /status says.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(time.Minute); ; <-tick.C {
		var s status.Snapshot
		testutil.GetJSON(t, url+"status", &s)
		if s.Done == 1 && s.Failed == 1 && len(s.Failures) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not reach 1 done and 1 failed: %+v", s)
		}
	}
	dom, shot := testutil.LoadPage(t, url, "makeflow-status-page")
	for _, want := range []string{
		`<span id="done">1</span> of <span id="total">3</span> <span id="unit">rules</span>`,
		`<span id="failed">1</span>`, `<span id="running">1</span>`,
		"no input here", "exit status 3", `<td>this machine</td>`, `data-refreshed="`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, dom)
		}
	}
	t.Logf("screenshot: %s", shot)
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("a run with a failed rule exited 0")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b")); string(b) != "go\n" {
		t.Errorf("b = %q", b)
	}
}
