// Package foreman makes a Work Queue worker a foreman, as CCTools'
// work_queue_worker --foreman does: it connects to its master as one
// worker, offering what the workers behind it offer together, and runs
// each task it receives on them through a master of its own
// (workqueue.Master). A foreman stands in front of a cluster whose nodes
// cannot reach the master, or gathers many workers into one connection; a
// file the master marks cacheable is sent to the foreman once and from it
// to each of its workers once.
//
// A Foreman is the worker.Foreman of a worker.Config. It decides nothing
// of its own: the foreman's master schedules the tasks on its workers, and
// the master upstream schedules the foreman as one large worker.
package foreman

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/wire"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// A Foreman runs a worker's tasks on the workers connected to its own
// master. Create one with New and Close it after the worker ends.
type Foreman struct {
	m       *workqueue.Master
	changed chan struct{} // OfferChanged: a worker came or went
	look    chan struct{} // a worker joined: watch looks now
	every   time.Duration // how often watch looks anyway
	added   chan struct{} // a task was submitted: collect may wait again
	cancel  context.CancelFunc
	done    chan struct{} // collect and watch have ended

	mu      sync.Mutex
	waiting map[int]chan *workqueue.Result // by task ID
	offer   worker.Offer
}

// offerInterval is how often the foreman looks whether a worker has left
// (one that joins is seen at once).
const offerInterval = time.Second

// New starts the foreman's master as cfg says (cfg.Addr: where its
// workers connect; cfg.Project: the name it advertises to the catalog).
func New(cfg workqueue.Config) (*Foreman, error) {
	return newForeman(cfg, offerInterval)
}

// newForeman is New with watch looking every interval.
func newForeman(cfg workqueue.Config, every time.Duration) (*Foreman, error) {
	f := &Foreman{
		changed: make(chan struct{}, 1),
		look:    make(chan struct{}, 1),
		every:   every,
		added:   make(chan struct{}, 1),
		done:    make(chan struct{}),
		waiting: map[int]chan *workqueue.Result{},
	}
	joined := cfg.Joined
	cfg.Joined = func(info workqueue.WorkerInfo) {
		if joined != nil {
			joined(info)
		}
		// Not Stats here, from the master's loop: watch asks it,
		// once the worker is counted.
		select {
		case f.look <- struct{}{}:
		default:
		}
	}
	m, err := workqueue.Listen(cfg)
	if err != nil {
		return nil, err
	}
	f.m = m
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); f.collect(ctx) }()
	go func() { defer wg.Done(); f.watch(ctx) }()
	go func() { wg.Wait(); close(f.done) }()
	return f, nil
}

// Port returns the port the foreman's workers connect to.
func (f *Foreman) Port() int { return f.m.Port() }

// Master returns the foreman's own master, for its statistics.
func (f *Foreman) Master() *workqueue.Master { return f.m }

// Close stops the foreman's master, releasing its workers.
func (f *Foreman) Close() error {
	f.cancel()
	err := f.m.Close()
	<-f.done
	return err
}

// Offer returns what the foreman's workers offer together.
func (f *Foreman) Offer() worker.Offer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offer
}

// OfferChanged receives a value when Offer may have changed.
func (f *Foreman) OfferChanged() <-chan struct{} { return f.changed }

// signal tells the worker's session that Offer may have changed.
func (f *Foreman) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// watch keeps the offer up to date: at once when a worker joins, within
// offerInterval when one leaves.
func (f *Foreman) watch(ctx context.Context) {
	tick := time.NewTicker(f.every)
	defer tick.Stop()
	for {
		st := f.m.Stats()
		o := worker.Offer{Workers: st.WorkersConnected, Cores: st.CoresTotal, MemoryMB: st.MemoryTotal, DiskMB: st.DiskTotal, GPUs: st.GPUsTotal}
		f.mu.Lock()
		changed := o != f.offer
		f.offer = o
		f.mu.Unlock()
		if changed {
			f.signal()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-f.look:
		}
	}
}

// collect hands each finished task to the Run that waits for it.
func (f *Foreman) collect(ctx context.Context) {
	for {
		r, err := f.m.Wait(ctx)
		switch {
		case err == nil:
			f.mu.Lock()
			ch := f.waiting[r.ID]
			delete(f.waiting, r.ID)
			f.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		case errors.Is(err, workqueue.ErrEmpty):
			select {
			case <-f.added:
			case <-ctx.Done():
				return
			}
		default:
			return
		}
	}
}

// Run runs t on the foreman's workers (see worker.Foreman).
func (f *Foreman) Run(ctx context.Context, t worker.ForemanTask) worker.ForemanResult {
	task := taskOf(t)
	ch := make(chan *workqueue.Result, 1)
	// Registered before Wait can return it: under the lock Submit runs in.
	f.mu.Lock()
	id, err := f.m.Submit(task)
	if err == nil {
		f.waiting[id] = ch
	}
	f.mu.Unlock()
	if err != nil {
		return worker.ForemanResult{Retry: true, Err: err}
	}
	select {
	case f.added <- struct{}{}:
	default:
	}
	select {
	case r := <-ch:
		return resultOf(r)
	case <-ctx.Done():
		f.m.Cancel(id)
		f.mu.Lock()
		delete(f.waiting, id)
		f.mu.Unlock()
		return worker.ForemanResult{Retry: true, Err: ctx.Err()}
	case <-f.done:
		return worker.ForemanResult{Retry: true, Err: errors.New("the foreman has stopped")}
	}
}

// taskOf is the task of t for the foreman's master: its cached inputs from
// the worker's cache, where they keep their path from task to task (so
// that the foreman's workers cache them too), the others and its outputs
// in its sandbox.
func taskOf(t worker.ForemanTask) *workqueue.Task {
	s := t.Spec
	task := &workqueue.Task{
		Command:  s.Command,
		Env:      s.Env,
		Category: s.Category,
		Tag:      "task " + strconv.Itoa(s.ID),
		Resources: workqueue.Resources{
			Cores: max(s.Cores, 0), MemoryMB: max(s.MemoryMB, 0), DiskMB: max(s.DiskMB, 0), GPUs: max(s.GPUs, 0),
		},
		WallTime: time.Duration(s.WallTime) * time.Second,
	}
	for _, in := range s.Inputs {
		if in.Flags&wire.FlagCache != 0 {
			task.AddInput(filepath.Join(t.CacheDir, in.CacheName), in.Remote, true)
		} else {
			task.AddInput(filepath.Join(t.Sandbox, in.Remote), in.Remote, false)
		}
	}
	for _, d := range s.EmptyDirs {
		task.AddInput(filepath.Join(t.Sandbox, d), d, false)
	}
	for _, out := range s.Outputs {
		task.AddOutput(filepath.Join(t.Sandbox, out.Remote), out.Remote, false)
	}
	return task
}

// resultOf says how a task the foreman's master ran ended, as the worker
// reports it upstream.
func resultOf(r *workqueue.Result) worker.ForemanResult {
	res := worker.ForemanResult{Output: r.Output, Exec: r.Exec, Err: r.Err}
	switch r.Status {
	case workqueue.Success, workqueue.OutputMissing:
		// A missing output is the master's to find, as from any worker.
		res.Ran, res.Exit, res.Err = true, r.ExitCode, nil
	case workqueue.Signaled:
		res.Ran, res.Signal = true, r.ExitCode
	case workqueue.MaxRunTime:
		res.Ran, res.TimedOut = true, true
	case workqueue.InputMissing:
		res.InputMissing = true
	default:
		res.Retry = true
		if res.Err == nil {
			res.Err = fmt.Errorf("the foreman's workers: %v", r.Status)
		}
	}
	return res
}
