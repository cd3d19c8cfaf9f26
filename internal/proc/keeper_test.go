package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a program that registers processes with a
// Keeper and is then killed (see owner), and as the spawner and monitor of
// TestKill9WhileSpawning.
func TestMain(m *testing.M) {
	if os.Getenv("PROC_TEST_OWNER") != "" {
		owner()
		return
	}
	if way := os.Getenv(spawnerEnv); way != "" {
		spawner(way)
		return
	}
	if args := os.Getenv(monitorEnv); args != "" {
		monitor(args)
		return
	}
	os.Exit(m.Run())
}

// owner registers with a Keeper: a process group of two sleeps ("group"),
// a group it released without killing ("released"), a MkdirTemp directory
// in $PROC_TEST_ROOT ("dir"), and holds $PROC_TEST_LOCK locked if set. It
// prints "name value" lines, then "ready", and waits to be killed.
func owner() {
	var k Keeper
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if path := os.Getenv("PROC_TEST_LOCK"); path != "" {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			fail(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			fail(err)
		}
		if err := k.Hold(f); err != nil {
			fail(err)
		}
	}
	for _, name := range []string{"group", "released"} {
		s, err := k.Reserve()
		if err != nil {
			fail(err)
		}
		pid, err := startGroup("sleep 1000 & exec sleep 1000")
		if err != nil {
			fail(err)
		}
		s.Set(pid)
		if name == "released" {
			s.Release()
		}
		fmt.Println(name, pid)
	}
	dir, err := k.MkdirTemp(os.Getenv("PROC_TEST_ROOT"), "proctest-")
	if err != nil {
		fail(err)
	}
	fmt.Println("dir", dir)
	fmt.Println("keeper", k.kp.p.Pid)
	fmt.Println("ready")
	select {}
}

// startGroup starts sh -c script as the leader of a new process group.
func startGroup(script string) (int, error) {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// startTestGroup is startGroup for a test, which kills and reaps the
// group at its end, whatever the test did.
func startTestGroup(t *testing.T, script string) int {
	t.Helper()
	pid, err := startGroup(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		syscall.Wait4(pid, nil, 0, nil)
	})
	return pid
}

// startOwner runs the owner and returns what it printed.
func startOwner(t *testing.T, env ...string) (*exec.Cmd, map[string]string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append(env, "PROC_TEST_OWNER=1")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	vals := map[string]string{}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		name, val, _ := strings.Cut(sc.Text(), " ")
		if name == "error" {
			t.Fatal(val)
		}
		vals[name] = val
	}
	if vals["keeper"] == "" {
		t.Fatalf("owner did not start: %v", vals)
	}
	return cmd, vals
}

// groupAlive reports whether process group pgid has a process that is not
// a zombie.
func groupAlive(t *testing.T, pgid int) bool {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[0] != "Z" && f[0] != "X" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// killIfAlive kills group pgid if it still runs, after a failed test.
func killIfAlive(t *testing.T, pgid int) {
	if groupAlive(t, pgid) {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func pidOf(t *testing.T, vals map[string]string, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(vals[name])
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return pid
}

// TestKeeperKillsWhenOwnerIsKilled kills the owner with SIGKILL: its
// keeper kills the registered group (the backgrounded grandchild too) and
// removes the directory, but leaves the released group alone.
func TestKeeperKillsWhenOwnerIsKilled(t *testing.T) {
	root := t.TempDir()
	cmd, vals := startOwner(t, "PROC_TEST_ROOT="+root)
	group, released := pidOf(t, vals, "group"), pidOf(t, vals, "released")
	defer killIfAlive(t, group)
	defer syscall.Kill(-released, syscall.SIGKILL)
	if !groupAlive(t, group) || !groupAlive(t, released) {
		t.Fatal("groups not running")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	keeper := pidOf(t, vals, "keeper")
	waitFor(t, "the keeper to exit", func() bool { return syscall.Kill(keeper, 0) != nil || !groupAlive(t, keeper) })
	if groupAlive(t, group) {
		t.Error("the registered group outlived its owner's keeper")
	}
	if !groupAlive(t, released) {
		t.Error("the keeper killed a released group")
	}
	if _, err := os.Stat(vals["dir"]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s left behind: %v", vals["dir"], err)
	}
}

// TestKeeperHoldsLockUntilGroupsAreDead checks the hand-over of a lock:
// whoever takes the lock after the owner's death finds its group gone.
func TestKeeperHoldsLockUntilGroupsAreDead(t *testing.T) {
	root := t.TempDir()
	lockPath := filepath.Join(root, "lock")
	cmd, vals := startOwner(t, "PROC_TEST_ROOT="+root, "PROC_TEST_LOCK="+lockPath)
	group := pidOf(t, vals, "group")
	defer killIfAlive(t, group)
	defer syscall.Kill(-pidOf(t, vals, "released"), syscall.SIGKILL)
	f, err := os.Open(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatal("the owner's lock is not held")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if groupAlive(t, group) {
		t.Error("the lock was released while the owner's group still ran")
	}
}

// TestKeeperClose: Close kills what is registered and removes the
// directories, and the Keeper works again afterwards; a released slot
// is reused.
func TestKeeperClose(t *testing.T) {
	var k Keeper
	for round := range 2 {
		s, err := k.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		pid := startTestGroup(t, "sleep 1000 & exec sleep 1000")
		s.Set(pid)
		dir, err := k.MkdirTemp(t.TempDir(), "proctest-")
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		if groupAlive(t, pid) {
			t.Errorf("round %d: Close left the group running", round)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("round %d: Close left %s: %v", round, dir, err)
		}
		s.Release() // of a closed table: ignored
	}
	a, _ := k.Reserve()
	a.Release()
	b, _ := k.Reserve()
	if a.i != b.i {
		t.Errorf("slot %d not reused (got %d)", a.i, b.i)
	}
	b.Release()
	k.Close()
}

// TestKeeperRestarts: a keeper killed by someone is replaced at the next
// Reserve, and the new one covers the groups registered before.
func TestKeeperRestarts(t *testing.T) {
	var k Keeper
	defer k.Close()
	s, err := k.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	pid := startTestGroup(t, "exec sleep 1000")
	s.Set(pid)
	first := k.kp
	first.p.Signal(syscall.SIGKILL)
	<-first.exited
	s2, err := k.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release()
	if k.kp == first {
		t.Fatal("keeper not restarted")
	}
	k.mu.Lock()
	k.kp.stop() // as if the owner died
	k.kp = nil
	k.mu.Unlock()
	if groupAlive(t, pid) {
		t.Error("the new keeper did not kill the group registered with the old one")
	}
}

// TestHoldReplacesKeeper: Hold hands over to a new keeper with the new
// files without killing anything, and Hold() lets the lock go.
func TestHoldReplacesKeeper(t *testing.T) {
	var k Keeper
	defer k.Close()
	s, err := k.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	pid := startTestGroup(t, "exec sleep 1000")
	s.Set(pid)
	path := filepath.Join(t.TempDir(), "lock")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := k.Hold(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !groupAlive(t, pid) {
		t.Fatal("Hold killed a registered group")
	}
	g, _ := os.Open(path)
	defer g.Close()
	if syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		t.Fatal("the keeper does not hold the lock")
	}
	s.Release()
	if err := k.Hold(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("Hold() kept the lock: %v", err)
	}
}

// TestHoldWaitsForSpawns: Hold does not hand over to a new keeper while a
// Slot is reserved and not yet set or released (a spawn may be under way,
// its process holding the pipe to the old keeper only), and Reserve waits
// meanwhile; each way of ending the reservation lets Hold go on.
func TestHoldWaitsForSpawns(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(s Slot)
	}{
		{"set", func(s Slot) { s.Set(4194304) }}, // Close releases it
		{"released", func(s Slot) { s.Release() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k Keeper
			defer k.Close()
			s, err := k.Reserve()
			if err != nil {
				t.Fatal(err)
			}
			oldKeeper := k.kp
			held := make(chan error, 1)
			go func() { held <- k.Hold() }()
			waitFor(t, "Hold to wait for the spawn", func() bool {
				k.mu.Lock()
				defer k.mu.Unlock()
				return k.handing
			})
			reserved := make(chan error, 1)
			go func() {
				s, err := k.Reserve()
				s.Release()
				reserved <- err
			}()
			select {
			case err := <-held:
				t.Fatalf("Hold returned (%v) while a Slot was reserved", err)
			default:
			}
			tc.end(s)
			if err := <-held; err != nil {
				t.Fatal(err)
			}
			if err := <-reserved; err != nil {
				t.Fatal(err)
			}
			k.mu.Lock()
			replaced := k.kp != oldKeeper
			k.mu.Unlock()
			if !replaced {
				t.Error("Hold did not replace the keeper")
			}
		})
	}
}

// TestSweepTemp removes only the directories whose owner is provably gone.
func TestSweepTemp(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, lock bool) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o600)
		if lock {
			os.WriteFile(filepath.Join(dir, lockName), nil, 0o600)
		}
		return dir
	}
	stale := mk("proctest-1", true)
	nolock := mk("proctest-2", false)
	other := mk("other-1", true)
	var k Keeper
	defer k.Close()
	live, err := k.MkdirTemp(root, "proctest-")
	if err != nil {
		t.Fatal(err)
	}
	sweepTemp(root, "proctest-*")
	for dir, want := range map[string]bool{stale: false, nolock: true, other: true, live: true} {
		_, err := os.Stat(dir)
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(dir), got, want)
		}
	}
	if err := k.RemoveDir(live); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("RemoveDir left %s", live)
	}
}

// TestMarkNotGivenTwice: a process spawned with a mark keeps it after its
// record is released (as a daemon that left its group does); a million
// reservations later (a token's numbers), the record reserved next has a
// mark of its own, and the keeper, run with that record still reserved as
// at the program's death, kills the process spawned for it and not the
// old one.
func TestMarkNotGivenTwice(t *testing.T) {
	var k Keeper
	defer k.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	argv := []string{"sleep", "1000"}
	files := [3]*os.File{devnull, devnull, devnull}
	reap := func(pid int) {
		t.Cleanup(func() {
			syscall.Kill(pid, syscall.SIGKILL)
			syscall.Wait4(pid, nil, 0, nil)
		})
	}

	s, err := k.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	old, err := Spawn("/bin/sleep", argv, &SpawnAttr{Files: files, Slot: s})
	if err != nil {
		t.Fatal(err)
	}
	reap(old)
	s.Release()
	for range maxMarks - 1 {
		r, err := k.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	next, err := k.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if next.markEntry() == s.markEntry() {
		t.Errorf("mark %s given twice", s.markEntry())
	}
	// Spawned with the mark and not registered: the program died
	// between the two.
	pid, err := spawn("/bin/sleep", argv, &SpawnAttr{Files: files, Slot: next})
	if err != nil {
		t.Fatal(err)
	}
	reap(pid)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name   string
		pid    int
		killed bool
	}{{"the process of the reserved record", pid, true}, {"the process of the same number's first mark", old, false}} {
		var status syscall.WaitStatus
		got, err := syscall.Wait4(p.pid, &status, syscall.WNOHANG, nil)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if killed := got == p.pid && status.Signaled(); killed != p.killed {
			t.Errorf("%s: killed %v, want %v", p.name, killed, p.killed)
		}
	}
}
