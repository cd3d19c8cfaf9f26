package worker

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rightsize/rightsize/internal/proc"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// Result codes a worker reports (CCTools' work_queue_result_t).
const (
	resultSuccess      = 0
	resultInputMissing = 1
	resultSignal       = 8
	resultMaxRunTime   = 56
)

// task is one running or finished command.
type task struct {
	spec *wire.TaskSpec

	mu      sync.Mutex
	proc    *os.Process
	stopped bool

	status   int
	exit     int
	execUsec int64
	output   []byte // stdout and stderr, at most maxOutput bytes
}

// start runs the task in the background.
func (s *session) start(spec *wire.TaskSpec) {
	t := &task{spec: spec}
	s.mu.Lock()
	old := s.running[spec.ID]
	s.running[spec.ID] = t
	s.mu.Unlock()
	if old != nil {
		old.stop()
	}
	s.lastWork.Store(time.Now().UnixNano())
	s.tasks.Add(1)
	go func() {
		defer s.tasks.Done()
		sandbox, err := s.sandboxes.take()
		if err != nil {
			t.status, t.exit, t.output = resultInputMissing, -1, []byte(err.Error()+"\n")
		} else {
			t.run(s, sandbox)
			s.sandboxes.put(sandbox)
		}
		s.taskDone(t)
	}()
}

// run places the inputs, runs the command and collects the outputs.
func (t *task) run(s *session, sandbox string) {
	if err := t.prepare(s.cache, sandbox); err != nil {
		s.log.Warn("task input", "task", t.spec.ID, "err", err)
		t.status, t.exit, t.output = resultInputMissing, -1, []byte(err.Error()+"\n")
		return
	}
	// Output goes through a pipe, not a file: creating and deleting a file
	// per task costs more than the rest of the dispatch on slow disks.
	out := &cappedBuffer{limit: maxOutput}
	cmd := exec.Command("/bin/sh", "-c", t.spec.Command)
	cmd.Dir = sandbox
	cmd.Env = append(os.Environ(), t.spec.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A backgrounded grandchild holding the pipe must not hold up the task.
	cmd.WaitDelay = time.Second
	started := time.Now()
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	// The keeper kills the task's group should the worker die first.
	reg, err := s.w.keeper.Reserve()
	if err == nil {
		if err = cmd.Start(); err == nil {
			reg.Set(cmd.Process.Pid)
			t.proc = cmd.Process
		} else {
			reg.Release()
		}
	}
	t.mu.Unlock()
	if err != nil {
		t.status, t.exit, t.output = resultSuccess, 127, []byte(fmt.Sprintf("cannot start /bin/sh: %v\n", err))
		return
	}
	var timedOut atomic.Bool
	if t.spec.WallTime > 0 {
		timer := time.AfterFunc(time.Duration(t.spec.WallTime)*time.Second, func() {
			timedOut.Store(true)
			t.kill()
		})
		defer timer.Stop()
	}
	// Until the shell is reaped its group's id cannot be reused: stop
	// signalling, kill what it left in its group, release the group, then
	// reap.
	proc.WaitExit(cmd.Process.Pid)
	t.mu.Lock()
	t.proc = nil
	t.mu.Unlock()
	killGroup(cmd.Process)
	reg.Release()
	err = cmd.Wait()
	t.execUsec = time.Since(started).Microseconds()
	t.output = out.buf
	t.status, t.exit = resultSuccess, 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		switch {
		case timedOut.Load():
			t.status, t.exit = resultMaxRunTime, -1
		case ws.Signaled():
			t.status, t.exit = resultSignal, int(ws.Signal())
		default:
			t.exit = ws.ExitStatus()
		}
	}
	t.collect(s.cache, sandbox)
}

// cappedBuffer keeps the first limit bytes written and drops the rest.
type cappedBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.limit - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// prepare places every input in the sandbox.
func (t *task) prepare(cache, sandbox string) error {
	for _, in := range t.spec.Inputs {
		src := filepath.Join(cache, in.CacheName)
		dst := filepath.Join(sandbox, in.Remote)
		if dir := filepath.Dir(dst); dir != sandbox {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		if err := place(src, dst); err != nil {
			return fmt.Errorf("input %s (%s): %w", in.Remote, in.CacheName, err)
		}
	}
	for _, d := range t.spec.EmptyDirs {
		if err := os.MkdirAll(filepath.Join(sandbox, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// place puts a cached file or directory at dst: hard links where possible,
// copies otherwise.
func place(src, dst string) error {
	info, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if info.IsDir() {
		return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			target := filepath.Join(dst, rel)
			if d.IsDir() {
				return os.MkdirAll(target, 0o755)
			}
			return linkOrCopy(p, target)
		})
	}
	return linkOrCopy(src, dst)
}

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// collect moves the task's outputs from its sandbox into the cache, where
// get finds them. A missing output is left missing.
func (t *task) collect(cache, sandbox string) {
	for _, o := range t.spec.Outputs {
		src := filepath.Join(sandbox, o.Remote)
		dst := filepath.Join(cache, o.CacheName)
		if err := os.Rename(src, dst); err == nil {
			continue
		}
		if _, err := os.Lstat(src); err != nil {
			continue
		}
		// dst exists (a directory) or lies on another file system.
		os.RemoveAll(dst)
		if err := os.Rename(src, dst); err != nil {
			place(src, dst)
		}
	}
}

// sendResult writes the result line and the task's output.
func (t *task) sendResult(c *wire.Conn) error {
	m := wire.Result{Status: t.status, Exit: t.exit, Size: int64(len(t.output)), ExecUsec: t.execUsec, TaskID: t.spec.ID}
	return c.SendBody(m, t.output)
}

// stop kills the task if it runs; its goroutine cleans up.
func (t *task) stop() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	t.kill()
}

// kill kills the task's process group if its process has not exited.
func (t *task) kill() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.proc != nil {
		killGroup(t.proc)
	}
}

func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
}

// sandboxes hands out empty task directories and takes them back emptied,
// so that a task costs no mkdir and rmdir.
type sandboxes struct {
	dir  string
	mu   sync.Mutex
	free []string
	next int
}

func (p *sandboxes) take() (string, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		d := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return d, nil
	}
	p.next++
	d := filepath.Join(p.dir, "t."+strconv.Itoa(p.next))
	p.mu.Unlock()
	return d, os.Mkdir(d, 0o755)
}

// put empties a sandbox and keeps it for the next task; one that cannot be
// emptied is removed.
func (p *sandboxes) put(d string) {
	f, err := os.Open(d)
	if err != nil {
		return
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		if err == nil {
			err = os.RemoveAll(filepath.Join(d, n))
		}
	}
	if err != nil {
		os.RemoveAll(d)
		return
	}
	p.mu.Lock()
	p.free = append(p.free, d)
	p.mu.Unlock()
}
