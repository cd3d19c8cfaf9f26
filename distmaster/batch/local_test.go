package batch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newTestLocal(t *testing.T, slots int) *Local {
	return NewLocal(Options{Slots: slots, KillDelay: time.Second})
}

func TestLocalContract(t *testing.T) {
	testContract(t, func(t *testing.T) Driver { return newTestLocal(t, 8) })
}

func TestLocalClose(t *testing.T) {
	testClose(t, newTestLocal(t, 2))
}

func TestLocalManyConcurrentJobs(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 60
	}
	d := newTestLocal(t, 40)
	defer closeDriver(t, d)
	rec := record(t, d)
	dir := t.TempDir()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = submit(t, d, &Job{
			Command: fmt.Sprintf("echo %d > out/%d.txt; exit %d", i*i, i, i%7),
			Dir:     dir,
			Outputs: []File{{Path: fmt.Sprintf("out/%d.txt", i)}},
		})
	}
	for i, id := range ids {
		ev := rec.final(t, id)
		if want := i % 7; ev.State != Done || ev.ExitCode != want {
			t.Fatalf("job %d: %v exit %d (%v), want done exit %d", i, ev.State, ev.ExitCode, ev.Err, want)
		}
		b, err := os.ReadFile(filepath.Join(dir, "out", strconv.Itoa(i)+".txt"))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(i*i) {
			t.Fatalf("job %d wrote %q, %v", i, b, err)
		}
	}
}

func TestLocalSlots(t *testing.T) {
	d := newTestLocal(t, 2)
	defer closeDriver(t, d)
	rec := record(t, d)
	dir := t.TempDir()
	// The first job takes both slots; the second waits for it, and the
	// third, though it would fit beside nothing, waits its turn.
	big := submit(t, d, &Job{Command: "sleep 300", Dir: dir, Resources: Resources{Cores: 2}})
	second := submit(t, d, &Job{Command: "true", Dir: dir})
	third := submit(t, d, &Job{Command: "true", Dir: dir})
	rec.wait(t, big, Running)
	for _, id := range []string{second, third} {
		if st, _ := d.Status(id); st.State != Queued {
			t.Errorf("job %s is %v while the big job holds every slot, want queued", id, st.State)
		}
	}
	// Removing a queued job drops it without running it.
	if err := d.Remove(context.Background(), third); err != nil {
		t.Fatal(err)
	}
	if ev := rec.final(t, third); !errors.Is(ev.Err, ErrRemoved) || !ev.Started.IsZero() {
		t.Errorf("removed queued job: %+v, want ErrRemoved, never started", ev.Status)
	}
	if err := d.Remove(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if ev := rec.final(t, second); ev.State != Done {
		t.Errorf("second job after the big one was removed: %+v", ev.Status)
	}
	// A job larger than the machine can never run.
	_, err := d.Submit(context.Background(), &Job{Command: "true", Resources: Resources{Cores: 3}})
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "3 cores") {
		t.Errorf("Submit of a 3-core job on 2 slots = %v, want ErrRejected", err)
	}
}

func TestLocalWallTime(t *testing.T) {
	d := newTestLocal(t, 2)
	defer closeDriver(t, d)
	rec := record(t, d)
	id := submit(t, d, &Job{Command: "sleep 300", Dir: t.TempDir(), Resources: Resources{WallTime: 300 * time.Millisecond}})
	if ev := rec.final(t, id); ev.State != Failed || !errors.Is(ev.Err, ErrTimeLimit) {
		t.Errorf("job past its wall time: %v %v, want ErrTimeLimit", ev.State, ev.Err)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func TestLocalKillsProcessGroup(t *testing.T) {
	d := newTestLocal(t, 4)
	defer closeDriver(t, d)
	rec := record(t, d)
	dir := t.TempDir()
	// One job is removed while its children run; the other exits leaving a
	// child behind. Neither child may outlive its job. (The pids are
	// written to files at once: a job's stdout arrives only at its end.)
	removed := submit(t, d, &Job{Command: "trap '' TERM; sleep 300 & echo $! > removed.pid; wait", Dir: dir})
	leaver := submit(t, d, &Job{Command: "sleep 300 & echo $!", Dir: dir})
	rec.wait(t, removed, Running)
	var pidFile []byte
	for deadline := time.Now().Add(eventTimeout); len(pidFile) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		pidFile, _ = os.ReadFile(filepath.Join(dir, "removed.pid"))
	}
	if err := d.Remove(context.Background(), removed); err != nil {
		t.Fatal(err)
	}
	// The shell ignores SIGTERM, so this also checks the SIGKILL that
	// follows the kill delay.
	if ev := rec.final(t, removed); !errors.Is(ev.Err, ErrRemoved) {
		t.Errorf("removed job: %+v", ev.Status)
	}
	ev := rec.final(t, leaver)
	for name, out := range map[string][]byte{"removed job": pidFile, "exited job": ev.Stdout} {
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("%s printed %q", name, out)
		}
		// Killed processes may take a moment to be reaped.
		for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the %s's child %d outlived it", name, pid)
		}
	}
}
