package worker

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
	spec    *wire.TaskSpec
	sandbox string
	outPath string // the command's stdout and stderr

	mu      sync.Mutex
	proc    *os.Process
	stopped bool

	status   int
	exit     int
	execUsec int64
}

func runtimeArch() string { return runtime.GOARCH }

// start prepares the sandbox and runs the command in the background.
func (s *session) start(spec *wire.TaskSpec) {
	t := &task{
		spec:    spec,
		sandbox: filepath.Join(s.w.workspace, "t."+strconv.Itoa(spec.ID)),
		outPath: filepath.Join(s.w.workspace, "t."+strconv.Itoa(spec.ID)+".out"),
	}
	s.mu.Lock()
	if old := s.running[spec.ID]; old != nil {
		s.mu.Unlock()
		old.stop()
		s.mu.Lock()
	}
	s.running[spec.ID] = t
	s.mu.Unlock()
	s.lastWork.Store(time.Now().UnixNano())
	go func() {
		t.run(s)
		s.taskDone(t)
	}()
}

func (t *task) run(s *session) {
	os.RemoveAll(t.sandbox)
	if err := t.prepare(s.cache); err != nil {
		s.log.Warn("task input", "task", t.spec.ID, "err", err)
		os.WriteFile(t.outPath, []byte(err.Error()+"\n"), 0o600)
		t.status, t.exit = resultInputMissing, -1
		os.RemoveAll(t.sandbox)
		return
	}
	out, err := os.OpenFile(t.outPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.status, t.exit = resultInputMissing, -1
		return
	}
	cmd := exec.Command("/bin/sh", "-c", t.spec.Command)
	cmd.Dir = t.sandbox
	cmd.Env = append(os.Environ(), t.spec.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	started := time.Now()
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		out.Close()
		return
	}
	err = cmd.Start()
	if err == nil {
		t.proc = cmd.Process
	}
	t.mu.Unlock()
	if err != nil {
		fmt.Fprintf(out, "cannot start /bin/sh: %v\n", err)
		out.Close()
		t.status, t.exit = resultSuccess, 127
		return
	}
	var timedOut atomic.Bool
	if t.spec.WallTime > 0 {
		timer := time.AfterFunc(time.Duration(t.spec.WallTime)*time.Second, func() {
			timedOut.Store(true)
			killGroup(cmd.Process)
		})
		defer timer.Stop()
	}
	err = cmd.Wait()
	t.execUsec = time.Since(started).Microseconds()
	out.Close()
	// A backgrounded grandchild may outlive the shell; its group goes too.
	killGroup(cmd.Process)
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
	t.collect(s.cache)
	os.RemoveAll(t.sandbox)
}

// prepare creates the sandbox and places every input in it.
func (t *task) prepare(cache string) error {
	if err := os.MkdirAll(t.sandbox, 0o755); err != nil {
		return err
	}
	for _, in := range t.spec.Inputs {
		src := filepath.Join(cache, in.CacheName)
		dst := filepath.Join(t.sandbox, in.Remote)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := place(src, dst); err != nil {
			return fmt.Errorf("input %s (%s): %w", in.Remote, in.CacheName, err)
		}
	}
	for _, d := range t.spec.EmptyDirs {
		if err := os.MkdirAll(filepath.Join(t.sandbox, d), 0o755); err != nil {
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
func (t *task) collect(cache string) {
	for _, o := range t.spec.Outputs {
		src := filepath.Join(t.sandbox, o.Remote)
		dst := filepath.Join(cache, o.CacheName)
		if _, err := os.Lstat(src); err != nil {
			continue
		}
		os.RemoveAll(dst)
		if err := os.Rename(src, dst); err != nil {
			place(src, dst)
		}
	}
}

// sendResult writes the result line and the task's output.
func (t *task) sendResult(c *wire.Conn) error {
	defer os.Remove(t.outPath)
	f, err := os.Open(t.outPath)
	var size int64
	if err == nil {
		defer f.Close()
		if info, err := f.Stat(); err == nil {
			size = min(info.Size(), maxOutput)
		}
	}
	m := wire.Result{Status: t.status, Exit: t.exit, Size: size, ExecUsec: t.execUsec, TaskID: t.spec.ID}
	if size == 0 {
		return c.Send(m)
	}
	return c.SendFrom(m, f, size)
}

// stop kills the task if it runs and removes what it left.
func (t *task) stop() {
	t.mu.Lock()
	t.stopped = true
	p := t.proc
	t.mu.Unlock()
	if p != nil {
		killGroup(p)
	}
	t.discard()
}

func (t *task) discard() {
	os.Remove(t.outPath)
	os.RemoveAll(t.sandbox)
}

func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
}
