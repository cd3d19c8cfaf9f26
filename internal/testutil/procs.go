package testutil

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// WaitKept waits until the process group of process pid is registered
// with a keeper (internal/proc): that of its nearest ancestor that has one,
// the program that started it. It fails the test if that does not happen
// within a minute. A program registers a group just after starting its
// leader; a test that kills the program the moment the process shows
// signs of life could kill it in between, and what the keeper then kills
// is found by its mark (internal/proc's Spawn) rather than in the table:
// tests of what a keeper kills of the groups in its table wait for this
// first.
func WaitKept(t testing.TB, pid int) {
	t.Helper()
	_, group, ok := parentAndGroup(pid)
	if !ok {
		t.Fatalf("process %d: no such process", pid)
	}
	program := pid
	for {
		parent, _, ok := parentAndGroup(program)
		if !ok || parent <= 1 {
			t.Fatalf("no ancestor of process %d has a keeper", pid)
		}
		program = parent
		if _, ok := keptGroups(program); ok {
			break
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if groups, _ := keptGroups(program); groups[group] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d of process %d is not registered with the keeper of process %d", group, pid, program)
		}
	}
}

// parentAndGroup returns the parent and the process group of process pid.
func parentAndGroup(pid int) (parent, group int, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ...
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 3 {
		return 0, 0, false
	}
	parent, err1 := strconv.Atoi(f[1])
	group, err2 := strconv.Atoi(f[2])
	return parent, group, err1 == nil && err2 == nil
}

// keptGroups reads the groups registered in the keeper table that process
// program has open (8-byte records, each a group id in decimal and a
// newline, or zero bytes when free), and reports whether it has one.
func keptGroups(program int) (map[int]bool, bool) {
	groups := map[int]bool{}
	found := false
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", program))
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err != nil || !strings.Contains(target, "rightsize-keeper") {
			continue
		}
		found = true
		table, _ := os.ReadFile(fd)
		for rec := range slices.Chunk(table, 8) {
			if g, err := strconv.Atoi(strings.Trim(string(rec), " \n\x00")); err == nil {
				groups[g] = true
			}
		}
	}
	return groups, found
}

// WaitFor returns once cond holds, looking every 10 ms, and fails the
// test if it does not within timeout: for state another process or a
// remote peer changes, which announces nothing to wait on.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(timeout); !cond(); <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// WaitLine returns the content of the file at path, without its newline,
// once a line has been written there whole (a port file, say); it fails
// the test after 30 s.
func WaitLine(t testing.TB, path string) string {
	t.Helper()
	var line string
	WaitFor(t, path+" to be written", 30*time.Second, func() bool {
		b, err := os.ReadFile(path)
		line = strings.TrimSpace(string(b))
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	return line
}
