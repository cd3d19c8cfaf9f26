package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize/workqueue/wire"
)

// session is one connection to a master. The session goroutine reads and
// handles the master's messages in order; task goroutines only report
// completion. Writes to the connection are serialised by wmu.
type session struct {
	w     *worker
	log   *slog.Logger
	conn  net.Conn
	c     *wire.Conn
	files *cache // files received or produced, by cache name
	boxes *sandboxes
	trash *trash // what the sandboxes and the cache are done with
	// devnull is every task's standard input: opened once per session,
	// not once per task.
	devnull *os.File

	wmu sync.Mutex
	// greeted, under wmu, says the hello has been sent: until then the
	// hello, still to come, tells the master what the worker offers, and
	// no update may go before it.
	greeted bool

	mu       sync.Mutex
	running  map[int]*task
	finished []*task // done, not yet sent to the master
	notified bool    // available_results sent, send_results not yet seen
	idle     atomic.Bool
	lastWork atomic.Int64 // unix nanoseconds of the last task activity

	tasks sync.WaitGroup // task goroutines
}

// maxOutput bounds the output (stdout and stderr) returned for one task.
const maxOutput = 32 << 20

func (w *worker) session(ctx context.Context, conn net.Conn) error {
	defer conn.Close()
	s := &session{
		w: w, log: w.log, conn: conn,
		c:       wire.NewConn(conn, wire.Limits{File: w.res.diskMB << 20}),
		running: map[int]*task{},
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close() // after the tasks have ended, below
	s.devnull = devnull
	if err := s.openWorkspace(); err != nil {
		return err
	}
	s.lastWork.Store(time.Now().UnixNano())
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		s.watchIdle(done)
	}()
	defer func() {
		// Kill what runs and wait, so that no task writes into the
		// workspace while it is cleaned for the next master, and no
		// sweep of the trash uses the directories closed here.
		close(done)
		<-watched
		s.kill(-1)
		s.tasks.Wait()
		s.files.close()
		s.boxes.close()
	}()

	if w.cfg.Password != nil {
		if err := s.c.AuthenticateClient(w.cfg.Password, &w.issued); err != nil {
			if errors.Is(err, wire.ErrAuth) {
				return &notAcceptedError{why: "password refused", err: err}
			}
			return err
		}
	}
	if err := s.hello(); err != nil {
		return fmt.Errorf("sending hello: %w", err)
	}
	for heard := false; ; heard = true {
		m, err := s.c.ReadMessage()
		if err != nil {
			if s.idle.Load() {
				return ErrIdle
			}
			if _, ok := errors.AsType[*wire.ParseError](err); ok && !heard {
				return &notAcceptedError{why: "not a Work Queue master", err: err}
			}
			return err
		}
		if _, ok := m.(wire.Auth); ok && !heard {
			return &notAcceptedError{why: "the master requires a password", err: errNeedPassword}
		}
		if err := s.handle(m); err != nil {
			return err
		}
	}
}

// watchIdle closes the connection once no task has run for the idle
// timeout, tells the master the worker has no room once it drains
// (Config.Drain), and what a foreman's workers offer as it changes.
func (s *session) watchIdle(done <-chan struct{}) {
	timeout := s.w.cfg.IdleTimeout
	tick := time.NewTicker(min(time.Second, timeout/4+time.Millisecond))
	defer tick.Stop()
	if s.w.testHookWatch != nil {
		s.w.testHookWatch()
	}
	// Drain is watched even when already closed: whether the hello said
	// so is updateOffer's to know, under the write lock, not a look at
	// Drain here, which may come after a hello that offered everything.
	drain := s.w.cfg.Drain
	var offerChanged <-chan struct{} // nil: never
	if f := s.w.cfg.Foreman; f != nil {
		offerChanged = f.OfferChanged()
	}
	for {
		select {
		case <-done:
			return
		case <-drain:
			drain = nil
			s.log.Info("draining: no more tasks")
			if s.updateOffer() != nil {
				return // the connection failed: the session ends
			}
			continue
		case <-offerChanged:
			if s.updateOffer() != nil {
				return
			}
			continue
		case <-tick.C:
		}
		s.mu.Lock()
		busy := len(s.running) > 0 || len(s.finished) > 0
		s.mu.Unlock()
		if busy {
			s.lastWork.Store(time.Now().UnixNano())
			continue
		}
		s.trash.sweep() // idle: the trash's removal costs no task anything
		if time.Since(time.Unix(0, s.lastWork.Load())) > timeout && CycleEnding(s.w.started, time.Now(), s.w.cfg.BillingCycle) {
			s.idle.Store(true)
			s.send(func(c *wire.Conn) error {
				return c.Send(wire.Info{Key: "idle-disconnecting", Value: fmt.Sprint(int(timeout.Seconds()))})
			})
			s.conn.Close()
			return
		}
	}
}

// send writes under the write lock and flushes.
func (s *session) send(write func(c *wire.Conn) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := write(s.c); err != nil {
		return err
	}
	return s.c.Flush()
}

func (s *session) hello() error {
	host, _ := os.Hostname()
	osName := "Linux"
	if s.w.cfg.Foreman != nil {
		osName = "foreman" // as CCTools' foremen say
	}
	return s.send(func(c *wire.Conn) error {
		msgs := []wire.Message{
			wire.Hello{Protocol: wire.Protocol, Host: host, OS: osName, Arch: arch(), Version: Version},
			wire.Info{Key: "worker-id", Value: s.w.id},
		}
		// The pool first, so that the master knows it when the worker
		// joins (it may hold more of the pool's workers than it is given).
		if s.w.cfg.Pool != "" {
			msgs = append(msgs, wire.Info{Key: "from-factory", Value: s.w.cfg.Pool})
		}
		for _, f := range s.w.cfg.Features {
			msgs = append(msgs, wire.Feature{Name: f})
		}
		msgs = append(msgs, wire.Alive{})
		msgs = append(msgs, s.offered()...)
		msgs = append(msgs,
			wire.Info{Key: "end_of_resource_update", Value: "0"},
			wire.Info{Key: "tasks_running", Value: "0"},
			wire.Info{Key: "worker-end-time", Value: "0"},
		)
		for _, m := range msgs {
			if err := c.Send(m); err != nil {
				return err
			}
		}
		s.greeted = true
		return nil
	})
}

// offered returns the resource messages of what the worker offers: this
// machine's resources (whole cores), or its foreman's workers', or nothing
// once it drains.
func (s *session) offered() []wire.Message {
	workers := 1
	r, cores := s.w.res, wholeCores(s.w.res.cores)
	switch {
	case s.w.draining():
		r, cores = resources{}, 0
	case s.w.cfg.Foreman != nil:
		o := s.w.cfg.Foreman.Offer()
		workers, cores = o.Workers, o.Cores
		r = resources{memoryMB: o.MemoryMB, diskMB: o.DiskMB, gpus: o.GPUs}
	}
	return []wire.Message{
		wire.Resource{Name: "workers", Total: float64(workers), Smallest: float64(workers), Largest: float64(workers)},
		res("disk", float64(r.diskMB)),
		res("memory", float64(r.memoryMB)),
		res("gpus", float64(r.gpus)),
		res("cores", cores),
		wire.Resource{Name: "tag", Total: 0},
	}
}

// updateOffer tells the master what the worker offers now: nothing once it
// drains, so that it sends no more tasks; what a foreman's workers offer
// as they come and go. Before the hello it sends nothing: the hello, which
// reads the offer under the same lock, will say it.
func (s *session) updateOffer() error {
	return s.send(func(c *wire.Conn) error {
		if !s.greeted {
			return nil
		}
		for _, m := range s.offered() {
			if err := c.Send(m); err != nil {
				return err
			}
		}
		return nil
	})
}

func res(name string, v float64) wire.Resource {
	return wire.Resource{Name: name, Total: v, Smallest: v, Largest: v}
}

// handle acts on one message from the master. An error ends the session.
func (s *session) handle(m wire.Message) error {
	switch m := m.(type) {
	case wire.Put:
		if err := wire.CheckCacheName(m.Name); err != nil {
			return err
		}
		return s.receiveFile(s.files.dir, m, true)
	case wire.Dir:
		if m.Reply {
			return fmt.Errorf("unexpected %q from master", m.AppendTo(nil))
		}
		if err := wire.CheckCacheName(m.Name); err != nil {
			return err
		}
		return s.receiveDir(m.Name)
	case wire.Task:
		spec, err := s.c.ReadTask(m.ID)
		if err != nil {
			return err
		}
		s.start(spec)
		return nil
	case wire.Get:
		if err := wire.CheckCacheName(m.Name); err != nil {
			return err
		}
		return s.sendOutput(m.Name)
	case wire.SendResults:
		return s.sendResults()
	case wire.Kill:
		s.kill(m.ID)
		return nil
	case wire.Unlink:
		return s.unlink(m.Name)
	case wire.InvalidateFile:
		return s.unlink(m.Name)
	case wire.Check:
		return s.send(func(c *wire.Conn) error { return c.Send(wire.Alive{}) })
	case wire.Release:
		return errRelease
	case wire.Exit:
		return errExit
	case wire.Auth:
		return errNeedPassword
	default:
		return fmt.Errorf("unexpected message from master: %q", strings.TrimSpace(string(m.AppendTo(nil))))
	}
}

func (s *session) unlink(name string) error {
	if err := wire.CheckCacheName(name); err != nil {
		return err
	}
	if err := s.files.remove(name); err != nil {
		s.log.Warn("unlink", "name", name, "err", err)
	}
	return nil
}

// receiveFile stores a put's body in dir (the cache, or a directory being
// received), through a temporary name so that a task never sees half a
// file.
func (s *session) receiveFile(dir *os.File, m wire.Put, top bool) error {
	tmp := m.Name + ".part"
	err := removeAt(dir, tmp)
	var f *os.File
	if err == nil {
		f, err = createAt(dir, tmp, uint32(m.Mode|0o600))
	}
	if err != nil {
		s.log.Warn("storing file", "name", m.Name, "err", err)
		return s.c.DiscardBody(m.Size)
	}
	err = s.c.CopyBody(wire.GuardWriter(f), m.Size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && top {
		err = s.files.store(dir, tmp, m.Name)
	} else if err == nil {
		if rerr := unix.Renameat(int(dir.Fd()), tmp, int(dir.Fd()), m.Name); rerr != nil {
			err = &os.PathError{Op: "rename", Path: m.Name, Err: rerr}
		}
	}
	if err != nil {
		removeAt(dir, tmp)
		if errors.Is(err, wire.ErrTooLong) || errors.Is(err, io.ErrUnexpectedEOF) || isNetErr(err) {
			return err
		}
		// A local failure (full disk) costs this file, not the session:
		// the task that needs it reports it missing.
		s.log.Warn("storing file", "name", m.Name, "err", err)
	}
	return nil
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

// receiveDir reads a directory's entries, up to its end, into the cache
// entry name.
func (s *session) receiveDir(name string) error {
	tmp := name + ".part"
	if err := removeAt(s.files.dir, tmp); err != nil {
		return err
	}
	dir, err := openDir(s.files.dir, tmp, true)
	if err != nil {
		return err
	}
	err = s.readDir(dir, 0)
	dir.Close()
	if err == nil {
		err = s.files.store(s.files.dir, tmp, name)
	}
	if err != nil {
		removeAt(s.files.dir, tmp)
	}
	return err
}

func (s *session) readDir(dir *os.File, depth int) error {
	if depth > wire.MaxDirDepth {
		return fmt.Errorf("directory nested more than %d deep", wire.MaxDirDepth)
	}
	for {
		m, err := s.c.ReadMessage()
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case wire.End:
			return nil
		case wire.Put:
			if err := wire.CheckCacheName(m.Name); err != nil {
				return err
			}
			if err := s.receiveFile(dir, m, false); err != nil {
				return err
			}
		case wire.Dir:
			if err := wire.CheckCacheName(m.Name); err != nil || m.Reply {
				return fmt.Errorf("bad directory entry %q", m.Name)
			}
			sub, err := openDir(dir, m.Name, true)
			if err != nil {
				return err
			}
			err = s.readDir(sub, depth+1)
			sub.Close()
			if err != nil {
				return err
			}
		default:
			// Symbolic links are refused: their targets could point anywhere.
			return fmt.Errorf("unexpected %q inside a directory", strings.TrimSpace(string(m.AppendTo(nil))))
		}
	}
}

// sendOutput answers get: the cached file or, recursively, directory.
// Only regular files and directories are sent, and nothing is followed: a
// symbolic link (in or to an output) is answered "missing NAME ELOOP", any
// other kind of file "missing NAME EINVAL", an entry nested too deep
// "missing NAME ENAMETOOLONG". Protocol 9 has no way to send a link back,
// and a link followed could reach outside the workspace or loop for ever.
func (s *session) sendOutput(name string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var err error
	if en, refused := s.files.refusedErrno(name); refused {
		err = s.c.Send(wire.Missing{Name: name, Errno: int(en)})
	} else {
		err = s.streamItem(s.files.dir, name, name, 0)
	}
	if err != nil {
		return err
	}
	if err := s.c.Send(wire.End{}); err != nil {
		return err
	}
	return s.c.Flush()
}

// streamItem sends base, in dir, under the name name.
func (s *session) streamItem(dir *os.File, base, name string, depth int) error {
	missing := func(err error) error {
		if errnoOf(err) == unix.ELOOP {
			s.log.Warn("not sending a symbolic link", "name", name)
		}
		return s.c.Send(wire.Missing{Name: name, Errno: errno(err)})
	}
	if depth > wire.MaxDirDepth {
		return missing(unix.ENAMETOOLONG)
	}
	st, err := lstatAt(dir, base)
	if err != nil {
		return missing(err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		sub, err := openAt(dir, base, dirFlags, 0)
		if err != nil {
			return missing(err)
		}
		defer sub.Close()
		list, err := names(sub)
		if err != nil {
			return missing(err)
		}
		if err := s.c.Send(wire.Dir{Name: name, Reply: true}); err != nil {
			return err
		}
		for _, n := range list {
			if err := s.streamItem(sub, n, name+"/"+n, depth+1); err != nil {
				return err
			}
		}
		return nil
	case unix.S_IFREG:
		// O_NONBLOCK: should it have become a FIFO since, opening it must
		// not wait for a writer.
		f, err := openAt(dir, base, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return missing(err)
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return missing(err)
		}
		if !info.Mode().IsRegular() {
			return missing(unix.EINVAL)
		}
		return s.c.SendFrom(wire.File{Name: name, Size: info.Size()}, f, info.Size())
	case unix.S_IFLNK:
		return missing(unix.ELOOP)
	}
	return missing(unix.EINVAL)
}

func errno(err error) int {
	var en syscall.Errno
	if errors.As(err, &en) {
		return int(en)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return int(syscall.ENOENT)
	}
	return int(syscall.EIO)
}

// taskDone records a finished task and tells the master, once, that results
// are waiting.
func (s *session) taskDone(t *task) {
	s.mu.Lock()
	if s.running[t.spec.ID] != t {
		s.mu.Unlock() // killed meanwhile
		return
	}
	delete(s.running, t.spec.ID)
	s.finished = append(s.finished, t)
	notify := !s.notified
	s.notified = true
	s.mu.Unlock()
	s.lastWork.Store(time.Now().UnixNano())
	if notify {
		if err := s.send(func(c *wire.Conn) error { return c.Send(wire.AvailableResults{}) }); err != nil {
			s.conn.Close()
		}
	}
}

func (s *session) sendResults() error {
	s.mu.Lock()
	done := s.finished
	s.finished = nil
	s.notified = false
	running := len(s.running)
	s.mu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for _, t := range done {
		if err := t.sendResult(s.c); err != nil {
			return err
		}
	}
	if err := s.c.Send(wire.Info{Key: "tasks_running", Value: fmt.Sprint(running)}); err != nil {
		return err
	}
	if err := s.c.Send(wire.End{}); err != nil {
		return err
	}
	return s.c.Flush()
}

func (s *session) kill(id int) {
	s.mu.Lock()
	var victims []*task
	for tid, t := range s.running {
		if id == -1 || tid == id {
			victims = append(victims, t)
			delete(s.running, tid)
		}
	}
	kept := s.finished[:0]
	for _, t := range s.finished {
		if id == -1 || t.spec.ID == id {
			victims = append(victims, t)
		} else {
			kept = append(kept, t)
		}
	}
	s.finished = kept
	s.mu.Unlock()
	for _, t := range victims {
		t.stop()
	}
}

// arch names the machine as uname does, which is what CCTools reports.
func arch() string {
	switch a := runtime.GOARCH; a {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	default:
		return a
	}
}
