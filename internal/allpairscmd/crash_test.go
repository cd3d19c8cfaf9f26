package allpairscmd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
)

// TestCrashingSharedLibrary runs the real binary with a .so function that
// crashes (SIGSEGV) on one pair: the run exits with status 1 and names the
// two items, without Go's stack dump.
func TestCrashingSharedLibrary(t *testing.T) {
	lib := testutil.BuildSharedLib(t, "../../funcs/testdata/crash.c")
	a, b := t.TempDir(), t.TempDir()
	for i := range 4 {
		for _, set := range []struct{ dir, bad string }{{a, "a2"}, {b, "b1"}} {
			name := fmt.Sprintf("%c%d", set.bad[0], i)
			content := "good"
			if name == set.bad {
				content = "bad"
			}
			if err := os.WriteFile(filepath.Join(set.dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), "-c", "2", lib, a, b)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want status 1; stderr:\n%s", err, stderr.String())
	}
	want := fmt.Sprintf("allpairs: the function %s crashed with SIGSEGV (a bad memory access at 0x0) on %s and %s\n",
		lib, filepath.Join(a, "a2"), filepath.Join(b, "b1"))
	if !strings.HasSuffix(stderr.String(), want) || strings.Contains(stderr.String(), "goroutine ") {
		t.Errorf("stderr:\n%s\nwant it to end with:\n%s", stderr.String(), want)
	}
	// Whatever lines made it out are right: the function returns the first
	// bytes of its inputs.
	first := func(name string) string {
		if name == "a2" || name == "b1" {
			return "b"
		}
		return "g"
	}
	for _, line := range sorted(stdout.String()) {
		if f := strings.Split(line, "\t"); len(f) != 3 || f[2] != first(f[0])+first(f[1]) {
			t.Errorf("result line %q", line)
		}
	}
}
