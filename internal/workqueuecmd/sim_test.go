package workqueuecmd

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/cmdutil"
)

func TestSim(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"workers": [{"count": 2, "cores": 2}], "tasks": [{"count": 40, "runtime": 10}]}`)
	png1 := filepath.Join(dir, "timeline.png")
	code, out, stderr := run(context.Background(), "sim", "--timeline", png1, good)
	if code != 0 || !strings.Contains(out, "40 finished, 0 failed of 40") || !strings.Contains(out, "makespan           100.") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	f, err := os.Open(png1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("timeline: %v", err)
	}

	bad := write("bad.json", "{\n  \"workers\": [{\"count\": 2}],\n  \"tasks\": [{\"count\": \"forty\"}]\n}")
	if code, _, stderr := run(context.Background(), "sim", bad); code != cmdutil.ExitFailure || !strings.Contains(stderr, bad+":3: ") {
		t.Errorf("bad scenario: exit %d, stderr %q; want %d and %s:3:", code, stderr, cmdutil.ExitFailure, bad)
	}
	stuck := write("stuck.json", `{"workers": [{"count": 1, "cores": 1}], "tasks": [{"count": 1, "cores": 2}]}`)
	if code, out, stderr := run(context.Background(), "sim", stuck); code != cmdutil.ExitFailure || !strings.Contains(out, "nothing more could happen") {
		t.Errorf("a run that cannot finish: exit %d\n%s%s", code, out, stderr)
	}
}
