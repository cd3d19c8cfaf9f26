package proc

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A Loop waits for many commands at once, as make's SIGCHLD loop does:
// one goroutine and one epoll instance watch the pidfd and the output pipes
// of every command started with Cmd.Loop set, reap each as it exits and
// hand its Result to Cmd.Exited. The epoll instance is itself in Go's
// network poller, so while nothing happens the goroutine is parked and the
// scheduler's own idle thread waits in epoll_wait for all the commands: no
// thread blocked per command, no goroutine per command, and an exit runs
// on the thread that saw it.
//
// It needs a pidfd (Linux 5.3); without one a command started in a Loop is
// waited for as one without (a goroutine of its own), and Exited is still
// called.
type Loop struct {
	ep   *os.File // the epoll instance, non-blocking, in Go's poller
	raw  syscall.RawConn
	wake int // an eventfd in ep: timers and Close write to it

	mu      sync.Mutex
	procs   map[uint32]*Process // by token, while watched
	next    uint32              // the next token
	expired []*Process          // output grace over, for the loop to finish
	closing bool
	done    chan struct{} // closed when the goroutine has returned
}

// exitSoon is how long the loop waits for a command to exit once its
// output pipes are all at end of file.
const exitSoon = time.Millisecond

// What an event's Fd field says; its Pad is the process's token.
const (
	evPidfd = iota
	evStdout
	evStderr
	evWake
)

// NewLoop starts a Loop. Close it when every command started in it has
// ended.
func NewLoop() (*Loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	// Non-blocking, so that os.NewFile puts it in Go's poller; epoll_wait
	// itself goes by its timeout.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	l := &Loop{ep: os.NewFile(uintptr(epfd), "epoll"), wake: wake, procs: map[uint32]*Process{}, done: make(chan struct{})}
	fail := func(err error) (*Loop, error) {
		l.ep.Close()
		unix.Close(wake)
		return nil, err
	}
	if l.raw, err = l.ep.SyscallConn(); err != nil {
		return fail(fmt.Errorf("epoll: %w", err))
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: evWake}); err != nil {
		return fail(os.NewSyscallError("epoll_ctl", err))
	}
	go l.run()
	return l, nil
}

// Close waits for the commands still running in the loop to end, and
// stops it.
func (l *Loop) Close() error {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	l.poke()
	<-l.done
	unix.Close(l.wake)
	return l.ep.Close()
}

// poke wakes the loop's goroutine.
func (l *Loop) poke() {
	one := [8]byte{1}
	unix.Write(l.wake, one[:])
}

// add watches pr, just started, with its pidfd open: its exit (one-shot)
// and each of its pipes (one-shot, re-armed after each read).
func (l *Loop) add(pr *Process) error {
	// Held until every descriptor is in: the loop finds pr under it, so
	// that none of its events is handled before this is done with pr.
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return fmt.Errorf("proc: command started in a closed Loop")
	}
	l.next++
	pr.token = l.next
	epfd := int(l.ep.Fd())
	var err error
	added := 0
	for _, p := range pr.pipes {
		if err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, p.rfd, pipeEvent(pr, p)); err != nil {
			break
		}
		added++
	}
	if err == nil {
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, pr.pidfd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: evPidfd, Pad: int32(pr.token)})
	}
	if err != nil {
		// Not watched: the caller waits for it another way.
		for _, p := range pr.pipes[:added] {
			unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, p.rfd, nil)
		}
		return os.NewSyscallError("epoll_ctl", err)
	}
	l.procs[pr.token] = pr
	return nil
}

func pipeEvent(pr *Process, p *pipe) *unix.EpollEvent {
	kind := int32(evStdout)
	if p.fd == 2 {
		kind = evStderr
	}
	return &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: kind, Pad: int32(pr.token)}
}

// run is the loop's goroutine.
func (l *Loop) run() {
	defer close(l.done)
	events := make([]unix.EpollEvent, 64)
	buf := make([]byte, 4096)
	for {
		var n int
		var werr error
		err := l.raw.Read(func(fd uintptr) bool {
			n, werr = unix.EpollWait(int(fd), events, 0)
			// Nothing ready: park until the epoll instance is.
			return n > 0 || (werr != nil && werr != unix.EINTR)
		})
		if err != nil || werr != nil {
			// The epoll instance is broken; nothing more can be watched.
			l.abandon(fmt.Errorf("epoll_wait: %w", firstError(err, werr)))
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == evWake {
				if l.woken() {
					return
				}
				continue
			}
			l.mu.Lock()
			pr := l.procs[uint32(ev.Pad)]
			l.mu.Unlock()
			if pr == nil {
				continue
			}
			switch ev.Fd {
			case evPidfd:
				l.exited(pr, buf)
			case evStdout, evStderr:
				l.readable(pr, ev.Fd, buf)
			}
		}
	}
}

// firstError returns a if it is an error, else b.
func firstError(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// woken handles a write to the eventfd: commands whose output grace is
// over, and Close. It reports whether the loop is to stop.
func (l *Loop) woken() bool {
	var b [8]byte
	unix.Read(l.wake, b[:])
	l.mu.Lock()
	expired := l.expired
	l.expired = nil
	l.mu.Unlock()
	for _, pr := range expired {
		if pr.exitRes != nil { // not finished since
			l.finish(pr)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing && len(l.procs) == 0
}

// exited reaps pr, whose pidfd is readable, reads what its pipes hold and
// finishes it if they are all at end of file; otherwise it waits for them
// for at most outputGrace.
func (l *Loop) exited(pr *Process, buf []byte) {
	unix.Close(pr.pidfd) // one-shot: no longer armed
	pr.pidfd = -1
	pr.exitRes = pr.reap()
	open := false
	for _, p := range pr.pipes {
		if p.rfd >= 0 {
			l.drain(pr, p, buf)
			open = open || p.rfd >= 0
		}
	}
	if !open {
		l.finish(pr)
		return
	}
	pr.graceTimer = time.AfterFunc(outputGrace, func() {
		l.mu.Lock()
		l.expired = append(l.expired, pr)
		l.mu.Unlock()
		l.poke()
	})
}

// readable reads the pipe an event named, and finishes pr if it has been
// reaped and this was the last pipe open.
func (l *Loop) readable(pr *Process, kind int32, buf []byte) {
	for _, p := range pr.pipes {
		if (p.fd == 2) != (kind == evStderr) || p.rfd < 0 {
			continue
		}
		l.drain(pr, p, buf)
	}
	for _, p := range pr.pipes {
		if p.rfd >= 0 {
			return
		}
	}
	if pr.exitRes == nil {
		// A process's descriptors close as it exits, just before it
		// can be reaped: wait for that here, a few microseconds, rather
		// than go back to Go's poller and be woken again. A command that
		// closed its output and runs on holds the loop up once, for at
		// most exitSoon.
		fds := []unix.PollFd{{Fd: int32(pr.pidfd), Events: unix.POLLIN}}
		if n, _ := unix.Ppoll(fds, &unix.Timespec{Nsec: int64(exitSoon)}, nil); n == 1 {
			l.exited(pr, buf)
		}
		return
	}
	l.finish(pr)
}

// drain reads p until it would block, then re-arms it, or closes it at end
// of file. Its one-shot event has fired: it is not armed.
func (l *Loop) drain(pr *Process, p *pipe, buf []byte) {
	p.drain(buf)
	if p.rfd >= 0 {
		unix.EpollCtl(int(l.ep.Fd()), unix.EPOLL_CTL_MOD, p.rfd, pipeEvent(pr, p))
	}
}

// finish stops watching pr, reaped, and hands over its Result.
func (l *Loop) finish(pr *Process) {
	if pr.graceTimer != nil {
		pr.graceTimer.Stop()
	}
	epfd := int(l.ep.Fd())
	for _, p := range pr.pipes {
		if p.rfd >= 0 { // the grace ran out: it may be armed
			unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, p.rfd, nil)
		}
	}
	l.mu.Lock()
	delete(l.procs, pr.token)
	closing := l.closing && len(l.procs) == 0
	l.mu.Unlock()
	res := pr.exitRes
	pr.exitRes = nil
	pr.keepTails(res)
	pr.done(res)
	if closing {
		l.poke() // let woken see that the last one has ended
	}
}

// abandon ends every command still watched as not waited for, should the
// epoll instance fail.
func (l *Loop) abandon(err error) {
	l.mu.Lock()
	procs := l.procs
	l.procs = map[uint32]*Process{}
	l.closing = true
	l.mu.Unlock()
	for _, pr := range procs {
		if pr.exitRes == nil {
			// Still running: reap it here, as Wait without a pidfd does.
			WaitExit(pr.pid)
			if pr.pidfd >= 0 {
				unix.Close(pr.pidfd)
				pr.pidfd = -1
			}
			pr.exitRes = pr.reap()
		}
		if pr.graceTimer != nil {
			pr.graceTimer.Stop()
		}
		res := pr.exitRes
		pr.exitRes = nil
		if res.Err == nil {
			res.Err = err
		}
		pr.keepTails(res)
		pr.done(res)
	}
}
