package makeflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rightsize/rightsize/batch"
)

// BatchOptions configures a Batch executor. The zero value suits a batch
// system whose hosts share this host's filesystem (SLURM, Grid Engine,
// HTCondor).
type BatchOptions struct {
	// ShipFiles says the driver runs commands on hosts that share no
	// filesystem with this one, each in a sandbox of its own, and moves
	// files there and back (Work Queue). Every input is then sent under its
	// remote name and every output fetched back, except files under
	// SharedFS; a file's name must stay inside the workflow directory (not
	// absolute, no leading ".."), or the rule must rename it (a->b), or it
	// must be under SharedFS. Check reports the files that break this.
	//
	// Without it the driver runs commands in place, in the workflow
	// directory, and a rule that renames files runs in a sandbox directory
	// beside it holding links to its inputs, as it does locally.
	ShipFiles bool

	// SharedFS are absolute directories that the execution hosts see under
	// the same names. With ShipFiles, a file under one of them is used in
	// place, not transferred, unless the rule renames it.
	SharedFS []string

	// Logger receives debug records; nil discards them.
	Logger *slog.Logger
}

// Check reports, each at its file:line:column, the files of w's remote
// rules (those not marked LOCAL) that the executor could not place where
// the command runs. Only ShipFiles restricts anything: the error is an
// ErrorList naming every absolute or escaping file name that is neither
// renamed nor under SharedFS.
func (o BatchOptions) Check(w *Workflow) error {
	var errs ErrorList
	for _, dir := range o.SharedFS {
		if !filepath.IsAbs(dir) {
			errs = append(errs, &Error{Pos: Pos{File: w.Path}, Msg: fmt.Sprintf("shared filesystem directory %s must be an absolute path", dir)})
		}
	}
	if !o.ShipFiles {
		return errs.err()
	}
	for _, r := range w.Rules {
		if r.onThisMachine() {
			continue
		}
		for _, f := range slices.Concat(r.Sources, r.Targets) {
			if f.Remote != "" || o.shared(f.Name) || !escapes(f.Name) {
				continue
			}
			if len(errs) > maxErrors {
				break
			}
			errs = append(errs, &Error{Pos: f.Pos, Msg: fmt.Sprintf(
				"%s: a rule that runs remotely runs in a sandbox of its own, where this name does not lead to the file; "+
					"rename it (%s->%s) and use that name in the command, or declare its directory shared (--shared-fs)",
				quoteName(f.Name), f.Name, filepath.Base(f.Name))})
		}
	}
	sortErrors(errs)
	return errs.err()
}

// escapes reports whether a file name leads outside the workflow directory.
func escapes(name string) bool {
	return filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../")
}

// shared reports whether the file name lies under a SharedFS directory.
func (o BatchOptions) shared(name string) bool {
	for _, dir := range o.SharedFS {
		dir = filepath.Clean(dir)
		if name == dir || strings.HasPrefix(name, dir+"/") || dir == "/" {
			return filepath.IsAbs(name)
		}
	}
	return false
}

// Batch is an Executor that runs jobs through a batch.Driver: on Work Queue
// workers, SLURM, Grid Engine or HTCondor. Each job becomes one batch job
// running the rule's command with the rule's environment, resources
// (CORES, MEMORY, DISK, WALL_TIME) and category.
//
// With ShipFiles (Work Queue), inputs are sent under their remote names
// and outputs fetched back; an input that several remote rules read is
// cached on the workers, so that each worker receives it once. Without
// it, the batch system runs the command in place on the shared filesystem.
//
// The commands' standard output is not brought back (batch systems keep
// only its end); a failed job's Result carries the end of its standard
// error (on Work Queue, of its interleaved output). Run calls Check
// before anything starts.
type Batch struct {
	d       batch.Driver
	opts    BatchOptions
	log     *slog.Logger
	results chan *Result
	ctx     context.Context
	stop    context.CancelFunc
	done    chan struct{}

	cached map[string]bool // inputs read by more than one remote rule
	seq    int64           // job numbers for drivers whose IDs are not numbers

	mu    sync.Mutex // held from a driver Submit until its job is recorded
	jobs  map[string]*batchJob
	byJob map[*Job]string
}

type batchJob struct {
	job     *Job
	sandbox string // a shared-filesystem job's sandbox, for a renaming rule
	started time.Time
}

var _ Executor = (*Batch)(nil)

// NewBatch returns an executor that submits jobs to d. Close closes d.
func NewBatch(d batch.Driver, opts BatchOptions) *Batch {
	ctx, stop := context.WithCancel(context.Background())
	b := &Batch{
		d:       d,
		opts:    opts,
		log:     opts.Logger,
		results: make(chan *Result, 64),
		ctx:     ctx,
		stop:    stop,
		done:    make(chan struct{}),
		cached:  map[string]bool{},
		jobs:    map[string]*batchJob{},
		byJob:   map[*Job]string{},
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	go b.loop()
	return b
}

// plan checks w for this executor and decides which inputs to cache. Run
// calls it before anything starts.
func (b *Batch) plan(w *Workflow) ErrorList {
	readers := map[string]int{}
	for _, r := range w.Rules {
		if r.onThisMachine() {
			continue
		}
		for _, f := range r.Sources {
			readers[f.Name]++
		}
	}
	for name, n := range readers {
		if n > 1 {
			b.cached[name] = true
		}
	}
	var list ErrorList
	errors.As(b.opts.Check(w), &list)
	return list
}

// Submit implements Executor: it submits the job to the batch system and
// returns the system's job number.
func (b *Batch) Submit(job *Job) (int64, error) {
	r := job.Rule
	bj := &batchJob{job: job}
	j := &batch.Job{
		Name:     "makeflow-" + strconv.Itoa(r.ID),
		Command:  job.Command,
		Dir:      job.Dir,
		Env:      r.Env,
		Category: r.Category,
		Resources: batch.Resources{
			Cores:    int(r.Resources.Cores),
			MemoryMB: r.Resources.MemoryMB,
			DiskMB:   r.Resources.DiskMB,
			WallTime: time.Duration(r.Resources.WallTimeS) * time.Second,
		},
	}
	switch {
	case b.opts.ShipFiles:
		var dirs []string
		for _, f := range r.Sources {
			if f.Remote == "" && b.opts.shared(f.Name) {
				continue
			}
			j.Inputs = append(j.Inputs, batch.File{Path: f.Name, Remote: f.RemoteName(), Cache: b.cached[f.Name]})
		}
		for _, f := range r.Targets {
			if f.Remote == "" && b.opts.shared(f.Name) || insideOther(f, r.Targets) {
				continue
			}
			j.Outputs = append(j.Outputs, batch.File{Path: f.Name, Remote: f.RemoteName()})
			if d := filepath.Dir(f.RemoteName()); d != "." && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
		// A sandbox starts with the inputs only: make the directories the
		// outputs go in, as a local run does.
		if len(dirs) > 0 {
			for i, d := range dirs {
				dirs[i] = shellQuote(d)
			}
			j.Command = "mkdir -p -- " + strings.Join(dirs, " ") + " || exit 1\n" + job.Command
		}
	case needsSandbox(r):
		sb, err := makeSandbox(job)
		if err != nil {
			return 0, err
		}
		bj.sandbox, j.Dir = sb, sb
		for _, f := range r.Sources {
			j.Inputs = append(j.Inputs, batch.File{Path: f.RemoteName()})
		}
		for _, f := range r.Targets {
			j.Outputs = append(j.Outputs, batch.File{Path: f.RemoteName()})
		}
	default:
		for _, f := range r.Sources {
			j.Inputs = append(j.Inputs, batch.File{Path: f.Name})
		}
		for _, f := range r.Targets {
			j.Outputs = append(j.Outputs, batch.File{Path: f.Name})
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	bj.started = time.Now()
	id, err := b.d.Submit(b.ctx, j)
	if err != nil {
		if bj.sandbox != "" {
			collectSandbox(job, bj.sandbox, false)
		}
		return 0, err
	}
	b.jobs[id] = bj
	b.byJob[job] = id
	b.log.Debug("submitted", "rule", r.ID, "batch_id", id)
	return b.number(id), nil
}

// number turns a batch job ID into the number the log records: the ID
// itself where it is one (Work Queue, SLURM, Grid Engine), its leading
// number otherwise (HTCondor's "cluster.proc"), else a count.
func (b *Batch) number(id string) int64 {
	end := 0
	for end < len(id) && '0' <= id[end] && id[end] <= '9' {
		end++
	}
	if n, err := strconv.ParseInt(id[:end], 10, 64); err == nil {
		return n
	}
	b.seq++
	return b.seq
}

// Results implements Executor.
func (b *Batch) Results() <-chan *Result { return b.results }

// Cancel implements Executor: it asks the batch system to remove the job.
func (b *Batch) Cancel(job *Job) {
	b.mu.Lock()
	id, ok := b.byJob[job]
	b.mu.Unlock()
	if !ok {
		return
	}
	if err := b.d.Remove(b.ctx, id); err != nil {
		b.log.Debug("remove failed", "rule", job.Rule.ID, "batch_id", id, "err", err)
	}
}

// Close implements Executor: it closes the driver (for Work Queue, the
// master, which releases its workers).
func (b *Batch) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := b.d.Close(ctx)
	b.stop()
	<-b.done
	return err
}

// loop turns the driver's final events into Results.
func (b *Batch) loop() {
	defer close(b.done)
	for ev := range b.d.Events() {
		if !ev.State.Final() {
			continue
		}
		b.mu.Lock()
		bj := b.jobs[ev.ID]
		if bj != nil {
			delete(b.jobs, ev.ID)
			delete(b.byJob, bj.job)
		}
		b.mu.Unlock()
		if bj == nil {
			continue
		}
		res := b.result(bj, ev)
		select {
		case b.results <- res:
		case <-b.ctx.Done():
			return
		}
	}
}

// result maps a job's final event to its Result.
func (b *Batch) result(bj *batchJob, ev batch.Event) *Result {
	res := &Result{Job: bj.job, ExitCode: -1, Started: ev.Started, Ended: ev.Ended}
	if res.Started.IsZero() {
		res.Started = bj.started
	}
	if res.Ended.IsZero() {
		res.Ended = time.Now()
	}
	switch {
	case ev.State == batch.Done:
		res.ExitCode = ev.ExitCode
	case errors.Is(ev.Err, batch.ErrRemoved):
		res.Canceled = true
	default:
		res.Err = ev.Err
		if res.Err == nil {
			res.Err = errors.New("the batch system gave no reason")
		}
	}
	res.Stderr = ev.Stderr
	if len(res.Stderr) > stderrTail {
		res.Stderr = res.Stderr[len(res.Stderr)-stderrTail:]
	}
	if bj.sandbox != "" {
		if err := collectSandbox(bj.job, bj.sandbox, res.OK()); err != nil && res.OK() {
			res.Err = err
		}
	}
	b.log.Debug("batch job ended", "rule", bj.job.Rule.ID, "batch_id", ev.ID, "status", res.Status())
	return res
}

// insideOther reports whether output f lies inside another output of the
// same rule, a directory, under the same relative name here and in the
// sandbox: fetching the directory brings it, and asking for it apart
// failed once the directory had been sent.
func insideOther(f File, targets []File) bool {
	for _, d := range targets {
		rel, ok := strings.CutPrefix(f.Name, d.Name+"/")
		if ok && f.RemoteName() == d.RemoteName()+"/"+rel {
			return true
		}
	}
	return false
}
