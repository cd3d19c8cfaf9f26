package funcs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rightsize/rightsize/funcs"
)

// BenchmarkProgramCall is the cost of one call of a program that does
// nothing (/bin/true), two calls at a time as on two cores: the process
// start, wait and bookkeeping of a program function.
func BenchmarkProgramCall(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "in")
	os.WriteFile(in, []byte("x"), 0o600)
	f, err := funcs.NewRegistry().OpenPair("/bin/true", funcs.Options{TempDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetParallelism(1)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.Call(context.Background(), funcs.Input{Path: in}, funcs.Input{Path: in}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
