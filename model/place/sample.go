package place

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gonum.org/v1/gonum/stat"
)

// A Sample is what timing a function on a few real inputs found.
type Sample struct {
	Calls  int     // the calls timed (several make one sample of a fast function)
	Mean   float64 // seconds per call over the sample
	StdDev float64
	// Slope and Intercept fit seconds = Intercept + Slope·bytes over the
	// sample's input sizes, when they varied enough to tell; Slope is 0
	// otherwise.
	Slope, Intercept float64
	MeanBytes        float64 // the sample's mean input size
}

// At predicts the mean time of a call on inputs of mean size bytes: the
// fitted line where the sample found one, its mean otherwise.
func (s Sample) At(bytes float64) float64 {
	if s.Slope <= 0 {
		return s.Mean
	}
	return max(s.Intercept+s.Slope*bytes, s.Mean/10)
}

// Value is the sample as a model input, for inputs of mean size bytes.
func (s Sample) Value(bytes float64) Value {
	calls := "calls"
	if s.Calls == 1 {
		calls = "call"
	}
	src := fmt.Sprintf("sampled here: %d %s, sd %s", s.Calls, calls, Seconds(s.StdDev))
	if s.Slope > 0 {
		src += fmt.Sprintf(", %s per MB of input, scaled to the problem's %.0f bytes", Seconds(s.Slope*1e6), bytes)
	}
	return Value{V: s.At(bytes), Source: src}
}

// sampleShare is the most of a problem's predicted work that timing its
// function may take: a sample is work thrown away.
const sampleShare = 0.02

// SampleCalls times call on the caller's choice of real inputs for about
// budget: at most 50 samples, each call cut off at 10 s (a function that
// slow needs no finer figure), and no more than 2% of what the problem's
// calls calls are predicted to take in all once two samples have come
// after the first round, nor ever more than 5% (a function so slow that a
// round reaches that needs no more). The calls run parallel at a time, as a
// multicore run would run them (pass this machine's cores): a sample then
// costs a fraction of the time, and a Wavefront's first cell, which has
// nothing to run beside it, costs nothing more to time on every core.
// call(ctx, i) runs the i-th call and returns the bytes of input it read;
// it must be safe to call from parallel goroutines; failing calls are timed
// like the others. The first round warms up (caches, the program's pages)
// and is not counted when two samples or more came after it. A sample of a
// function faster than a millisecond is several calls in a row, timed
// together: a single call that short measures the machine's scheduling (on
// a loaded machine, a call of 20 µs was timed at 0.3 to 6 ms), not the
// function.
func SampleCalls(ctx context.Context, budget time.Duration, calls int64, parallel int, call func(ctx context.Context, i int) (bytes float64, err error)) Sample {
	const callLimit, maxSamples, maxRepeat = 10 * time.Second, 50, 1000
	const batchTime = time.Millisecond
	parallel = max(parallel, 1)
	var secs, sizes []float64 // a sample's seconds and bytes per call
	var made []int            // a sample's calls
	var total time.Duration   // of the calls, summed: the work thrown away
	var wall time.Duration    // of the rounds
	var done int              // calls made
	enough := func() bool {
		if done == 0 {
			return false
		}
		share := float64(calls) * total.Seconds() / float64(done) * sampleShare
		return wall >= budget || len(secs) >= parallel+2 && total.Seconds() >= share || total.Seconds() >= 2.5*share
	}
	type timed struct {
		d     time.Duration
		bytes float64
		calls int
	}
	repeat := 1
	for len(secs) < maxSamples && !enough() && ctx.Err() == nil {
		round := make([]timed, min(parallel, maxSamples-len(secs)))
		var wg sync.WaitGroup
		start := time.Now()
		for k := range round {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var t timed
				began := time.Now()
				for t.calls < repeat && (t.calls == 0 || time.Since(began) < callLimit) {
					cctx, cancel := context.WithTimeout(ctx, callLimit)
					// Each round's j-th calls are one of every goroutine.
					n, _ := call(cctx, done+k+t.calls*len(round))
					cancel()
					t.bytes += n
					t.calls++
				}
				t.d = min(time.Since(began), time.Duration(t.calls)*callLimit)
				round[k] = t
			}()
		}
		wg.Wait()
		wall += time.Since(start)
		slow := false
		var roundTime time.Duration
		var roundCalls int
		for _, c := range round {
			total += c.d
			done += c.calls
			roundTime += c.d
			roundCalls += c.calls
			secs = append(secs, max(c.d.Seconds()/float64(c.calls), 1e-6))
			sizes = append(sizes, c.bytes/float64(c.calls))
			made = append(made, c.calls)
			slow = slow || c.d >= callLimit
		}
		if slow {
			break
		}
		if per := roundTime / time.Duration(roundCalls); per < batchTime {
			repeat = min(int(batchTime/max(per, time.Microsecond))+1, maxRepeat)
		}
	}
	warm := min(parallel, len(secs))
	if len(secs) < warm+2 {
		warm = 0
	}
	s := NewSample(secs[warm:], sizes[warm:])
	s.Calls = 0
	for _, n := range made[warm:] {
		s.Calls += n
	}
	return s
}

// NewSample summarises call times secs on inputs of sizes bytes.
func NewSample(secs, sizes []float64) Sample {
	s := Sample{Calls: len(secs)}
	if len(secs) == 0 {
		return s
	}
	s.Mean, s.StdDev = stat.MeanStdDev(secs, nil)
	if len(secs) == 1 {
		s.StdDev = 0
	}
	s.MeanBytes = stat.Mean(sizes, nil)
	// A fit needs a few points and sizes that differ by more than noise;
	// it is kept only if it explains a good part of the variance.
	if len(secs) >= 5 && stat.StdDev(sizes, nil) > 0.1*s.MeanBytes {
		alpha, beta := stat.LinearRegression(sizes, secs, nil, false)
		if beta > 0 && stat.RSquared(sizes, secs, nil, alpha, beta) > 0.5 {
			s.Intercept, s.Slope = alpha, beta
		}
	}
	return s
}
