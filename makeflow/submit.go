package makeflow

import (
	"errors"
	"fmt"
	"time"

	"github.com/rightsize/rightsize/batch"
)

// DefaultSubmitTimeout is how long a run keeps trying to submit a job
// that the batch system refuses, as CCTools' -S defaults to.
const DefaultSubmitTimeout = time.Hour

// firstSubmitWait is the first pause before trying a refused submission
// again; each pause doubles, up to the timeout, as in CCTools.
const firstSubmitWait = time.Second

// A submitRetry paces the attempts at submitting one job that the batch
// system refused: it has no clock of its own, so that its decisions can be
// tested on logical time.
type submitRetry struct {
	start   Start
	job     *Job
	giveUp  time.Time     // past this, the job fails
	wait    time.Duration // the next pause
	timeout time.Duration
	timer   *time.Timer // the pending pause, for abort
}

// newSubmitRetry starts pacing a job first refused at now.
func newSubmitRetry(st Start, job *Job, now time.Time, timeout, first time.Duration) *submitRetry {
	return &submitRetry{start: st, job: job, giveUp: now.Add(timeout), wait: min(first, timeout), timeout: timeout}
}

// next returns the pause before trying again after a refusal at now, or
// false once the timeout has passed.
func (r *submitRetry) next(now time.Time) (time.Duration, bool) {
	if now.After(r.giveUp) {
		return 0, false
	}
	wait := r.wait
	r.wait = min(r.timeout, 2*r.wait)
	return wait, true
}

// transientSubmitError reports whether a refused submission is worth
// trying again: the batch system's own command failed (a controller that
// does not answer, a full queue), as opposed to a job that is wrong (a
// missing input, an invalid environment), which no wait mends.
func transientSubmitError(err error) bool {
	var ce *batch.CommandError
	return errors.As(err, &ce)
}

// retrySubmit arranges for a refused job to be submitted again after the
// pause its submitRetry decides, and reports whether it will be; the rule
// keeps its slot meanwhile.
func (d *driver) retrySubmit(st Start, job *Job, err error) bool {
	timeout := d.opts.SubmitTimeout
	if timeout < 0 || !transientSubmitError(err) || d.aborting {
		return false
	}
	if timeout == 0 {
		timeout = DefaultSubmitTimeout
	}
	id := st.Rule
	now := time.Now()
	r := d.retries[id]
	if r == nil {
		first := d.opts.firstSubmitWait
		if first <= 0 {
			first = firstSubmitWait
		}
		r = newSubmitRetry(st, job, now, timeout, first)
		d.retries[id] = r
	}
	wait, ok := r.next(now)
	if !ok {
		delete(d.retries, id)
		fmt.Fprintf(d.out, "rule %d (%s): unable to submit the job after %v: %v\n", id, job.Rule.Pos, timeout, err)
		return false
	}
	fmt.Fprintf(d.out, "rule %d (%s): couldn't submit batch job, still trying in %v: %v\n", id, job.Rule.Pos, wait, err)
	d.running++
	r.timer = time.AfterFunc(wait, func() { d.resubmit <- id })
	return true
}

// resubmitted queues a job whose pause after a refusal is over.
func (d *driver) resubmitted(id int) {
	d.running--
	r := d.retries[id]
	if r == nil {
		return
	}
	if d.aborting {
		delete(d.retries, id)
		d.sched.Abort(id)
		return
	}
	d.pending = append(d.pending, r.start)
}

// stopRetries gives up the pending pauses when the run is stopped: their
// rules count as aborted.
func (d *driver) stopRetries() {
	for id, r := range d.retries {
		if r.timer != nil && r.timer.Stop() {
			d.running--
			delete(d.retries, id)
			d.sched.Abort(id)
		}
	}
}
