package testutil

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ProcessMark returns an environment assignment, NAME=VALUE, unique to the
// test. Give it to the processes a test starts: their descendants inherit
// it, so that MarkedProcesses finds whatever they left running. Processes
// still marked at the end of the test are killed.
func ProcessMark(t testing.TB) string {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '_'
		}
		return r
	}, t.Name())
	mark := fmt.Sprintf("RIGHTSIZE_TEST_MARK=%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for _, p := range MarkedProcesses(mark) {
			syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	})
	return mark
}

// A MarkedProcess is a running process found by MarkedProcesses.
type MarkedProcess struct {
	Pid     int
	Command string // its command line, arguments separated by spaces
}

func (p MarkedProcess) String() string { return fmt.Sprintf("%d %s", p.Pid, p.Command) }

// MarkedProcesses returns the processes, zombies excepted, whose
// environment holds mark (see ProcessMark).
func MarkedProcesses(mark string) []MarkedProcess {
	var found []MarkedProcess
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	want := []byte(mark)
	for _, dir := range dirs {
		// A zombie's environment reads as empty.
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !hasEntry(env, want) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		cmd := strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		found = append(found, MarkedProcess{Pid: pid, Command: cmd})
	}
	return found
}

// hasEntry reports whether the NUL-separated list env has entry e.
func hasEntry(env, e []byte) bool {
	for len(env) > 0 {
		entry, rest, _ := bytes.Cut(env, []byte{0})
		if bytes.Equal(entry, e) {
			return true
		}
		env = rest
	}
	return false
}

// WaitUnmarked waits until no process holds mark, and fails the test,
// naming those left, if some still do after timeout.
func WaitUnmarked(t testing.TB, mark string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := MarkedProcesses(mark)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left running %v after their program was killed: %v", timeout, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
