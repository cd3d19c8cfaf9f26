package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rightsize/rightsize/internal/proc"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// Result codes a worker reports (CCTools' work_queue_result_t).
const (
	resultSuccess      = 0
	resultInputMissing = 1
	resultSignal       = 8
	resultForsaken     = 40 // given back: the master runs it again
	resultMaxRunTime   = 56
)

// task is one running or finished command.
type task struct {
	spec *wire.TaskSpec

	mu      sync.Mutex
	proc    *proc.Process
	cancel  context.CancelFunc // ends a foreman's run of it
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
		sandbox := t.run(s)
		s.taskDone(t)
		if sandbox != nil {
			s.boxes.done(sandbox) // once the result is out
		}
	}()
}

// run gives the task a new sandbox, places its inputs, runs the command,
// kills what it left running, and collects its outputs into the cache; it
// returns the sandbox, for the trash. A task that held a cached input some
// task wrote to is given back (forsaken), with no output, for the master
// to run again.
func (t *task) run(s *session) *os.File {
	sandbox, err := s.boxes.take()
	if err != nil {
		t.status, t.exit, t.output = resultInputMissing, -1, []byte(err.Error()+"\n")
		return nil
	}
	p := &placement{}
	ran := t.execute(s, sandbox, p)
	if why := s.files.release(p); why != "" {
		s.log.Warn("task given back", "task", t.spec.ID, "why", why)
		t.status, t.exit, t.output = resultForsaken, 0, nil // CCTools reads no output after it
		return sandbox
	}
	if ran {
		t.collect(s, sandbox)
	}
	return sandbox
}

// execute places the inputs and runs the command; it reports whether the
// command ran.
func (t *task) execute(s *session, sandbox *os.File, p *placement) bool {
	if err := t.prepare(s.files, sandbox, p); err != nil {
		s.log.Warn("task input", "task", t.spec.ID, "err", err)
		t.status, t.exit, t.output = resultInputMissing, -1, []byte(err.Error()+"\n")
		return false
	}
	if hook := s.w.cfg.InProcess; hook != nil {
		if do := hook(t.spec); do != nil {
			return t.runInProcess(do, s, sandbox)
		}
	}
	if f := s.w.cfg.Foreman; f != nil {
		return t.runOnForeman(f, s, sandbox)
	}
	// Output goes through a pipe, not a file: creating and deleting a file
	// per task costs more than the rest of the dispatch on slow disks.
	out := &cappedBuffer{limit: maxOutput}
	cmd := &proc.Cmd{
		Path: "/bin/sh", Args: []string{"sh", "-c", t.spec.Command},
		Dir:    sandbox.Name(),
		Env:    append(os.Environ(), t.spec.Env...),
		Stdin:  s.devnull,
		Stdout: out, Stderr: out,
		// The keeper kills the task's group should the worker die first.
		Keeper:    s.w.keeper,
		WallTime:  time.Duration(t.spec.WallTime) * time.Second,
		KillDelay: time.Second,
	}
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return false
	}
	pr, err := cmd.Start()
	t.proc = pr
	t.mu.Unlock()
	if err == nil {
		s.w.log.Debug("task started", "task", t.spec.ID, "pid", pr.Pid, "command", t.spec.Command)
	}
	if err != nil {
		t.status, t.exit, t.output = resultSuccess, 127, []byte(fmt.Sprintf("cannot start /bin/sh: %v\n", err))
		return false
	}
	// Whatever the command left running in its process group dies with
	// it (Wait sees to that) before its sandbox and inputs are looked at.
	res := pr.Wait()
	t.mu.Lock()
	t.proc = nil
	t.mu.Unlock()
	t.execUsec = res.Ended.Sub(res.Started).Microseconds()
	s.w.log.Debug("task ended", "task", t.spec.ID, "exit", res.ExitCode, "signal", res.Signal,
		"seconds", res.Ended.Sub(res.Started).Seconds(), "timed_out", res.TimedOut)
	t.output = out.buf
	t.status, t.exit = resultSuccess, res.ExitCode
	switch {
	case res.TimedOut:
		t.status, t.exit = resultMaxRunTime, -1
	case res.Signal != 0:
		t.status, t.exit = resultSignal, int(res.Signal)
	}
	return true
}

// runInProcess does the task's work in this process (Config.InProcess):
// it reports that it ran, with exit status 0, or 1 and the error as its
// output.
func (t *task) runInProcess(do func(context.Context, string) error, s *session, sandbox *os.File) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if wt := t.spec.WallTime; wt > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(wt)*time.Second)
		defer cancel()
	}
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return false
	}
	t.cancel = cancel
	t.mu.Unlock()
	started := time.Now()
	err := do(ctx, sandbox.Name())
	t.mu.Lock()
	t.cancel = nil
	t.mu.Unlock()
	t.execUsec = time.Since(started).Microseconds()
	s.w.log.Debug("task done in process", "task", t.spec.ID, "seconds", time.Since(started).Seconds(), "err", err)
	t.status, t.exit, t.output = resultSuccess, 0, nil
	switch {
	case err != nil && t.spec.WallTime > 0 && errors.Is(err, context.DeadlineExceeded):
		t.status, t.exit = resultMaxRunTime, -1
	case err != nil:
		t.exit, t.output = 1, []byte(err.Error()+"\n")
	}
	return true
}

// runOnForeman has foreman f run the task, whose inputs are in sandbox,
// and reports whether its command ran.
func (t *task) runOnForeman(f Foreman, s *session, sandbox *os.File) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return false
	}
	t.cancel = cancel
	t.mu.Unlock()
	r := f.Run(ctx, ForemanTask{Spec: t.spec, Sandbox: sandbox.Name(), CacheDir: s.files.dir.Name()})
	t.mu.Lock()
	t.cancel = nil
	t.mu.Unlock()
	t.output, t.execUsec = r.Output, r.Exec.Microseconds()
	if len(t.output) > maxOutput {
		t.output = t.output[:maxOutput]
	}
	switch {
	case r.Ran && r.TimedOut:
		t.status, t.exit = resultMaxRunTime, -1
	case r.Ran && r.Signal != 0:
		t.status, t.exit = resultSignal, r.Signal
	case r.Ran:
		t.status, t.exit = resultSuccess, r.Exit
	case r.InputMissing:
		t.status, t.exit = resultInputMissing, -1
	default:
		// Given back, for the master to run again elsewhere.
		t.status, t.exit, t.output = resultForsaken, 0, nil
	}
	if r.Err != nil {
		s.log.Warn("task on the foreman's workers", "task", t.spec.ID, "err", r.Err)
		if t.status == resultInputMissing {
			t.output = []byte(r.Err.Error() + "\n")
		}
	}
	return r.Ran
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

// prepare places every input in the sandbox, following no symbolic link.
func (t *task) prepare(files *cache, sandbox *os.File, p *placement) error {
	for _, in := range t.spec.Inputs {
		if err := files.place(p, sandbox, in); err != nil {
			return fmt.Errorf("input %s (%s): %w", in.Remote, in.CacheName, err)
		}
	}
	for _, d := range t.spec.EmptyDirs {
		dir, err := openDir(sandbox, d, true)
		if err != nil {
			return fmt.Errorf("directory %s: %w", d, err)
		}
		dir.Close()
	}
	return nil
}

// collect moves the task's outputs from its sandbox into the cache, where
// get finds them. A missing output is left missing.
func (t *task) collect(s *session, sandbox *os.File) {
	for _, o := range t.spec.Outputs {
		if err := s.files.collect(sandbox, o); err != nil {
			s.log.Warn("task output", "task", t.spec.ID, "output", o.Remote, "err", err)
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
	if t.cancel != nil {
		t.cancel()
	}
	if t.proc != nil {
		t.proc.Kill()
	}
}
