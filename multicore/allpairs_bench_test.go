package multicore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/multicore"
)

// BenchmarkAllPairsBytediff is seed 000's Fig. 3.4 at a fifth of its
// height (200×10 items of 1 MiB, builtin:bytediff, every core), beside its
// compute floor: the same number of calls on two buffers already in the
// cache. The items are in the page cache, so the difference is what the
// engine adds to the calls: mapping A's rows and reading B's items, the
// sections of A streaming from memory and B's from the shared cache rather
// than the core's own, scheduling. Run with -cpuprofile to see which.
func BenchmarkAllPairsBytediff(b *testing.B) {
	const itemSize = 1 << 20
	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	write := func(name string) string {
		data := make([]byte, itemSize)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		return p
	}
	var as, bs []string
	for i := range 200 {
		as = append(as, write(fmt.Sprintf("a%03d", i)))
	}
	for j := range 10 {
		bs = append(bs, write(fmt.Sprintf("b%03d", j)))
	}
	f, err := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cells := len(as) * len(bs)
	cores := runtime.GOMAXPROCS(0)

	b.Run("blocked", func(b *testing.B) {
		for b.Loop() {
			var failed atomic.Int64
			ap := &multicore.AllPairs{A: as, B: bs, Func: f, Cores: cores, Results: func(rs []multicore.CellResult) {
				for _, r := range rs {
					if r.Err != nil {
						failed.Add(1)
					}
				}
			}}
			if err := ap.Run(context.Background()); err != nil || failed.Load() > 0 {
				b.Fatalf("Run: %v, %d cells failed", err, failed.Load())
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*cells)/1e3, "µs/cell")
	})
	b.Run("compute-floor", func(b *testing.B) {
		x, y := make([]byte, itemSize), make([]byte, itemSize)
		for i := range x {
			x[i], y[i] = byte(i*7), byte(i*13)
		}
		ctx := context.Background()
		for b.Loop() {
			var next atomic.Int64
			var wg sync.WaitGroup
			for range cores {
				wg.Go(func() {
					for next.Add(1) <= int64(cells) {
						if _, err := f.Call(ctx, funcs.Input{Data: x}, funcs.Input{Data: y}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*cells)/1e3, "µs/cell")
	})
}
