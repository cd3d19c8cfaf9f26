package proc

import (
	"bytes"
	"os"
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

// withAndWithoutPidfd runs test with the pipes read by the goroutine that
// polls the pidfd, and by a goroutine each in Go's poller, as without one.
func withAndWithoutPidfd(t *testing.T, test func(t *testing.T, noPidfd bool)) {
	for _, noPidfd := range []bool{false, true} {
		t.Run(map[bool]string{false: "pidfd", true: "no pidfd"}[noPidfd], func(t *testing.T) { test(t, noPidfd) })
	}
}

func TestCmdEnds(t *testing.T) { withAndWithoutPidfd(t, testCmdEnds) }

func testCmdEnds(t *testing.T, noPidfd bool) {
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
		tc.cmd.noPidfd = noPidfd
		if r := run(t, tc.cmd); !tc.check(r) {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}

// TestCmdStops: a wall time or Terminate sends SIGTERM, and SIGKILL after
// the kill delay to a command that ignores it.
func TestCmdStops(t *testing.T) { withAndWithoutPidfd(t, testCmdStops) }

func testCmdStops(t *testing.T, noPidfd bool) {
	c := sh("sleep 100")
	c.WallTime, c.noPidfd = 10*time.Millisecond, noPidfd
	if r := run(t, c); !r.TimedOut || r.Terminated || r.Signal != syscall.SIGTERM {
		t.Errorf("wall time: %+v", r)
	}
	c = sh("trap '' TERM; echo ready; sleep 100")
	c.KillDelay, c.noPidfd = 10*time.Millisecond, noPidfd
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
func TestCmdGroupDies(t *testing.T) { withAndWithoutPidfd(t, testCmdGroupDies) }

func testCmdGroupDies(t *testing.T, noPidfd bool) {
	var out bytes.Buffer
	c := sh("sleep 100 & echo $!")
	c.Stdout, c.noPidfd = &out, noPidfd
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
