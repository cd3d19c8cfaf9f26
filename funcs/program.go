package funcs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rightsize/rightsize/internal/proc"
)

// killGrace is how long a program has between SIGTERM and SIGKILL.
const killGrace = time.Second

// program runs an external executable once per call, directly (proc.Spawn): no
// shell, no goroutines per call. Standard output and standard error go to
// files (memory files on Linux, unlinked temporary files elsewhere; reused
// from a free list) rather than pipes, which costs fewer system calls than
// pipes and cannot hang on a grandchild that keeps a pipe open.
//
// Each call runs in a process group of its own, killed when the call ends,
// so that nothing the program left in the background outlives the call;
// and registered with a keeper (internal/proc), which kills it should the
// calling process die first, even by kill -9.
type program struct {
	info   Info
	args   []string // argv[0] and the extra arguments
	opts   Options
	stdin  *os.File // /dev/null, shared by all calls
	slots  chan *outputFiles
	temps  atomic.Int64 // names of temporary input files
	keeper proc.Keeper
}

func newProgram(name, path string, opts Options) (*program, error) {
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	return &program{
		info:  Info{Kind: Program, Name: name, Path: path},
		args:  append([]string{path}, opts.Args...),
		opts:  opts,
		stdin: stdin,
		slots: make(chan *outputFiles, 64),
	}, nil
}

func (p *program) Info() Info { return p.info }

func (p *program) Close() error {
	p.keeper.Close()
	p.stdin.Close()
	for {
		select {
		case s := <-p.slots:
			s.close()
		default:
			return nil
		}
	}
}

func (p *program) tempDir() string {
	if p.opts.TempDir != "" {
		return p.opts.TempDir
	}
	return os.TempDir()
}

// getSlot returns empty output files for one call.
func (p *program) getSlot() (*outputFiles, error) {
	select {
	case s := <-p.slots:
		return s, nil
	default:
	}
	return newOutputFiles(p.tempDir())
}

// putSlot keeps s for the next call.
func (p *program) putSlot(s *outputFiles) {
	if !s.next() {
		s.close()
		return
	}
	select {
	case p.slots <- s:
	default:
		s.close()
	}
}

// Call runs the program on the inputs' paths and returns its standard output
// without trailing newlines.
func (p *program) Call(ctx context.Context, inputs ...Input) ([]byte, error) {
	argv := make([]string, 0, len(p.args)+len(inputs))
	argv = append(argv, p.args...)
	for _, in := range inputs {
		path := in.Path
		if path == "" {
			tmp, err := p.writeTemp(in.Data)
			if err != nil {
				return nil, p.fail(-1, nil, fmt.Errorf("write input: %w", err))
			}
			defer os.Remove(tmp)
			path = tmp
		}
		argv = append(argv, path)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slot, err := p.getSlot()
	if err != nil {
		return nil, p.fail(-1, nil, fmt.Errorf("create output file: %w", err))
	}
	out, err := p.run(ctx, argv, slot)
	p.putSlot(slot)
	return out, err
}

func (p *program) writeTemp(data []byte) (string, error) {
	name := filepath.Join(p.tempDir(), fmt.Sprintf("rightsize-in-%d-%d", os.Getpid(), p.temps.Add(1)))
	return name, os.WriteFile(name, data, 0o600)
}

func (p *program) run(ctx context.Context, argv []string, slot *outputFiles) ([]byte, error) {
	reg, err := p.keeper.Reserve()
	if err != nil {
		return nil, p.fail(-1, nil, err)
	}
	pid, err := proc.Spawn(argv[0], argv, &proc.SpawnAttr{Files: [3]*os.File{p.stdin, slot.stdout, slot.stderr}, Slot: reg})
	if err != nil {
		reg.Release()
		return nil, p.fail(-1, nil, err)
	}
	k := &killer{pid: pid}
	var timer *time.Timer
	if p.opts.Timeout > 0 {
		timer = time.AfterFunc(p.opts.Timeout, func() { k.terminate(true) })
	}
	stop := context.AfterFunc(ctx, func() { k.terminate(false) })

	// Wait for the exit without reaping, so that the process group cannot be
	// reused by another process while the killer may still signal it; kill
	// what the program left in its group; then reap.
	proc.WaitExit(pid)
	k.exited()
	syscall.Kill(-pid, syscall.SIGKILL)
	reg.Release()
	if timer != nil {
		timer.Stop()
	}
	stop()
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	switch {
	case err != nil:
		return nil, p.fail(-1, slot, fmt.Errorf("wait: %w", err))
	case k.timedOut:
		e := p.fail(-1, slot, nil)
		e.TimedOut, e.Timeout = true, p.opts.Timeout
		return nil, e
	case k.cancelled:
		return nil, ctx.Err()
	case ws.Signaled():
		e := p.fail(-1, slot, nil)
		e.Signal = ws.Signal()
		return nil, e
	case ws.ExitStatus() != 0:
		return nil, p.fail(ws.ExitStatus(), slot, nil)
	}
	out, err := slot.result(p.opts.maxResult())
	if err != nil {
		return nil, p.fail(-1, nil, err)
	}
	return out, nil
}

// fail builds a CallError with the tail of what the call wrote on its
// standard error, if slot is not nil.
func (p *program) fail(code int, slot *outputFiles, err error) *CallError {
	e := &CallError{Func: p.info.Name, ExitCode: code, Err: err}
	if slot != nil {
		e.Stderr = slot.stderrTail(p.opts.stderrTail())
	}
	return e
}

func trimNewlines(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// killer stops a running program's process group: SIGTERM, then SIGKILL
// after killGrace. It never signals after the program has exited, when the
// group's id could belong to someone else.
type killer struct {
	mu        sync.Mutex
	pid       int
	done      bool
	timedOut  bool
	cancelled bool
	hard      *time.Timer
}

func (k *killer) terminate(timeout bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done || k.timedOut || k.cancelled {
		return
	}
	if timeout {
		k.timedOut = true
	} else {
		k.cancelled = true
	}
	syscall.Kill(-k.pid, syscall.SIGTERM)
	k.hard = time.AfterFunc(killGrace, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if !k.done {
			syscall.Kill(-k.pid, syscall.SIGKILL)
		}
	})
}

func (k *killer) exited() {
	k.mu.Lock()
	k.done = true
	if k.hard != nil {
		k.hard.Stop()
	}
	k.mu.Unlock()
}

// programPair and programCell give a program the Pair and Cell signatures.
type programPair struct{ *program }

func (p programPair) Call(ctx context.Context, a, b Input) ([]byte, error) {
	return p.program.Call(ctx, a, b)
}

type programCell struct{ *program }

func (p programCell) Call(ctx context.Context, x, y, d Input) ([]byte, error) {
	return p.program.Call(ctx, x, y, d)
}

// errNotExecutable reports a program file that cannot be run.
var errNotExecutable = errors.New("is not executable")
