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
	// before the command has ended, even while Start starts it; the
	// command then has RIGHTSIZE_KEEPER in its environment (see
	// SpawnAttr.Slot).
	Keeper *Keeper
	// WallTime, if positive, stops the command (as Terminate does) once it
	// has run that long; Result.TimedOut then says so.
	WallTime time.Duration
	// KillDelay is how long Terminate waits between SIGTERM and SIGKILL;
	// zero means 5 s.
	KillDelay time.Duration

	// Loop, if set, waits for the command with every other command
	// started in it, on its one goroutine, instead of on a goroutine of
	// the command's own (see Loop).
	Loop *Loop
	// Exited, if set, is called once with the command's Result when it has
	// ended, its output read: on the Loop's goroutine, or without a Loop
	// on a goroutine of the command's own. Wait need not be called then
	// (it returns the same Result). With a Loop it holds up every other
	// command of the Loop while it runs: it must not block.
	Exited func(*Result)

	// noPidfd has the tests take the way without a pidfd.
	noPidfd bool
}

// A Process is a started Cmd. Its methods are safe for concurrent use;
// Wait must be called once, unless Cmd.Exited is set.
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
	// pidfd, when the kernel gives one (Linux 5.3), lets one goroutine
	// wait for the exit and read the pipes in one poll, on one thread:
	// no goroutine per pipe in Go's poller, no hand-off from them to the
	// waiter; or a Loop wait for it with all its other commands. -1 if
	// not. Whatever waits in the background sets result and closes
	// reaped (nil when Wait itself is to wait).
	pidfd  int
	reaped chan struct{}
	result *Result

	// In a Loop, which owns them: the process's token there, its Result
	// once reaped until its output is read, and the timer that ends the
	// reading.
	token      uint32
	exitRes    *Result
	graceTimer *time.Timer
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
// closes: by Wait itself when the process has a pidfd, otherwise by a
// goroutine of its own.
type pipe struct {
	fd   int      // 1 or 2: the stream it carries
	rfd  int      // the read end, non-blocking; -1 once closed
	r    *os.File // rfd in Go's poller, for the goroutine that copies it
	w    io.Writer
	tail *Tail
	done chan struct{}
}

// Start starts c in a process group of its own.
func (c *Cmd) Start() (*Process, error) {
	pr := &Process{cmd: c, pidfd: -1}
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
		pr.closePipes()
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
		rfd, wr, err := commandPipe()
		if err != nil {
			return err
		}
		files[i] = wr
		childEnds = append(childEnds, wr)
		p := &pipe{fd: i, rfd: rfd, w: w}
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
	var err error
	if c.Keeper != nil {
		if pr.slot, err = c.Keeper.Reserve(); err != nil {
			closeAll()
			return nil, err
		}
	}
	attr := &SpawnAttr{Dir: c.Dir, Env: c.Env, Files: files, Slot: pr.slot}
	pr.started = time.Now()
	pr.pid, err = Spawn(c.Path, c.Args, attr) // registers it with the keeper
	for _, f := range childEnds {
		f.Close()
	}
	if err != nil {
		pr.slot.Release()
		pr.closePipes()
		return nil, err
	}
	pr.startWaiting()
	if c.WallTime > 0 {
		pr.mu.Lock()
		// It may have been reaped already, in the background: then no
		// timer, which would be held for the whole wall time to do nothing.
		if !pr.exited {
			pr.wallTimer = time.AfterFunc(c.WallTime, func() {
				pr.mu.Lock()
				defer pr.mu.Unlock()
				if !pr.exited {
					pr.timedOut = true
					pr.terminateLocked()
				}
			})
		}
		pr.mu.Unlock()
	}
	return pr, nil
}

// startWaiting has the command, just started, waited for in the
// background if it is to be: by its Loop, or by a goroutine polling its
// pidfd and pipes together, or else has a goroutine copy each pipe in Go's
// poller for Wait.
func (pr *Process) startWaiting() {
	c := pr.cmd
	if len(pr.pipes) > 0 || c.Loop != nil {
		// The child is not reaped before it has exited: the pidfd cannot
		// name another process.
		if fd, err := pidfdOpen(pr.pid, c.noPidfd); err == nil {
			pr.pidfd = fd
		}
	}
	if pr.pidfd < 0 {
		for _, p := range pr.pipes {
			p.r = os.NewFile(uintptr(p.rfd), "|0")
			p.done = make(chan struct{})
			go p.copy()
		}
	}
	if pr.pidfd < 0 && c.Exited == nil {
		return // Wait waits
	}
	pr.reaped = make(chan struct{})
	if pr.pidfd >= 0 && c.Loop != nil && c.Loop.add(pr) == nil {
		return
	}
	go func() { pr.done(pr.wait()) }()
}

// done hands over the Result of a command waited for in the background.
func (pr *Process) done(res *Result) {
	pr.result = res
	close(pr.reaped)
	if pr.cmd.Exited != nil {
		pr.cmd.Exited(res)
	}
}

// pidfdOpen returns a pidfd (close-on-exec) for pid, or an error if the
// kernel has none or none is wanted.
func pidfdOpen(pid int, none bool) (int, error) {
	if none {
		return -1, unix.ENOSYS
	}
	return unix.PidfdOpen(pid, 0)
}

// commandPipe returns a pipe from a command: a non-blocking read end for
// this process, outside Go's poller until a goroutine is to read it, and a
// blocking write end for the command that never enters the poller.
// os.Pipe puts both ends in the poller, and takes the write end out again
// when it is handed over: six system calls more per command.
func commandPipe() (r int, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return -1, nil, os.NewSyscallError("pipe2", err)
	}
	// F_SETFL sets only the status flags: 0 clears O_NONBLOCK.
	if _, err := unix.FcntlInt(uintptr(fds[1]), unix.F_SETFL, 0); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return -1, nil, os.NewSyscallError("fcntl", err)
	}
	return fds[0], os.NewFile(uintptr(fds[1]), "|1"), nil
}

// closePipes closes the read ends of the pipes.
func (pr *Process) closePipes() {
	for _, p := range pr.pipes {
		switch {
		case p.r != nil:
			p.r.Close()
		case p.rfd >= 0:
			unix.Close(p.rfd)
		}
		p.rfd = -1
	}
}

// keep hands what was read from p to its tail and writer.
func (p *pipe) keep(b []byte) {
	if p.tail != nil {
		p.tail.Write(b)
	}
	if p.w != nil {
		p.w.Write(b)
	}
}

// drain reads p until it would block, and closes it at end of file (or on
// an error).
func (p *pipe) drain(buf []byte) {
	for {
		n, err := unix.Read(p.rfd, buf)
		if n > 0 {
			p.keep(buf[:n])
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err != unix.EAGAIN {
			unix.Close(p.rfd)
			p.rfd = -1
		}
		return
	}
}

// pollUntil reads the pipes still open as output comes, until the process
// has exited (when exit is set) or, with exit unset, until every pipe is
// at end of file or the deadline (if not zero) passes. It reports whether
// what it waited for happened.
func (pr *Process) pollUntil(exit bool, deadline time.Time, buf []byte) bool {
	fds := make([]unix.PollFd, 0, 1+len(pr.pipes))
	for {
		fds = fds[:0]
		if exit {
			fds = append(fds, unix.PollFd{Fd: int32(pr.pidfd), Events: unix.POLLIN})
		}
		for _, p := range pr.pipes {
			if p.rfd >= 0 {
				fds = append(fds, unix.PollFd{Fd: int32(p.rfd), Events: unix.POLLIN})
			}
		}
		if len(fds) == 0 {
			return true
		}
		timeout := -1
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return false
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		if _, err := unix.Poll(fds, timeout); err != nil && err != unix.EINTR {
			return false
		}
		for _, p := range pr.pipes {
			if p.rfd < 0 {
				continue
			}
			for _, f := range fds {
				if f.Fd == int32(p.rfd) && f.Revents != 0 {
					p.drain(buf)
				}
			}
		}
		if exit && fds[0].Revents != 0 {
			return true
		}
	}
}

func (p *pipe) copy() {
	defer close(p.done)
	var buf [4096]byte
	for {
		n, err := p.r.Read(buf[:])
		if n > 0 {
			p.keep(buf[:n])
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
	if pr.reaped != nil {
		<-pr.reaped
		return pr.result
	}
	return pr.wait()
}

// wait is Wait, for the goroutine that reaps the process.
func (pr *Process) wait() *Result {
	var buf []byte
	if pr.pidfd >= 0 {
		buf = make([]byte, 4096)
		if !pr.pollUntil(true, time.Time{}, buf) {
			WaitExit(pr.pid)
		}
		unix.Close(pr.pidfd)
		pr.pidfd = -1
	} else {
		WaitExit(pr.pid)
	}
	res := pr.reap()
	if buf != nil {
		pr.pollUntil(false, res.Ended.Add(outputGrace), buf)
	} else {
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
		}
	}
	pr.keepTails(res)
	return res
}

// reap reaps the command, which has exited, and returns how it ended (its
// output aside).
func (pr *Process) reap() *Result {
	// Until the command is reaped its group's id cannot be reused: stop
	// signalling, kill the group, release it from the keeper, then reap.
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

// keepTails closes the pipes, read as far as they will be, and puts their
// tails in res.
func (pr *Process) keepTails(res *Result) {
	pr.closePipes()
	for _, p := range pr.pipes {
		switch {
		case p.tail == nil:
		case p.fd == 1:
			res.StdoutTail = p.tail.Bytes()
		default:
			res.StderrTail = p.tail.Bytes()
		}
	}
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
