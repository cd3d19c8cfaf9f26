package sparsematrix_test

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/rightsize/rightsize/sparsematrix"
)

// BenchmarkAppend measures the cost of appending one record to a real file:
// a small value (an All-Pairs score, a Wavefront sum) and a larger one. Each
// append is one write(2), which dominates; "discard" measures the encoding
// (and checksum) alone.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{8, 4096} {
		for _, dest := range []string{"file", "discard"} {
			b.Run(fmt.Sprintf("%s/value=%dB", dest, size), func(b *testing.B) {
				w := sparsematrix.NewWriter(io.Discard) // the encoding alone
				if dest == "file" {
					f, err := sparsematrix.Open(filepath.Join(b.TempDir(), "m"), nil)
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					w = f
				}
				value := make([]byte, size)
				for i := range value {
					value[i] = byte('0' + i%10)
				}
				b.SetBytes(int64(size))
				i := 0
				for b.Loop() {
					if err := w.Append(i%1000, i/1000, value); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
