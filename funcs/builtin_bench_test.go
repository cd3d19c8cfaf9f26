package funcs_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
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

// BenchmarkSharedLibCall measures what a call of a .so function costs
// beyond the function itself: tiny inputs, as the engines pass them (an
// All-Pairs cell with its items' paths, a Wavefront cell with its label).
func BenchmarkSharedLibCall(b *testing.B) {
	reg := funcs.NewRegistry()
	ctx := context.Background()
	b.Run("pair", func(b *testing.B) {
		f, err := reg.OpenPair(testutil.BuildSharedLib(b, "testdata/bytediff.c"), funcs.Options{})
		if err != nil {
			b.Skip(err)
		}
		defer f.Close()
		x, y := funcs.Input{Path: "A/item1", Data: []byte("GATTACA")}, funcs.Input{Path: "B/item2", Data: []byte("GACTACA")}
		for b.Loop() {
			if _, err := f.Call(ctx, x, y); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cell", func(b *testing.B) {
		f, err := reg.OpenCell(testutil.BuildSharedLib(b, "testdata/sum.c"), funcs.Options{})
		if err != nil {
			b.Skip(err)
		}
		defer f.Close()
		x, y, d := funcs.Input{Data: []byte("40")}, funcs.Input{Data: []byte("1")}, funcs.Input{Data: []byte("1")}
		var label funcs.Label
		cellCtx := funcs.WithLabel(ctx, &label)
		for i := 0; b.Loop(); i++ {
			label.SetCell(i, i)
			if _, err := f.Call(cellCtx, x, y, d); err != nil {
				b.Fatal(err)
			}
		}
	})
}
