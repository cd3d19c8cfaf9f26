package wavefrontcmd_test

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// TestKill9LeavesNothingBehind kills wavefront with SIGKILL while a cell's
// program runs, after it started a grandchild in the background. Both die
// with wavefront, and so does the directory of the values given to the
// program; the next run removes such directories of dead runs; the re-run
// gives the same matrix as an uninterrupted run; and no call leaves a
// process behind, killed or not.
func TestKill9LeavesNothingBehind(t *testing.T) {
	const n = 5
	tmp := t.TempDir() // $TMPDIR, where the runs keep the values
	block := t.TempDir()
	// With $BLOCK set, calls after the sixth block, once they have said so
	// in $BLOCK (the first ones have left values to give to the program).
	fn := testutil.WriteScript(t, t.TempDir(), "f", `sleep 1000 &
if [ -n "$BLOCK" ]; then
	: > "$BLOCK/call.$$"
	if [ "$(ls "$BLOCK" | wc -l)" -gt 6 ]; then : > "$BLOCK/blocked.$$"; exec sleep 1000; fi
fi
cat "$1" "$2" "$3" | cksum | cut -d' ' -f1`)
	mark := testutil.ProcessMark(t)
	env := append(os.Environ(), mark, "TMPDIR="+tmp)
	binary := filepath.Join(binDir, "wavefront")
	wf := func(extraEnv []string, args ...string) *exec.Cmd {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(env, extraEnv...)
		return cmd
	}
	spillDirs := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "rightsize-wavefront-*"))
		return m
	}

	clean := makeRdir(t, n, n)
	if out, err := wf(nil, fn, clean).CombinedOutput(); err != nil {
		t.Fatalf("clean run: %v\n%s", err, out)
	}
	want := load(t, filepath.Join(clean, "R.matrix"))
	if left := testutil.MarkedProcesses(mark); len(left) > 0 {
		t.Fatalf("the calls of a finished run left processes running: %v", left)
	}

	// What runs killed before there were keepers left: one whose lock
	// nothing holds goes; one without a lock is not provably abandoned.
	stale := filepath.Join(tmp, "rightsize-wavefront-stale")
	unproven := filepath.Join(tmp, "rightsize-wavefront-nolock")
	for _, d := range []string{stale, unproven} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "1.1"), []byte("42"), 0o600)
	}
	os.WriteFile(filepath.Join(stale, ".lock"), nil, 0o600)

	dir := makeRdir(t, n, n)
	cmd := wf([]string{"BLOCK=" + block}, "-c", "2", fn, dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if blocked, _ := filepath.Glob(filepath.Join(block, "blocked.*")); len(blocked) > 0 {
			pid, _ := strconv.Atoi(strings.TrimPrefix(filepath.Ext(blocked[0]), "."))
			testutil.WaitKept(t, pid)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no cell started")
		}
	}
	if len(spillDirs()) != 2 {
		t.Fatalf("value directories of the running run: %v", spillDirs())
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	testutil.WaitUnmarked(t, mark, 30*time.Second)
	for deadline := time.Now().Add(30 * time.Second); len(spillDirs()) > 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	if got := spillDirs(); len(got) != 1 || got[0] != unproven {
		t.Errorf("value directories after the kill: %v, want only %s", got, unproven)
	}

	if out, err := wf(nil, fn, dir).CombinedOutput(); err != nil {
		t.Fatalf("re-run: %v\n%s", err, out)
	}
	if got := load(t, filepath.Join(dir, "R.matrix")); !maps.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("after kill and re-run: %d cells, want %d, or values differ", len(got), len(want))
	}
	if left := testutil.MarkedProcesses(mark); len(left) > 0 {
		t.Errorf("the re-run left processes running: %v", left)
	}
}
