package proc

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// defaultKillDelay is how long Terminate waits between SIGTERM and SIGKILL
// when Cmd.KillDelay is zero.
const defaultKillDelay = 5 * time.Second

// outputGrace is how long Wait still reads a command's output after the
// command has exited: a process it left behind outside its group (setsid)
// may hold the pipe open for ever.
const outputGrace = 2 * time.Second

// A Cmd is a command to run in a process group of its own, so that nothing
// it starts outlives it: Makeflow's rules, the local batch driver's jobs
// and the Work Queue worker's tasks all run through it. When the command
// exits, whatever it left in its group is killed before it is reaped; with
// a Keeper, its group is also killed should this program die first
// (kill -9 included). Stopping it (Terminate, WallTime) sends SIGTERM to
// the group, then SIGKILL after KillDelay.
//
// It does not run the command through a shell (give /bin/sh -c yourself),
// follow processes that leave the group (setsid), or limit memory or CPU.
type Cmd struct {
	Path string   // the executable
	Args []string // its arguments, Args[0] included
	Dir  string   // the working directory; "" is this process's
	Env  []string // the whole environment
	// Stdin is the command's standard input; nil means /dev/null.
	Stdin *os.File

	// Stdout and Stderr receive the command's output as it comes. An
	// *os.File is given to the command as it is, unless its tail is kept;
	// another writer is fed through a pipe, and when both are the same writer one pipe carries
	// both streams in the order the command wrote them. Nil discards the
	// stream, unless its tail is kept.
	Stdout, Stderr io.Writer
	// StdoutTail and StderrTail, if positive, keep that many last bytes of
	// each stream (through a pipe) for Result.
	StdoutTail, StderrTail int

	// Keeper, if set, kills the command's group should this program die
	// before the command has ended.
	Keeper *Keeper
	// WallTime, if positive, stops the command (as Terminate does) once it
	// has run that long; Result.TimedOut then says so.
	WallTime time.Duration
	// KillDelay is how long Terminate waits between SIGTERM and SIGKILL;
	// zero means 5 s.
	KillDelay time.Duration
}

// A Process is a started Cmd. Its methods are safe for concurrent use;
// Wait must be called once.
type Process struct {
	cmd     *Cmd
	pid     int // the command's process id and its group's
	slot    Slot
	started time.Time

	mu         sync.Mutex
	exited     bool // reaped or about to be: no more signals
	terminated bool
	timedOut   bool
	killTimer  *time.Timer
	wallTimer  *time.Timer

	pipes []*pipe
}

// A Result is how a command ended.
type Result struct {
	Started, Ended time.Time
	// ExitCode is the command's exit status, or -1 if a signal killed it
	// (Signal says which) or it could not be waited for (Err says why).
	ExitCode int
	Signal   syscall.Signal
	Err      error
	// Terminated says Terminate or Kill was called before the command
	// exited; TimedOut, that its WallTime ran out.
	Terminated, TimedOut bool
	// StdoutTail and StderrTail are the ends of the output kept (Cmd's
	// StdoutTail and StderrTail).
	StdoutTail, StderrTail []byte
	// Usage is what the command and the children it waited for used: CPU
	// time (Utime, Stime) and peak memory (Maxrss, in KiB).
	Usage syscall.Rusage
}

// pipe is one pipe from the command, copied to w and a tail until it
// closes.
type pipe struct {
	fd   int // 1 or 2: the stream it carries
	r    *os.File
	w    io.Writer
	tail *Tail
	done chan struct{}
}

// Start starts c in a process group of its own.
func (c *Cmd) Start() (*Process, error) {
	pr := &Process{cmd: c}
	var devnullFile *os.File // opened only if needed
	devnull := func() (*os.File, error) {
		if devnullFile == nil {
			f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				return nil, err
			}
			devnullFile = f
		}
		return devnullFile, nil
	}
	defer func() {
		if devnullFile != nil {
			devnullFile.Close()
		}
	}()
	files := [3]*os.File{c.Stdin}
	if files[0] == nil {
		f, err := devnull()
		if err != nil {
			return nil, err
		}
		files[0] = f
	}
	var childEnds []*os.File
	closeAll := func() {
		for _, f := range childEnds {
			f.Close()
		}
		for _, p := range pr.pipes {
			p.r.Close()
		}
	}
	stream := func(i int, w io.Writer, tailBytes int) error {
		if f, ok := w.(*os.File); ok && tailBytes <= 0 {
			files[i] = f
			return nil
		}
		if w == nil && tailBytes <= 0 {
			f, err := devnull()
			files[i] = f
			return err
		}
		if i == 2 && w != nil && w == c.Stdout && c.StdoutTail <= 0 && tailBytes <= 0 {
			files[2] = files[1] // one pipe for both, in order
			return nil
		}
		r, wr, err := commandPipe()
		if err != nil {
			return err
		}
		files[i] = wr
		childEnds = append(childEnds, wr)
		p := &pipe{fd: i, r: r, w: w, done: make(chan struct{})}
		if tailBytes > 0 {
			p.tail = NewTail(tailBytes)
		}
		pr.pipes = append(pr.pipes, p)
		return nil
	}
	if err := stream(1, c.Stdout, c.StdoutTail); err != nil {
		closeAll()
		return nil, err
	}
	if err := stream(2, c.Stderr, c.StderrTail); err != nil {
		closeAll()
		return nil, err
	}
	attr := &SpawnAttr{Dir: c.Dir, Env: c.Env, Files: files}
	var err error
	if c.Keeper != nil {
		if pr.slot, err = c.Keeper.Reserve(); err != nil {
			closeAll()
			return nil, err
		}
	}
	pr.started = time.Now()
	pr.pid, err = Spawn(c.Path, c.Args, attr)
	for _, f := range childEnds {
		f.Close()
	}
	if err != nil {
		pr.slot.Release()
		for _, p := range pr.pipes {
			p.r.Close()
		}
		return nil, err
	}
	pr.slot.Set(pr.pid)
	for _, p := range pr.pipes {
		go p.copy()
	}
	if c.WallTime > 0 {
		pr.mu.Lock()
		pr.wallTimer = time.AfterFunc(c.WallTime, func() {
			pr.mu.Lock()
			defer pr.mu.Unlock()
			if !pr.exited {
				pr.timedOut = true
				pr.terminateLocked()
			}
		})
		pr.mu.Unlock()
	}
	return pr, nil
}

// commandPipe returns a pipe from a command: a read end for this process,
// non-blocking and in Go's poller, and a blocking write end for the
// command that never enters the poller. os.Pipe puts both ends in the
// poller, and takes the write end out again when it is handed over: six
// system calls more per command.
func commandPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	// F_SETFL sets only the status flags: 0 clears O_NONBLOCK.
	if _, err := unix.FcntlInt(uintptr(fds[1]), unix.F_SETFL, 0); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

func (p *pipe) copy() {
	defer close(p.done)
	var buf [4096]byte
	for {
		n, err := p.r.Read(buf[:])
		if n > 0 {
			if p.tail != nil {
				p.tail.Write(buf[:n])
			}
			if p.w != nil {
				p.w.Write(buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// Pid returns the command's process id, which is also its group's.
func (pr *Process) Pid() int { return pr.pid }

// Terminate sends SIGTERM to the command's process group, and SIGKILL
// after Cmd.KillDelay unless it has exited by then. Calls after the first,
// or after the command exited, do nothing.
func (pr *Process) Terminate() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.exited {
		pr.terminated = true
		pr.terminateLocked()
	}
}

func (pr *Process) terminateLocked() {
	if pr.killTimer != nil {
		return
	}
	syscall.Kill(-pr.pid, syscall.SIGTERM)
	delay := pr.cmd.KillDelay
	if delay <= 0 {
		delay = defaultKillDelay
	}
	pr.killTimer = time.AfterFunc(delay, func() {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		if !pr.exited {
			syscall.Kill(-pr.pid, syscall.SIGKILL)
		}
	})
}

// Kill sends SIGKILL to the command's process group at once, unless the
// command has exited.
func (pr *Process) Kill() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.exited {
		pr.terminated = true
		syscall.Kill(-pr.pid, syscall.SIGKILL)
	}
}

// Wait waits for the command to exit, kills what it left in its process
// group, reads the rest of its output (for at most two seconds once it has
// exited, in case a process that left the group holds the pipe) and
// returns how it ended.
func (pr *Process) Wait() *Result {
	// Until the command is reaped its group's id cannot be reused: stop
	// signalling, kill the group, release it from the keeper, then reap.
	WaitExit(pr.pid)
	pr.mu.Lock()
	pr.exited = true
	for _, t := range []*time.Timer{pr.killTimer, pr.wallTimer} {
		if t != nil {
			t.Stop()
		}
	}
	terminated, timedOut := pr.terminated, pr.timedOut
	pr.mu.Unlock()
	syscall.Kill(-pr.pid, syscall.SIGKILL)
	pr.slot.Release()
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	var err error
	for {
		_, err = syscall.Wait4(pr.pid, &ws, 0, &ru)
		if err != syscall.EINTR {
			break
		}
	}
	res := &Result{Started: pr.started, Ended: time.Now(), ExitCode: -1, Terminated: terminated, TimedOut: timedOut}
	var grace <-chan time.Time
	for _, p := range pr.pipes {
		select {
		case <-p.done:
		default:
			if grace == nil {
				grace = time.After(outputGrace)
			}
			select {
			case <-p.done:
			case <-grace:
				p.r.SetReadDeadline(time.Now())
				<-p.done
			}
		}
		p.r.Close()
	}
	for _, p := range pr.pipes {
		switch {
		case p.tail == nil:
		case p.fd == 1:
			res.StdoutTail = p.tail.Bytes()
		default:
			res.StderrTail = p.tail.Bytes()
		}
	}
	if err != nil {
		res.Err = fmt.Errorf("wait: %w", err)
		return res
	}
	res.Usage = ru
	if ws.Signaled() {
		res.Signal = ws.Signal()
	} else {
		res.ExitCode = ws.ExitStatus()
	}
	return res
}

// A Tail keeps the last bytes written to it, up to its size. It is safe
// for concurrent use.
type Tail struct {
	mu   sync.Mutex
	size int
	buf  []byte
}

// NewTail returns a Tail that keeps the last size bytes.
func NewTail(size int) *Tail { return &Tail{size: size} }

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= t.size {
		t.buf = append(t.buf[:0], p[len(p)-t.size:]...)
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - t.size; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// Bytes returns a copy of what is kept.
func (t *Tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}
