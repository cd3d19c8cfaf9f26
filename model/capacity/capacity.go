// Package capacity estimates the capacity of a master-worker application:
// how many workers a master can keep busy before its own sending,
// receiving and bookkeeping become the bottleneck (seed 000 Eq. 4.5;
// Kremer-Herman, Tovar and Thain's exponentially weighted form).
//
// It only does the arithmetic on task timings the master measures; it does
// not measure anything or decide how many workers to start.
package capacity

import (
	"math"
	"time"
)

// Sample is one successfully finished task as the master saw it.
type Sample struct {
	Exec     time.Duration // running on the worker
	Transfer time.Duration // sending its inputs and receiving its outputs
	Think    time.Duration // the master's own work on it, serving no worker
}

// Window is Eq. 4.5 over the most recent tasks:
//
//	C = mean(T_exe) / (mean(T_tran) + mean(T_think))
//
// averaged over the last max(10, busy workers) samples, so that the estimate
// follows a workload whose computation-to-data ratio changes (inputs getting
// cached, a new stage). The zero value is ready to use.
type Window struct {
	ring []Sample
	next int
	full bool
}

// MinSamples is the lower bound on the averaging window (seed 000 §4.3.2).
const MinSamples = 10

// maxWindow bounds memory however many workers there are.
const maxWindow = 100000

// Add records a finished task.
func (w *Window) Add(s Sample) {
	if len(w.ring) < maxWindow && !w.full {
		w.ring = append(w.ring, s)
		return
	}
	w.full = true
	w.ring[w.next] = s
	w.next = (w.next + 1) % len(w.ring)
}

// Len is how many samples are held.
func (w *Window) Len() int { return len(w.ring) }

// Capacity returns Eq. 4.5 over the last max(10, busyWorkers) samples, and
// false while there are no samples. A master that spends no measurable time
// per task has unbounded capacity; that is reported as +Inf.
func (w *Window) Capacity(busyWorkers int) (float64, bool) {
	exe, tran, think, ok := w.sums(busyWorkers)
	if !ok {
		return 0, false
	}
	return ratio(exe, tran+think), true
}

// Workers returns the workers the master keeps busy, over the same samples
// as Capacity: seed 003's form with think time,
//
//	W = (mean(T_exe) + mean(T_tran)) / (mean(T_tran) + mean(T_think))
//
// which is Eq. 4.5 plus one when the master thinks for no time: while the
// master moves one task's files, that task's worker is busy too (C·T_w =
// T_m, with T_w = 1/(T_exe + T_tran)). It is the count to compare with the
// worker count past which throughput stops growing (bench/capacity).
func (w *Window) Workers(busyWorkers int) (float64, bool) {
	exe, tran, think, ok := w.sums(busyWorkers)
	if !ok {
		return 0, false
	}
	return ratio(exe+tran, tran+think), true
}

func ratio(num, den time.Duration) float64 {
	if den <= 0 {
		return math.Inf(1)
	}
	return float64(num) / float64(den)
}

// sums adds up the last max(10, busyWorkers) samples.
func (w *Window) sums(busyWorkers int) (exe, tran, think time.Duration, ok bool) {
	n := min(max(MinSamples, busyWorkers), len(w.ring))
	if n == 0 {
		return 0, 0, 0, false
	}
	for i := 0; i < n; i++ {
		// newest first: the slot before next, wrapping
		j := (w.next - 1 - i + 2*len(w.ring)) % len(w.ring)
		if !w.full {
			j = len(w.ring) - 1 - i
		}
		s := w.ring[j]
		exe += s.Exec
		tran += s.Transfer
		think += s.Think
	}
	return exe, tran, think, true
}

// Alpha is the smoothing weight the paper found to work in practice.
const Alpha = 0.05

// EWMA is the exponentially weighted capacity with think time inside:
//
//	C_i = α·(t_e + t_io)/(t_z + t_io) + (1 − α)·C_{i−1},  C_0 = 0
//
// The zero value uses Alpha.
type EWMA struct {
	Alpha float64 // 0 means the package's Alpha
	c     float64
	n     int
}

// Add folds in one finished task. A task with no transfer or think time
// carries no information about the master's limit and is skipped.
func (e *EWMA) Add(s Sample) {
	den := (s.Think + s.Transfer).Seconds()
	if den <= 0 {
		return
	}
	a := e.Alpha
	if a <= 0 || a >= 1 {
		a = Alpha
	}
	inst := (s.Exec + s.Transfer).Seconds() / den
	e.c = a*inst + (1-a)*e.c
	e.n++
}

// Value is the current estimate, never below 1 (a master can always use one
// worker), and false before the first sample.
func (e *EWMA) Value() (float64, bool) {
	if e.n == 0 {
		return 0, false
	}
	return math.Max(1, e.c), true
}

// Raw is the estimate without the floor of 1.
func (e *EWMA) Raw() float64 { return e.c }
