package workqueue

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/rightsize/rightsize/workqueue/sched"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// fileRef is a task's file with its cache name worked out.
type fileRef struct {
	File
	name   string // in the worker's cache
	remote string // in the sandbox
}

func (f fileRef) flags() int {
	if f.Cache {
		return wire.FlagCache
	}
	return 0
}

// entry is a submitted task as the master's loop tracks it. Fields after
// the first group are owned by the loop goroutine.
type entry struct {
	id        int
	task      *Task
	submitted time.Time
	inputs    []fileRef
	outputs   []fileRef
	sched     sched.Task

	// attempts are its attempts on workers that have not ended: running
	// (a speculative copy makes two), or whose outputs are coming.
	attempts []*attempt
	think    time.Duration
}

// attemptOn returns e's attempt on w, or nil.
func (e *entry) attemptOn(w *workerConn) *attempt {
	if e == nil || w == nil {
		return nil
	}
	for _, a := range e.attempts {
		if a.worker == w {
			return a
		}
	}
	return nil
}

// drop removes a from the attempts running, reporting whether it was one.
func (e *entry) drop(a *attempt) bool {
	for i, x := range e.attempts {
		if x == a {
			e.attempts = append(e.attempts[:i], e.attempts[i+1:]...)
			return true
		}
	}
	return false
}

// prepare works out cache names and the scheduler's view of the task.
func (e *entry) prepare(m *Master) {
	ref := func(f File) fileRef {
		return fileRef{File: f, name: f.cacheName(m.nextSerial.Add(1)), remote: f.remote()}
	}
	st := sched.Task{ID: sched.TaskID(e.id), Category: e.task.Category, Need: e.task.Resources}
	for _, f := range e.task.Inputs {
		r := ref(f)
		e.inputs = append(e.inputs, r)
		if !f.Cache {
			continue
		}
		size := int64(len(f.Data))
		if f.Local != "" {
			if info, err := os.Stat(f.Local); err == nil {
				size = info.Size()
			}
		}
		st.Inputs = append(st.Inputs, sched.Input{Key: r.name, Size: size})
	}
	for _, f := range e.task.Outputs {
		e.outputs = append(e.outputs, ref(f))
	}
	e.sched = st
}

// attempt is one dispatch of a task to a worker, under a wire task ID of
// its own so that a late result of an aborted attempt is never taken for a
// later one. Its fields are set by the loop before the worker's goroutines
// see it, except those marked atomic.
type attempt struct {
	e          *entry
	wire       int
	worker     *workerConn
	alloc      sched.Resources
	dispatched time.Time
	result     *Result      // its outputs are in (loop)
	sendTime   atomic.Int64 // nanoseconds spent sending inputs and the task
	sendShare  atomic.Int64 // the master's network time of it (shareClock)
}
