package makeflow

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A LockedError reports a transaction log that another process holds locked:
// a makeflow running the workflow, or, for a moment after such a run was
// killed, the process that waits for its jobs to end. Nothing may run or be
// cleaned until it lets go.
type LockedError struct {
	Path string
	// Holders are the processes that hold the lock, when they can be found
	// (they cannot if they belong to another user).
	Holders []Process
}

// A Process is a running process, for messages.
type Process struct {
	PID     int
	Command string // its command line, shortened
}

func (e *LockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "another makeflow is running this workflow: %s is locked", e.Path)
	for i, p := range e.Holders {
		if i == 0 {
			b.WriteString(" by process ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d", p.PID)
		if p.Command != "" {
			fmt.Fprintf(&b, " (%s)", p.Command)
		}
	}
	return b.String()
}

// openLocked opens the log at path, creating it if needed, and locks it
// (lockLog). A log removed or replaced between the open and the lock (by a
// clean that held it) is opened again, so that the lock is always on the
// file the path names.
func openLocked(path string, flag int) (*os.File, error) {
	for attempt := 1; ; attempt++ {
		f, err := os.OpenFile(path, flag|os.O_CREATE, 0o666)
		if err != nil {
			return nil, fmt.Errorf("open log: %w", err)
		}
		if err := lockLog(f, path); err != nil {
			f.Close()
			return nil, err
		}
		var open, named syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &open) == nil && syscall.Stat(path, &named) == nil &&
			open.Dev == named.Dev && open.Ino == named.Ino {
			return f, nil
		}
		f.Close()
		if attempt == 10 {
			return nil, fmt.Errorf("lock log %s: it keeps being removed or replaced", path)
		}
	}
}

// lockHolders returns the processes that hold the lock on the file at path,
// found through /proc: those with a descriptor for it whose fdinfo shows a
// flock. (/proc/locks is not enough: it names the process that took the
// lock, which may be dead while a child that inherited the descriptor still
// holds it.)
func lockHolders(path string) []Process {
	var target syscall.Stat_t
	if syscall.Stat(path, &target) != nil {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var holders []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		fdDir := filepath.Join("/proc", e.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or not ours to look at
		}
		for _, fd := range fds {
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join(fdDir, fd.Name()), &st) != nil || st.Dev != target.Dev || st.Ino != target.Ino {
				continue
			}
			info, err := os.ReadFile(filepath.Join("/proc", e.Name(), "fdinfo", fd.Name()))
			if err == nil && bytes.Contains(info, []byte("FLOCK")) {
				holders = append(holders, Process{PID: pid, Command: commandLine(pid)})
				break
			}
		}
	}
	return holders
}

// commandLine returns a process's command line, shortened for a message.
func commandLine(pid int) string {
	const maxLen = 120
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	if len(s) > maxLen {
		s = s[:maxLen] + "..."
	}
	return s
}
