package factory

import (
	"fmt"
	"strings"
)

// Strategy is how a deficit of workers becomes batch requests: the
// acquisition strategies of seed 004 (Raicu et al., dynamic resource
// provisioning for Falkon, §2). A request of k workers is one batch job
// that runs one worker offering k times a worker's cores, memory and disk
// (Worker.Request): every batch driver asks for a job's cores on one host
// (--cpus-per-task, -pe smp, request_cpus), and a single worker leaves
// when all of it is idle, so the request is released whole, as the seed's
// batch systems release a request.
//
// Finer requests start sooner on a busy system, where the batch scheduler
// can backfill them into the slots it has free; coarser ones cost fewer
// submissions and start all together on an idle one. The seed's advice:
// AllAtOnce when the system is mostly idle, Additive or Exponential under
// medium load, OneAtATime under heavy load.
type Strategy int

const (
	// OneAtATime asks for n requests of one worker (the default: a job
	// per worker, as CCTools' factory does).
	OneAtATime Strategy = iota
	// Additive asks for 1, 2, 3, … workers, the last request cut to what
	// remains: 48 is 1…9 and 3.
	Additive
	// Exponential asks for 1, 2, 4, 8, … workers, the last request cut to
	// what remains: 48 is 1, 2, 4, 8, 16 and 17.
	Exponential
	// AllAtOnce asks for one request of n workers.
	AllAtOnce
	// Optimal asks for as many workers as the batch system has free, in
	// one request, and the rest when more are free (Plan.ObserveFree); it
	// needs a batch system that says what it has free.
	Optimal
)

var strategyNames = [...]string{"one-at-a-time", "additive", "exponential", "all-at-once", "optimal"}

func (s Strategy) String() string {
	if s >= 0 && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy reads a strategy's name: one-at-a-time, additive,
// exponential, all-at-once or optimal.
func ParseStrategy(name string) (Strategy, error) {
	for i, n := range strategyNames {
		if strings.EqualFold(n, name) {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown strategy %q: one-at-a-time, additive, exponential, all-at-once or optimal", name)
}

// Split turns a deficit of n workers into the sizes of the batch requests
// to submit, in order. free is how many workers the batch system could
// start now, used by Optimal only (which asks for nothing when free is not
// positive); the others ignore it.
func (s Strategy) Split(n, free int) []int {
	if n <= 0 {
		return nil
	}
	var out []int
	switch s {
	case AllAtOnce:
		return []int{n}
	case Optimal:
		if k := min(n, free); k > 0 {
			return []int{k}
		}
		return nil
	case Additive, Exponential:
		for size := 1; n > 0; {
			k := min(size, n)
			out = append(out, k)
			n -= k
			if s == Additive {
				size++
			} else {
				size *= 2
			}
		}
		return out
	}
	out = make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}
