// Package jobs follows the jobs of a distributed run for the distributed
// master (package distmaster): which blocks wait to be submitted, which job
// runs which block, how often each block has failed or been aborted, which
// running jobs are stragglers, when the batch system refuses so often that
// the run should halt, and how many jobs the master can keep out (its
// capacity, Limit). It is a state machine without I/O or clock, also driven
// by the simulator (model/sim).
package jobs

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/model/capacity"
)

// FastAbort configures the fast abort of straggling block jobs. It is
// package lifecycle's policy type, which Work Queue's scheduler applies too
// (workqueue.FastAbort, sched.FastAbort), by the same rule to the same
// statistics: a job running longer than Multiplier times the mean time of
// the finished jobs, or than the mean plus Sigmas (sample) standard
// deviations, never less than twice the mean, once MinSamples jobs have
// finished, is removed and submitted again, at most MaxAborts times per
// block. Each abort of a block raises its limit by one mean, so a block
// that is simply long is not killed for ever. BlockFor does not apply: the
// tracker sees jobs, not workers. The zero value is off.
type FastAbort = lifecycle.FastAbort

// Config configures a Tracker. The zero value of each field means its
// documented default.
type Config struct {
	// Retries is how many times a block whose job failed is submitted again
	// before the block is given up (lifecycle.Retries; default 2: three
	// attempts).
	Retries lifecycle.Retries
	// MaxJobs bounds the jobs submitted and not ended (default 1000);
	// the master's measured capacity may bound them further (Limit).
	MaxJobs int
	// FastAbort is the tracker's own straggler timer, for batch systems
	// that have none; leave it off for Work Queue, which aborts stragglers
	// itself.
	FastAbort FastAbort
	// MaxRefused is how many submissions in a row the batch system may
	// refuse before the run halts (default 3).
	MaxRefused int
}

func (c *Config) fill() {
	if c.MaxJobs <= 0 {
		c.MaxJobs = 1000
	}
	if c.MaxRefused <= 0 {
		c.MaxRefused = 3
	}
}

// Tracker follows the jobs of a distributed run: which blocks wait to be
// submitted, which job runs which block, how often each block has failed or
// been aborted, and which running jobs are stragglers. Blocks are numbered
// by the caller.
//
// It is a state machine: it does no I/O and reads no clock. Its driver
// reports what happened (Submitted, SubmitFailed, Started, Ended) with the
// time it happened, asks what to submit (Next) and, now and then, which jobs
// to remove as stragglers (Tick), and does it. It is not safe for
// concurrent use.
type Tracker struct {
	cfg    Config
	queue  []int // blocks to submit, in order
	blocks map[int]*blockRecord
	jobs   map[string]*jobRecord // jobs submitted and not ended
	busy   int                   // blocks handed out by Next and not yet ended
	stats  lifecycle.Stats       // running times of the finished jobs
	// capacity is Eq. 4.5 over the finished jobs: how many the master
	// keeps busy before its own work on each (writing it, submitting it,
	// taking its results) holds them back.
	capacity capacity.Window
	counts   Counts
	// refused counts the submissions the batch system refused since it
	// last accepted one.
	refused int
}

// blockRecord is what the tracker knows of one block.
type blockRecord struct {
	failures int // failed attempts
	aborts   int // fast aborts
}

// jobRecord is one submitted job of a block.
type jobRecord struct {
	block     int
	submitted time.Time
	started   time.Time     // when it was seen starting; zero until then
	spent     time.Duration // the master's own time on it (Spent)
}

// Counts count what happened to the run's blocks and jobs.
type Counts struct {
	Jobs       int // jobs submitted
	Done       int // blocks finished
	Failed     int // blocks given up
	Retries    int // jobs submitted again after a failure
	FastAborts int // stragglers removed and submitted again
}

// New returns a Tracker with no blocks.
func New(cfg Config) *Tracker {
	cfg.fill()
	return &Tracker{cfg: cfg, blocks: map[int]*blockRecord{}, jobs: map[string]*jobRecord{}}
}

// Add queues blocks to be submitted. Adding a block twice is a programming
// error and panics.
func (t *Tracker) Add(blocks ...int) {
	for _, b := range blocks {
		if _, ok := t.blocks[b]; ok {
			panic(fmt.Sprintf("distmaster: block %d added twice", b))
		}
		t.blocks[b] = &blockRecord{}
		t.queue = append(t.queue, b)
	}
}

// Next hands out a block to submit, with the number of its earlier
// attempts, or reports false when none is queued or MaxJobs are out. The
// driver then calls Submitted or SubmitFailed for it.
func (t *Tracker) Next() (block, attempt int, ok bool) {
	if len(t.queue) == 0 || t.busy >= t.Limit() {
		return 0, 0, false
	}
	block = t.queue[0]
	t.queue = t.queue[1:]
	r := t.blocks[block]
	t.busy++
	return block, r.failures + r.aborts, true
}

// Limit is how many jobs may be out at once: MaxJobs, or fewer once
// enough jobs have finished to measure the master's capacity (seed 000
// Eq. 4.5: their running time over the master's own time on each, Spent),
// so that no more jobs wait on the master than it can serve.
func (t *Tracker) Limit() int {
	limit := t.cfg.MaxJobs
	if t.capacity.Len() >= capacity.MinSamples {
		if c, ok := t.capacity.Capacity(t.busy); ok {
			limit = min(limit, max(1, int(min(c, float64(limit)))))
		}
	}
	return limit
}

// Spent reports time the master spent on job, as it wrote, submitted or
// took the results of it.
func (t *Tracker) Spent(job string, d time.Duration) {
	if j, ok := t.jobs[job]; ok {
		j.spent += d
	}
}

// Submitted reports that block's job was accepted by the batch system at
// time now under ID job.
func (t *Tracker) Submitted(block int, job string, now time.Time) {
	t.jobs[job] = &jobRecord{block: block, submitted: now}
	t.counts.Jobs++
	t.refused = 0
}

// SubmitFailed reports that block's job could not be submitted; it counts
// as a failed attempt. An error that is not about one of the job's files
// (fs.PathError: a file missing here is the block's problem) is the batch
// system refusing the job; when it has refused MaxRefused in a row, with
// every block asking the same, it takes none (it is down, or cannot run
// what is asked), and the Outcome says Halt rather than have each block
// repeat the wait: the block is not counted as failed.
func (t *Tracker) SubmitFailed(block int, err error) Outcome {
	if !errors.As(err, new(*fs.PathError)) {
		if t.refused++; t.refused >= t.cfg.MaxRefused {
			t.busy--
			t.queue = append([]int{block}, t.queue...)
			r := t.blocks[block]
			return Outcome{Block: block, Known: true, Halt: true, Refused: t.refused, Err: err, Attempts: r.failures + r.aborts}
		}
	}
	return t.fail(block, fmt.Errorf("submit: %w", err))
}

// Started reports that job was seen running at time now. Only a job seen
// running can be a straggler, its running time counted from then: time in
// a batch queue is not slowness.
func (t *Tracker) Started(job string, now time.Time) {
	if j, ok := t.jobs[job]; ok {
		j.started = now
	}
}

// Outcome says what a job's end means for its block.
type Outcome struct {
	Block int
	// Known is false for a job the tracker no longer follows: a straggler
	// it aborted, whose end no longer matters.
	Known bool
	// Done: the block is finished. Retry: it failed and is queued again.
	// GaveUp: it failed for the last time; Err says why.
	Done, Retry, GaveUp bool
	Err                 error
	// Halt: the batch system refused Refused submissions in a row, this
	// one the last; the run should stop (see SubmitFailed).
	Halt    bool
	Refused int
	// Attempts is how many jobs the block has had, this one included.
	Attempts int
}

// Ended reports that job ended at time now: successfully (err nil), its
// block complete, or not, with the reason.
func (t *Tracker) Ended(job string, now time.Time, err error) Outcome {
	j, ok := t.jobs[job]
	if !ok {
		return Outcome{}
	}
	delete(t.jobs, job)
	if err != nil {
		return t.fail(j.block, err)
	}
	r := t.blocks[j.block]
	t.busy--
	t.counts.Done++
	begin := j.started
	if begin.IsZero() {
		begin = j.submitted // it started and ended between two looks
	}
	t.stats.Add(now.Sub(begin))
	t.capacity.Add(capacity.Sample{Exec: now.Sub(begin), Think: j.spent})
	return Outcome{Block: j.block, Known: true, Done: true, Attempts: r.failures + r.aborts + 1}
}

func (t *Tracker) fail(block int, err error) Outcome {
	r := t.blocks[block]
	r.failures++
	t.busy--
	out := Outcome{Block: block, Known: true, Err: err, Attempts: r.failures + r.aborts}
	if r.failures > t.cfg.Retries.Limit(2) {
		t.counts.Failed++
		out.GaveUp = true
		return out
	}
	t.counts.Retries++
	// A retry goes first: the blocks after it may depend on it.
	t.queue = append([]int{block}, t.queue...)
	out.Retry = true
	return out
}

// Straggler is a job that Tick removed, and why.
type Straggler struct {
	Job   string
	Block int
	// Ran is how long it had run, Limit the fast-abort limit it passed,
	// Mean the mean time of the finished jobs.
	Ran, Limit, Mean time.Duration
	// Abort is the number of this abort of the block, from 1; Final says
	// the block will not be aborted again (FastAbort.MaxAborts).
	Abort int
	Final bool
}

// Tick returns the jobs running past the fast-abort limit at time now, for
// the driver to remove. Their blocks are queued again at once, ahead of the
// others; the removed jobs' ends will be unknown to Ended.
func (t *Tracker) Tick(now time.Time) []Straggler {
	var slow []Straggler
	for id, j := range t.jobs {
		r := t.blocks[j.block]
		limit, ok := t.cfg.FastAbort.Limit(t.stats, r.aborts)
		if ran := now.Sub(j.started); ok && !j.started.IsZero() && ran > limit {
			slow = append(slow, Straggler{Job: id, Block: j.block, Ran: ran, Limit: limit, Mean: t.stats.Mean()})
		}
	}
	// In block order, so that the same events give the same queue.
	slices.SortFunc(slow, func(a, b Straggler) int { return cmp.Compare(a.Block, b.Block) })
	for i, s := range slow {
		delete(t.jobs, s.Job)
		r := t.blocks[s.Block]
		r.aborts++
		_, more := t.cfg.FastAbort.Limit(t.stats, r.aborts)
		slow[i].Abort, slow[i].Final = r.aborts, !more
		t.busy--
		t.counts.FastAborts++
		t.queue = append([]int{s.Block}, t.queue...)
	}
	return slow
}

// Idle reports whether no block is queued or out.
func (t *Tracker) Idle() bool { return len(t.queue) == 0 && t.busy == 0 }

// Running returns the IDs of the jobs submitted and not ended.
func (t *Tracker) Running() []string {
	ids := make([]string, 0, len(t.jobs))
	for id := range t.jobs {
		ids = append(ids, id)
	}
	return ids
}

// Counts returns what has happened so far.
func (t *Tracker) Counts() Counts { return t.counts }

// MeanJobTime returns the mean running time of the finished jobs, or 0.
func (t *Tracker) MeanJobTime() time.Duration { return t.stats.Mean() }
