package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func sh(script string) *Cmd {
	return &Cmd{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Env: os.Environ()}
}

func run(t *testing.T, c *Cmd) *Result {
	t.Helper()
	p, err := c.Start()
	if err != nil {
		t.Fatal(err)
	}
	return p.Wait()
}

// eachWay runs test with the command waited for each way Cmd has: by a
// Loop, by a goroutine that polls its pidfd and pipes, and without a pidfd
// (a goroutine per pipe in Go's poller, and waitid). way sets a Cmd up for
// the way.
func eachWay(t *testing.T, test func(t *testing.T, way func(*Cmd))) {
	for _, w := range []struct {
		name          string
		loop, noPidfd bool
	}{{"loop", true, false}, {"pidfd", false, false}, {"no pidfd", false, true}} {
		t.Run(w.name, func(t *testing.T) {
			var loop *Loop
			if w.loop {
				var err error
				if loop, err = NewLoop(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { loop.Close() })
			}
			test(t, func(c *Cmd) { c.Loop, c.noPidfd = loop, w.noPidfd })
		})
	}
}

func TestCmdEnds(t *testing.T) { eachWay(t, testCmdEnds) }

func testCmdEnds(t *testing.T, way func(*Cmd)) {
	var both, big bytes.Buffer
	cases := []struct {
		name  string
		cmd   *Cmd
		check func(*Result) bool
	}{
		{"exit status", sh("exit 3"), func(r *Result) bool { return r.ExitCode == 3 && r.Signal == 0 && r.Err == nil }},
		{"signal", sh("kill -9 $$"), func(r *Result) bool { return r.ExitCode == -1 && r.Signal == syscall.SIGKILL }},
		{"tails", func() *Cmd {
			c := sh("printf 'a%.0s' $(seq 100); echo out; echo err >&2")
			c.StdoutTail, c.StderrTail = 4, 100
			return c
		}(), func(r *Result) bool { return string(r.StdoutTail) == "out\n" && string(r.StderrTail) == "err\n" }},
		{"one writer for both, in order", func() *Cmd {
			c := sh("echo 1; echo 2 >&2; echo 3")
			c.Stdout, c.Stderr = &both, &both
			return c
		}(), func(*Result) bool { return both.String() == "1\n2\n3\n" }},
		{"usage", sh("exit 0"), func(r *Result) bool { return r.Usage.Maxrss > 0 && !r.Ended.Before(r.Started) }},
		{"more than a pipe holds, read while it runs", func() *Cmd {
			c := sh("head -c 300000 /dev/zero; echo end >&2")
			c.Stdout, c.StderrTail = &big, 100
			return c
		}(), func(r *Result) bool { return big.Len() == 300000 && string(r.StderrTail) == "end\n" }},
	}
	for _, tc := range cases {
		way(tc.cmd)
		if r := run(t, tc.cmd); !tc.check(r) {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}

// TestCmdStops: a wall time or Terminate sends SIGTERM, and SIGKILL after
// the kill delay to a command that ignores it.
func TestCmdStops(t *testing.T) { eachWay(t, testCmdStops) }

func testCmdStops(t *testing.T, way func(*Cmd)) {
	c := sh("sleep 100")
	c.WallTime = 10 * time.Millisecond
	way(c)
	if r := run(t, c); !r.TimedOut || r.Terminated || r.Signal != syscall.SIGTERM {
		t.Errorf("wall time: %+v", r)
	}
	c = sh("trap '' TERM; echo ready; sleep 100")
	c.KillDelay = 10 * time.Millisecond
	way(c)
	ready := make(chan struct{})
	var once sync.Once
	c.Stdout = writerFunc(func([]byte) { once.Do(func() { close(ready) }) })
	p, err := c.Start()
	if err != nil {
		t.Fatal(err)
	}
	<-ready // the trap is set
	p.Terminate()
	if r := p.Wait(); !r.Terminated || r.Signal != syscall.SIGKILL {
		t.Errorf("SIGTERM ignored: %+v", r)
	}
}

// TestCmdGroupDies: what the command leaves running in its group dies
// with it, and Wait does not wait for it to close the pipe.
func TestCmdGroupDies(t *testing.T) { eachWay(t, testCmdGroupDies) }

func testCmdGroupDies(t *testing.T, way func(*Cmd)) {
	var out bytes.Buffer
	c := sh("sleep 100 & echo $!")
	c.Stdout = &out
	way(c)
	r := run(t, c)
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("%q %+v", out.String(), r)
	}
	// SIGKILL was sent to it; a pidfd becomes readable when it is dead
	// (and it is gone already if the pidfd cannot be had).
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 10000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("the background process %d outlived its command (%v)", pid, err)
		}
		return
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

func TestTail(t *testing.T) {
	const size = 4096
	var all bytes.Buffer
	tb := NewTail(size)
	for i := 0; i < 3000; i++ {
		line := strings.Repeat(string(rune('a'+i%26)), i%7) + "\n"
		all.WriteString(line)
		tb.Write([]byte(line))
	}
	for _, p := range [][]byte{bytes.Repeat([]byte("Z"), size+10), []byte("end")} {
		tb.Write(p)
		all.Write(p)
	}
	if want := all.Bytes()[all.Len()-size:]; !bytes.Equal(tb.Bytes(), want) {
		t.Errorf("tail differs")
	}
}

// TestLoopManyCommands: one Loop waits for many commands at once with no
// goroutine per command, and hands each its own Result through Exited.
func TestLoopManyCommands(t *testing.T) {
	loop, err := NewLoop()
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	// The commands wait for their standard input to close.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const n = 20
	before := runtime.NumGoroutine()
	results := make(chan *Result, n)
	for i := 0; i < n; i++ {
		c := sh("read x; echo err" + strconv.Itoa(i) + " >&2; exit " + strconv.Itoa(i))
		c.Stdin, c.StderrTail, c.Loop, c.Exited = r, 100, loop, func(res *Result) { results <- res }
		if _, err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if during := runtime.NumGoroutine(); during-before >= n {
		t.Errorf("%d goroutines for %d commands running in a loop", during-before, n)
	}
	w.Close()
	seen := map[int]bool{}
	for i := 0; i < n; i++ {
		res := <-results
		if want := "err" + strconv.Itoa(res.ExitCode) + "\n"; string(res.StderrTail) != want || res.Err != nil || seen[res.ExitCode] {
			t.Errorf("result %+v, stderr %q, want %q", res, res.StderrTail, want)
		}
		seen[res.ExitCode] = true
	}
}

// TestLoopOutputGrace: a command whose pipe is held open by a process
// that left its group ends after the output grace, with what it wrote,
// and the Loop meanwhile goes on with its other commands.
func TestLoopOutputGrace(t *testing.T) {
	loop, err := NewLoop()
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	held := make(chan *Result, 1)
	// The shell ends once the process in a session of its own says it is
	// there (its pid, in a file).
	dir := t.TempDir()
	c := sh("echo before; setsid sh -c 'echo $$ > pid.new; mv pid.new pid; exec sleep 30' & " +
		"while [ ! -e pid ]; do :; done; echo gone >&2")
	c.Dir, c.StdoutTail, c.StderrTail, c.Loop, c.Exited = dir, 100, 100, loop, func(res *Result) { held <- res }
	if _, err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}()
	for i := 0; i < 3; i++ {
		c := sh("exit 7")
		c.Loop = loop
		p, err := c.Start()
		if err != nil {
			t.Fatal(err)
		}
		if res := p.Wait(); res.ExitCode != 7 {
			t.Errorf("another command: %+v", res)
		}
	}
	select {
	case res := <-held:
		t.Fatalf("ended before the output grace: %+v", res)
	default:
	}
	res := <-held
	if res.ExitCode != 0 || string(res.StdoutTail) != "before\n" || string(res.StderrTail) != "gone\n" || res.Ended.Add(outputGrace).After(time.Now().Add(time.Second)) {
		t.Errorf("held pipe: %+v, stdout %q, stderr %q", res, res.StdoutTail, res.StderrTail)
	}
}

// TestLoopOutputClosedEarly: a command that closes its output and runs on
// is still waited for, and the Loop goes on with its other commands
// meanwhile.
func TestLoopOutputClosedEarly(t *testing.T) {
	loop, err := NewLoop()
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	early := make(chan *Result, 1)
	c := sh("echo bye >&2; exec 2>&-; read x; exit 5")
	c.Stdin, c.StderrTail, c.Loop, c.Exited = r, 100, loop, func(res *Result) { early <- res }
	if _, err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c := sh("echo other >&2")
		c.StderrTail, c.Loop = 100, loop
		p, err := c.Start()
		if err != nil {
			t.Fatal(err)
		}
		if res := p.Wait(); res.ExitCode != 0 || string(res.StderrTail) != "other\n" {
			t.Errorf("another command: %+v", res)
		}
	}
	select {
	case res := <-early:
		t.Fatalf("ended before its input closed: %+v", res)
	default:
	}
	w.Close()
	if res := <-early; res.ExitCode != 5 || string(res.StderrTail) != "bye\n" {
		t.Errorf("output closed early: %+v, stderr %q", res, res.StderrTail)
	}
}
