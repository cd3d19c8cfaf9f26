package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary doubles as the two programs of TestKill9WhileSpawning:
// a spawner, which starts processes registered with a Keeper in a loop,
// and a monitor, which kills the spawner with SIGKILL and then sees what
// the spawner left.
const (
	spawnerEnv = "PROC_TEST_SPAWNER" // the way the spawner starts processes
	monitorEnv = "PROC_TEST_MONITOR" // the spawner's way and after how many processes to kill it
)

// spawnOne starts sleep 1000 registered with k, one of the ways the
// programs do: "cmd", Cmd.Start, as Makeflow, the batch driver and the
// worker do; "spawn", Spawn with a Slot, as funcs' program runner does;
// "forkexec", the same through ForkExec, as in a build without cgo (the
// worker's).
func spawnOne(way string, k *Keeper, devnull *os.File) (int, error) {
	switch way {
	case "cmd":
		p, err := (&Cmd{Path: "/bin/sleep", Args: []string{"sleep", "1000"}, Stdin: devnull, Keeper: k}).Start()
		if err != nil {
			return 0, err
		}
		return p.Pid(), nil
	case "spawn":
		return spawnKept(k, devnull, spawn)
	case "forkexec":
		return spawnKept(k, devnull, forkExec)
	}
	return 0, fmt.Errorf("no way %q", way)
}

func spawnKept(k *Keeper, devnull *os.File, start func(string, []string, *SpawnAttr) (int, error)) (int, error) {
	s, err := k.Reserve()
	if err != nil {
		return 0, err
	}
	pid, err := spawnWith(start, "/bin/sleep", []string{"sleep", "1000"},
		&SpawnAttr{Files: [3]*os.File{devnull, devnull, devnull}, Slot: s})
	if err != nil {
		s.Release()
	}
	return pid, err
}

// spawner prints "keeper PID", then starts sleep 1000 for ever, the way
// $PROC_TEST_SPAWNER says, printing "spawned PID" after each has started
// (and so been registered).
func spawner(way string) {
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		fail(err)
	}
	var k Keeper
	s, err := k.Reserve() // starts the keeper
	if err != nil {
		fail(err)
	}
	s.Release()
	fmt.Println("keeper", k.kp.p.Pid)
	for {
		pid, err := spawnOne(way, &k, devnull)
		if err != nil {
			fail(err)
		}
		fmt.Println("spawned", pid)
	}
}

// monitor runs a spawner ("WAY AFTER" in $PROC_TEST_MONITOR), kills it
// with SIGKILL once it has started AFTER processes, and, as the subreaper
// that its orphans (its keeper and the processes it started) fall to,
// waits for its keeper to exit. It then prints "unregistered N", the
// processes the spawner had started but not reported (it was killed
// between the spawn and the report), and "survivors P..." the orphans
// still running, which it then kills.
func monitor(args string) {
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	way, afterText, _ := strings.Cut(args, " ")
	after, err := strconv.Atoi(afterText)
	if err != nil {
		fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), spawnerEnv+"="+way, monitorEnv+"=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		fail(err)
	}
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	keeper := 0
	reported := map[int]bool{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		name, val, _ := strings.Cut(sc.Text(), " ")
		pid, _ := strconv.Atoi(val)
		switch name {
		case "keeper":
			keeper = pid
		case "spawned":
			reported[pid] = true
			if len(reported) == after {
				cmd.Process.Signal(syscall.SIGKILL)
			}
		default:
			fail(fmt.Errorf("spawner: %s", sc.Text()))
		}
	}
	cmd.Wait()
	// The spawner's orphans are this process's children from its death
	// on; the keeper exits once the processes it killed are zombies.
	if _, err := unix.Wait4(keeper, nil, 0, nil); err != nil {
		fail(fmt.Errorf("keeper %d: %w", keeper, err))
	}
	orphans := []int{}
	for {
		pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
		if err != nil || pid <= 0 {
			break
		}
		orphans = append(orphans, pid)
	}
	survivors := childrenOf(os.Getpid())
	orphans = append(orphans, survivors...)
	unregistered := 0
	for _, pid := range orphans {
		if !reported[pid] {
			unregistered++
		}
	}
	fmt.Println("unregistered", unregistered)
	fmt.Println("survivors", strings.Trim(fmt.Sprint(survivors), "[]"))
	for _, pid := range survivors {
		unix.Kill(-pid, unix.SIGKILL)
		unix.Kill(pid, unix.SIGKILL)
		unix.Wait4(pid, nil, 0, nil)
	}
}

// childrenOf returns the processes, zombies excepted, whose parent is
// process parent.
func childrenOf(parent int) []int {
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[0] != "Z" && f[0] != "X" && f[1] == strconv.Itoa(parent) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestKill9WhileSpawning kills a program that starts processes in a loop
// at many points, with SIGKILL, until it has been killed at least
// wantWindow times between starting a process and reporting it started
// (which comes after registering it), each way the programs start
// processes; whenever it is killed, nothing it started may survive it.
func TestKill9WhileSpawning(t *testing.T) {
	const (
		wantWindow  = 3
		maxAttempts = 200
	)
	for _, way := range []string{"cmd", "spawn", "forkexec"} {
		t.Run(way, func(t *testing.T) {
			window := 0
			attempts := 0
			for ; window < wantWindow; attempts++ {
				if attempts == maxAttempts {
					t.Fatalf("killed between a spawn and its report only %d times in %d attempts", window, attempts)
				}
				// Kill after 1 to 8 processes, so that the spawner's
				// table and its pipe to the keeper differ.
				unregistered, survivors := runMonitor(t, way, 1+attempts%8)
				if survivors != "" {
					t.Fatalf("attempt %d: processes left running after the spawner was killed: %s", attempts, survivors)
				}
				window += unregistered
			}
			t.Logf("%d attempts, %d processes started and not reported when their program was killed", attempts, window)
		})
	}
}

// runMonitor runs a monitor that kills the spawner after after processes,
// and returns what it saw.
func runMonitor(t *testing.T, way string, after int) (unregistered int, survivors string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), monitorEnv+"="+way+" "+strconv.Itoa(after))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("monitor: %v\n%s", err, out)
	}
	got := map[string]string{}
	for line := range strings.Lines(string(out)) {
		name, val, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		got[name] = val
	}
	if e, ok := got["error"]; ok {
		t.Fatalf("monitor: %s", e)
	}
	n, err := strconv.Atoi(got["unregistered"])
	if err != nil {
		t.Fatalf("monitor's output: %q", out)
	}
	return n, got["survivors"]
}
