package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// spawnOutput runs /bin/sh -c script through Spawn with attr (its Files
// filled in where nil) and returns what it wrote to standard output and
// its exit status.
func spawnOutput(t *testing.T, script string, attr SpawnAttr) (pid int, out string, status syscall.WaitStatus) {
	t.Helper()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	stdout, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	for i, f := range []*os.File{devnull, stdout, os.Stderr} {
		if attr.Files[i] == nil {
			attr.Files[i] = f
		}
	}
	pid, err = Spawn("/bin/sh", []string{"sh", "-c", script}, &attr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Wait4(pid, &status, 0, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	return pid, string(b), status
}

func TestSpawn(t *testing.T) {
	dir := t.TempDir()
	physDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A descriptor this process has open (close-on-exec, as Go opens
	// every one) must not reach the child.
	held, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldFd := strconv.Itoa(int(held.Fd()))
	os.Setenv("RIGHTSIZE_SPAWN_TEST", "inherited")
	defer os.Unsetenv("RIGHTSIZE_SPAWN_TEST")

	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	// This process's ignored signals, as the child should have them,
	// but for glibc's internal signals (32 and 33): make and other glibc
	// programs pass them on ignored (so to this test under make), the
	// posix_spawn path resets them and Go's ForkExec passes them on.
	const internal = 1<<(32-1) | 1<<(33-1)
	sigIgn, err := ignoredSignals(string(status))
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		script string
		attr   SpawnAttr
		want   func(pid int, out string) bool
	}{
		// Go's handlers are reset before exec (and exec resets them
		// anyway); what is ignored stays ignored.
		{"signals ignored as here", `grep SigIgn /proc/$$/status`, SpawnAttr{},
			func(_ int, out string) bool {
				ign, err := ignoredSignals(out)
				return err == nil && ign&^internal == sigIgn&^internal
			}},
		{"own process group", `echo $$; cut -d' ' -f5 /proc/self/stat`, SpawnAttr{},
			func(pid int, out string) bool { p := strconv.Itoa(pid); return out == p+"\n"+p+"\n" }},
		{"directory", `pwd -P`, SpawnAttr{Dir: dir},
			func(_ int, out string) bool { return out == physDir+"\n" }},
		{"nil environment is this process's", `echo "$RIGHTSIZE_SPAWN_TEST"`, SpawnAttr{},
			func(_ int, out string) bool { return out == "inherited\n" }},
		{"given environment replaces it", `echo "$RIGHTSIZE_SPAWN_TEST,$A"`, SpawnAttr{Env: []string{"A=b c"}},
			func(_ int, out string) bool { return out == ",b c\n" }},
		{"empty environment", `env | grep -c . || true`, SpawnAttr{Env: []string{}},
			// sh itself sets PWD (and dash nothing else).
			func(_ int, out string) bool { n, _ := strconv.Atoi(strings.TrimSpace(out)); return n <= 1 }},
		{"only the standard descriptors", `ls /proc/$$/fd`, SpawnAttr{},
			func(_ int, out string) bool { return !slices.Contains(strings.Fields(out), heldFd) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pid, out, status := spawnOutput(t, tc.script, tc.attr)
			if status.ExitStatus() != 0 || !tc.want(pid, out) {
				t.Errorf("pid %d, status %v, output %q", pid, status, out)
			}
		})
	}
}

// ignoredSignals returns the SigIgn mask of a /proc/PID/status text.
func ignoredSignals(status string) (uint64, error) {
	for line := range strings.Lines(status) {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			return strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		}
	}
	return 0, fmt.Errorf("no SigIgn line in %q", status)
}

// TestSpawnSharedFile: one file given as both stdout and stderr gets both
// streams, in order.
func TestSpawnSharedFile(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "both")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	attr := SpawnAttr{Files: [3]*os.File{os.Stdin, f, f}}
	pid, err := Spawn("/bin/sh", []string{"sh", "-c", "echo 1; echo 2 >&2; echo 3"}, &attr)
	if err != nil {
		t.Fatal(err)
	}
	var status syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &status, 0, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f.Name())
	if string(b) != "1\n2\n3\n" {
		t.Errorf("output %q", b)
	}
}

// TestSpawnSwappedStandardFiles: this process's stdout given as the
// child's stderr and its stderr as the child's stdout, each dup2 reading a
// descriptor another overwrites.
func TestSpawnSwappedStandardFiles(t *testing.T) {
	report := filepath.Join(t.TempDir(), "fds")
	attr := SpawnAttr{
		Env:   []string{"OUT=" + report},
		Files: [3]*os.File{os.Stdin, os.Stderr, os.Stdout},
	}
	pid, err := Spawn("/bin/sh", []string{"sh", "-c", `a=$(readlink /proc/$$/fd/1); b=$(readlink /proc/$$/fd/2); echo "$a
$b" >"$OUT"`}, &attr)
	if err != nil {
		t.Fatal(err)
	}
	var status syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &status, 0, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := os.Readlink("/proc/self/fd/1")
	errTarget, _ := os.Readlink("/proc/self/fd/2")
	if want := errTarget + "\n" + out + "\n"; string(b) != want {
		t.Errorf("child's stdout and stderr %q, want %q", b, want)
	}
}

func TestSpawnErrors(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	files := [3]*os.File{os.Stdin, os.Stdout, os.Stderr}
	cases := []struct {
		name   string
		path   string
		attr   SpawnAttr
		op     string
		target string
		errno  error
	}{
		{"no such program", filepath.Join(dir, "missing"), SpawnAttr{Files: files}, "fork/exec", filepath.Join(dir, "missing"), syscall.ENOENT},
		{"not executable", notDir, SpawnAttr{Files: files}, "fork/exec", notDir, syscall.EACCES},
		{"no such directory", "/bin/true", SpawnAttr{Dir: filepath.Join(dir, "missing"), Files: files}, "chdir", filepath.Join(dir, "missing"), syscall.ENOENT},
		{"directory is a file", "/bin/true", SpawnAttr{Dir: notDir, Files: files}, "chdir", notDir, syscall.ENOTDIR},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Spawn(tc.path, []string{tc.path}, &tc.attr)
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Op != tc.op || pe.Path != tc.target || !errors.Is(err, tc.errno) {
				t.Errorf("got %v, want %s %s: %v", err, tc.op, tc.target, tc.errno)
			}
		})
	}
	if _, err := Spawn("/bin/true", []string{"true"}, &SpawnAttr{}); err == nil {
		t.Error("no standard files: no error")
	}
}

// TestSpawnMarks: a process spawned with a Slot has the Slot's mark as its
// one RIGHTSIZE_KEEPER variable (a program it runs that reserves from a
// Keeper of its own replaces it in turn), whether Spawn was given an
// environment or not, and is registered; one spawned without has none
// added.
func TestSpawnMarks(t *testing.T) {
	var k Keeper
	defer k.Close()
	os.Setenv(markVar, "inherited")
	defer os.Unsetenv(markVar)
	cases := []struct {
		name string
		env  []string
		kept bool
		want func(s Slot) string
	}{
		{"given environment", []string{"A=1", markVar + "=outer.000001"}, true, func(s Slot) string { return s.markEntry() }},
		{"this process's environment", nil, true, func(s Slot) string { return s.markEntry() }},
		{"no Slot", []string{"A=1"}, false, func(Slot) string { return "" }},
		{"no Slot, this process's environment", nil, false, func(Slot) string { return markVar + "=inherited" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s Slot
			if tc.kept {
				var err error
				if s, err = k.Reserve(); err != nil {
					t.Fatal(err)
				}
				defer s.Release()
			}
			pid, out, status := spawnOutput(t, `env | grep "^`+markVar+`=" || true`, SpawnAttr{Env: tc.env, Slot: s})
			want := tc.want(s)
			if want != "" {
				want += "\n"
			}
			if status.ExitStatus() != 0 || out != want {
				t.Errorf("status %v, marks %q, want %q", status, out, want)
			}
			if tc.kept {
				k.mu.Lock()
				rec := strings.TrimSpace(string(k.mem[int(s.i)*slotSize:][:slotSize]))
				k.mu.Unlock()
				if rec != strconv.Itoa(pid) {
					t.Errorf("process %d: its record reads %q", pid, rec)
				}
			}
		})
	}
}
