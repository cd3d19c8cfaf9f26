package funcs_test

import (
	"math/rand/v2"
	"testing"

	"github.com/rightsize/rightsize/funcs"
)

func BenchmarkByteDiff(b *testing.B) {
	for _, size := range []int{20 << 10, 1 << 20} {
		rng := rand.New(rand.NewPCG(1, 2))
		x, y := make([]byte, size), make([]byte, size)
		for i := range x {
			x[i], y[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		b.Run(byteSize(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				funcs.ByteDiff(x, y)
			}
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return string(rune('0'+n>>20)) + "MiB"
	}
	return "20KiB"
}
