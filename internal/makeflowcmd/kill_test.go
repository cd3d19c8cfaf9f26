package makeflowcmd

import (
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

// TestKill9KillsTheWholeRule kills makeflow with SIGKILL while a rule runs
// a pipeline that appends to its output line by line. Every process of the
// rule dies with makeflow, not only its shell, and the re-run (which waits
// for that) runs the rule alone: the output holds each line once.
func TestKill9KillsTheWholeRule(t *testing.T) {
	dir := t.TempDir()
	const lines = 20
	var want, loop strings.Builder
	for i := 1; i <= lines; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
		loop.WriteString(" " + strconv.Itoa(i))
	}
	writeFiles(t, dir, map[string]string{
		"Makeflow": "out.txt: writer.sh\n\tsh writer.sh | cat\n",
		"writer.sh": "for i in" + loop.String() + "; do\n" +
			"\techo $i >> out.txt\n" +
			"\t[ $i = 3 ] && echo $$ > started.tmp && mv started.tmp started\n" +
			"\tsleep 0.1\n" +
			"done\n",
	})
	mark := testutil.ProcessMark(t)
	env := append(os.Environ(), mark)

	cmd := exec.Command(binary)
	cmd.Dir, cmd.Env = dir, env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	started := filepath.Join(dir, "started")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if data, err := os.ReadFile(started); err == nil {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
			testutil.WaitKept(t, pid)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rule did not start")
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	rerun := exec.Command(binary)
	rerun.Dir, rerun.Env = dir, env
	out, err := rerun.CombinedOutput()
	if err != nil {
		t.Fatalf("re-run: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	if string(got) != want.String() {
		t.Errorf("out.txt after kill -9 and re-run:\n%s\nwant 1 to %d, once each", got, lines)
	}
	if left := testutil.MarkedProcesses(mark); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}
