package wavefrontcmd_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/sparsematrix"
)

// TestCrashingSharedLibrary runs the real binary with a .so function that
// crashes (SIGSEGV) on cell (5,5): the run exits with status 1 and names the
// cell, without Go's stack dump; R.matrix keeps every cell finished before,
// and a re-run with a working function computes only the rest.
func TestCrashingSharedLibrary(t *testing.T) {
	lib := testutil.BuildSharedLib(t, "../../funcs/testdata/crash.c")
	binary := filepath.Join(binDir, "wavefront")
	dir := makeRdir(t, 9, 9)
	cmd := exec.Command(binary, "-c", "2", lib, dir)
	cmd.Env = append(os.Environ(), "CRASH_SUM=1970") // R[5,5], and no other cell
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("run: %v, want exit status 1\nstderr:\n%s", err, stderr.String())
	}
	want := "wavefront: the function " + lib + " crashed with SIGSEGV (a bad memory access at 0x0) computing cell (5,5)\n"
	if !strings.HasSuffix(stderr.String(), want) || strings.Contains(stderr.String(), "goroutine ") {
		t.Errorf("stderr:\n%s\nwant it to end with:\n%s", stderr.String(), want)
	}

	kept := load(t, filepath.Join(dir, "R.matrix"))
	oracle := makeRdir(t, 9, 9)
	if code, _, stderr := runWF(t, "builtin:sum", oracle); code != 0 {
		t.Fatalf("oracle run: exit %d\n%s", code, stderr)
	}
	all := load(t, filepath.Join(oracle, "R.matrix"))
	for k, v := range kept {
		if !bytes.Equal(v, all[k]) {
			t.Errorf("R.matrix holds %v = %q, want %q", k, v, all[k])
		}
	}
	// Cell (5,5) ran only once every cell it depends on was finished.
	for x := 1; x <= 5; x++ {
		for y := 1; y <= 5; y++ {
			_, ok := kept[sparsematrix.Key{X: x, Y: y}]
			if ok == (x == 5 && y == 5) {
				t.Errorf("after the crash, R.matrix has cell (%d,%d): %v", x, y, ok)
			}
		}
	}

	// The fixed function is another library, so the checkpoint must be
	// told to keep its cells: they are right.
	out, err := exec.Command(binary, "--trust-checkpoint", testutil.BuildSharedLib(t, "../../funcs/testdata/sum.c"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("re-run: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("computed %d cells (%d were already done)", 81-len(kept), len(kept)); !strings.Contains(string(out), want) {
		t.Errorf("re-run output lacks %q:\n%s", want, out)
	}
	if got := load(t, filepath.Join(dir, "R.matrix")); !maps.EqualFunc(got, all, bytes.Equal) {
		t.Errorf("after the re-run, R.matrix holds %d cells; a clean run's %d", len(got), len(all))
	}
}
