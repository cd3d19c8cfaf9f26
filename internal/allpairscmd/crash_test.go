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
	"github.com/rightsize/rightsize/sparsematrix"
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
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), "-c", "1", "-o", "out.txt", lib, a, b)
	cmd.Dir = dir
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
	// The cells finished before the crash are in the checkpoint, each
	// right (the function returns the first bytes of its inputs), and the
	// crashing one is not.
	first := func(set byte, i int) string {
		if (set == 'a' && i == 2) || (set == 'b' && i == 1) {
			return "b"
		}
		return "g"
	}
	kept, err := sparsematrix.Load(filepath.Join(dir, "out.txt.matrix"))
	if err != nil || len(kept) == 0 {
		t.Fatalf("checkpoint after the crash: %d cells, %v", len(kept), err)
	}
	for k, v := range kept {
		if k == (sparsematrix.Key{X: 2, Y: 1}) || string(v) != first('a', k.X)+first('b', k.Y) {
			t.Errorf("checkpoint cell (%d,%d) = %q", k.X, k.Y, v)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); !os.IsNotExist(err) {
		t.Errorf("out.txt after the crash: %v, want none", err)
	}

	// With the bad item fixed, a re-run computes only what is missing: its
	// column and the cells the crash left undone.
	if err := os.WriteFile(filepath.Join(b, "b1"), []byte("good"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runBinary(t, dir, "-c", "1", "-o", "out.txt", lib, a, b)
	if code != 0 || !strings.Contains(errs, "resuming: ") {
		t.Fatalf("re-run: exit %d; stderr:\n%s", code, errs)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	lines := sorted(string(data))
	if len(lines) != 16 {
		t.Fatalf("re-run wrote %d lines, want 16:\n%s", len(lines), data)
	}
	for _, line := range lines {
		if f := strings.Split(line, "\t"); len(f) != 3 || f[2] != first(f[0][0], int(f[0][1]-'0'))[:1]+"g" {
			t.Errorf("result line %q", line)
		}
	}
}
