package workqueue

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rightsize/rightsize/workqueue/sched"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// Resources are cores, memory (MB), disk (MB) and GPUs. A task that declares
// none runs with one core and a proportional share of its worker's memory
// and disk.
type Resources = sched.Resources

// FastAbort configures fast abort of stragglers (see sched.FastAbort): a
// multiplier of the category's mean task time, or the mean plus some
// standard deviations, active once MinSamples tasks have finished.
type FastAbort = sched.FastAbort

// Speculation configures speculative copies of overdue tasks on idle
// workers (see sched.Speculation); on by default.
type Speculation = sched.Speculation

// File is an input or output of a task.
type File struct {
	// Local is the path on the master's machine: read for an input, written
	// for an output. It is empty for an input buffer.
	Local string
	// Remote is the name the command sees in its sandbox, a relative path
	// without "..". Default: the base name of Local.
	Remote string
	// Data is the content of an input buffer (when Local is empty).
	Data []byte
	// Cache keeps the file on the worker after the task, so that later
	// tasks needing it do not transfer it again. A cached output stays on
	// the worker too and serves later tasks that read it as an input.
	Cache bool
}

// Task is a command to run on a worker. Fill it and pass it to Submit; do
// not change it afterwards.
type Task struct {
	// Command is run by /bin/sh -c in the task's sandbox.
	Command string
	Inputs  []File
	Outputs []File
	// Env holds NAME=VALUE entries added to the command's environment.
	Env []string
	// Resources are what the task needs; see Resources.
	Resources Resources
	// Category groups tasks of a kind for statistics and fast abort
	// (default "default").
	Category string
	// Tag is the application's own label, returned in the Result.
	Tag string
	// WallTime, if positive, limits the command's running time on the
	// worker.
	WallTime time.Duration
}

// AddInput adds an input file; remote "" means the base name of local.
func (t *Task) AddInput(local, remote string, cache bool) {
	t.Inputs = append(t.Inputs, File{Local: local, Remote: remote, Cache: cache})
}

// AddInputBuffer adds an input whose content is data.
func (t *Task) AddInputBuffer(data []byte, remote string, cache bool) {
	t.Inputs = append(t.Inputs, File{Data: data, Remote: remote, Cache: cache})
}

// AddOutput adds an output file fetched to local after the task.
func (t *Task) AddOutput(local, remote string, cache bool) {
	t.Outputs = append(t.Outputs, File{Local: local, Remote: remote, Cache: cache})
}

func (t *Task) validate() error {
	if t.Command == "" {
		return errors.New("task has no command")
	}
	r := t.Resources
	if r.Cores < 0 || r.MemoryMB < 0 || r.DiskMB < 0 || r.GPUs < 0 {
		return errors.New("task resources must not be negative")
	}
	check := func(kind string, files []File) error {
		for i, f := range files {
			remote := f.remote()
			if kind == "output" && f.Local == "" {
				return fmt.Errorf("output %d has no local path", i)
			}
			if f.Local == "" && f.Data == nil && kind == "input" {
				return fmt.Errorf("input %d has neither a local path nor data", i)
			}
			if err := wire.CheckRelativePath(remote); err != nil {
				return fmt.Errorf("%s %d: %w", kind, i, err)
			}
		}
		return nil
	}
	if err := check("input", t.Inputs); err != nil {
		return err
	}
	return check("output", t.Outputs)
}

func (f File) remote() string {
	if f.Remote != "" {
		return f.Remote
	}
	if f.Local != "" {
		return filepath.Base(f.Local)
	}
	return ""
}

// cacheName is the file's name in a worker's cache, built as CCTools builds
// it: cached files are named by their source so that every task shares one
// copy; uncached ones get a unique serial so they are never shared.
func (f File) cacheName(serial int64) string {
	id := "0"
	if !f.Cache {
		id = strconv.FormatInt(serial, 10)
	}
	if f.Local == "" {
		sum := md5.Sum(f.Data)
		return "buffer-" + id + "-" + hex.EncodeToString(sum[:])
	}
	abs, err := filepath.Abs(f.Local)
	if err != nil {
		abs = f.Local
	}
	sum := md5.Sum([]byte(abs))
	return "file-" + id + "-" + hex.EncodeToString(sum[:]) + "-" + plainName(filepath.Base(abs))
}

// plainName keeps a cache name to letters, digits, '.', '-' and '_': CCTools
// workers do not encode names in every message (missing), so a cache name
// must never need encoding. The name only helps people reading logs.
func plainName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// ResultCode says how a task ended, with CCTools' values.
type ResultCode int

// Result codes.
const (
	Success        ResultCode = 0  // the command ran; see ExitCode
	InputMissing   ResultCode = 1  // an input could not be read or placed
	OutputMissing  ResultCode = 2  // an output was not produced
	Signaled       ResultCode = 8  // the command was killed by a signal
	Forsaken       ResultCode = 40 // workers gave the task back too many times
	MaxRetries     ResultCode = 48 // the task lost its worker too many times
	MaxRunTime     ResultCode = 56 // the command ran past its WallTime
	OutputTransfer ResultCode = 80 // an output could not be fetched or stored
)

func (c ResultCode) String() string {
	switch c {
	case Success:
		return "success"
	case InputMissing:
		return "input missing"
	case OutputMissing:
		return "output missing"
	case Signaled:
		return "signal"
	case Forsaken:
		return "given back by its workers too many times"
	case MaxRetries:
		return "lost its worker too many times"
	case MaxRunTime:
		return "wall time exceeded"
	case OutputTransfer:
		return "output transfer failed"
	}
	return "result " + strconv.Itoa(int(c))
}

// Result is a finished task.
type Result struct {
	ID   int
	Tag  string
	Task *Task
	// Status is how the task ended; ExitCode is the command's exit status
	// when it ran (the signal number for Signaled).
	Status   ResultCode
	ExitCode int
	// Output is the command's stdout and stderr, interleaved.
	Output []byte
	// Worker is the address of the worker that ran it.
	Worker string
	// FastAborts is how many times the task was aborted as a straggler and
	// re-sent before this run.
	FastAborts int
	// Submitted, Dispatched and Finished are when the application submitted
	// it, when its last attempt was sent to a worker, and when the master
	// had all its outputs.
	Submitted, Dispatched, Finished time.Time
	// Exec is the command's running time as measured by the worker.
	Exec time.Duration
	// Transfer is the time spent sending its inputs and receiving its
	// outputs.
	Transfer time.Duration
	// netShare is its share of the master's network time (shareClock),
	// for the capacity estimate.
	netShare time.Duration
	// Err describes a failure that has no exit code (missing input, lost
	// worker, transfer error).
	Err error
}

// OK reports whether the task ran and exited 0 with all its outputs.
func (r *Result) OK() bool { return r.Status == Success && r.ExitCode == 0 }
