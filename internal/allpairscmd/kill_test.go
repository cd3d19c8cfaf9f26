package allpairscmd

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// TestKill9LeavesNothingBehind kills allpairs with SIGKILL while calls of
// its program run, each having started a grandchild in the background:
// on this machine's cores and as local batch jobs. Every process of the
// run dies with it; the re-run gives the same output as an uninterrupted
// run; and no call leaves a process behind, killed or not.
func TestKill9LeavesNothingBehind(t *testing.T) {
	a := dataDir(t, rand.New(rand.NewPCG(5, 6)), 6)
	// With $BLOCK set, calls after the sixth block, once they have said so
	// in $BLOCK.
	fn := testutil.WriteScript(t, t.TempDir(), "f", `sleep 1000 &
if [ -n "$BLOCK" ]; then
	: > "$BLOCK/call.$$"
	if [ "$(ls "$BLOCK" | wc -l)" -gt 6 ]; then : > "$BLOCK/blocked.$$"; exec sleep 1000; fi
fi
cmp -l "$1" "$2" 2>/dev/null | wc -l`)
	modes := []struct {
		name string
		args []string
	}{{"multicore", nil}, {"local-jobs", []string{"-T", "local", "--job-size", "2"}}}
	for _, m := range modes {
		mode := m.args
		t.Run(m.name, func(t *testing.T) {
			mark := testutil.ProcessMark(t)
			allpairs := func(dir string, env ...string) *exec.Cmd {
				cmd := exec.Command(filepath.Join(binDir, "allpairs"), append(mode, "-o", "out.txt", fn, a, a)...)
				cmd.Dir, cmd.Env = dir, append(os.Environ(), append(env, mark)...)
				return cmd
			}
			output := func(dir string) []string {
				b, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
				return sorted(string(b))
			}

			clean := t.TempDir()
			if out, err := allpairs(clean).CombinedOutput(); err != nil {
				t.Fatalf("clean run: %v\n%s", err, out)
			}
			want := output(clean)
			if len(want) != 36 {
				t.Fatalf("clean run wrote %d lines", len(want))
			}
			if left := testutil.MarkedProcesses(mark); len(left) > 0 {
				t.Fatalf("the calls of a finished run left processes running: %v", left)
			}

			dir, block := t.TempDir(), t.TempDir()
			cmd := allpairs(dir, "BLOCK="+block)
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
					t.Fatal("no call blocked")
				}
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			testutil.WaitUnmarked(t, mark, 30*time.Second)

			if out, err := allpairs(dir).CombinedOutput(); err != nil {
				t.Fatalf("re-run: %v\n%s", err, out)
			}
			if got := output(dir); !slices.Equal(got, want) {
				t.Errorf("after kill and re-run:\n%v\nwant\n%v", got, want)
			}
			if left := testutil.MarkedProcesses(mark); len(left) > 0 {
				t.Errorf("the re-run left processes running: %v", left)
			}
		})
	}
}
