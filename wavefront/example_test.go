package wavefront_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
)

// A program that embeds the engines resumes a Wavefront through its
// Checkpoint: a run that was stopped part way (here, one that computed only
// the lower-left 5×5 cells) is completed by a later run that computes only
// the cells the checkpoint lacks.
func ExampleCheckpoint() {
	rdir, err := os.MkdirTemp("", "wavefront-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(rdir)
	for i := range 10 {
		os.WriteFile(filepath.Join(rdir, wavefront.CellFile(i, 0)), []byte(strconv.Itoa(i)), 0o644)
		os.WriteFile(filepath.Join(rdir, wavefront.CellFile(0, i)), []byte(strconv.Itoa(i)), 0o644)
	}
	sum, err := funcs.NewRegistry().OpenCell("builtin:sum", funcs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sum.Close()

	run := func(r wavefront.Rect) {
		dir, err := wavefront.OpenDir(rdir)
		if err != nil {
			log.Fatal(err)
		}
		ck, err := wavefront.OpenCheckpoint(dir, "") // rdir/R.matrix
		if err != nil {
			log.Fatal(err)
		}
		defer ck.Close()
		if _, err := ck.Reconcile(sum.Info(), "", false, r); err != nil {
			log.Fatal(err) // another function, say
		}
		res, err := multicore.RunWavefront(context.Background(), multicore.Wavefront{
			Cell: sum, Region: r, Value: ck.Value, Done: ck.Done(r), Out: ck,
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%v: computed %d, %d already done\n", r, res.Computed, res.Skipped)
	}
	run(wavefront.Rect{X: 1, Y: 1, W: 5, H: 5})
	run(wavefront.Rect{X: 1, Y: 1, W: 9, H: 9})

	m, err := sparsematrix.Load(filepath.Join(rdir, wavefront.MatrixFile))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("R[9,9] = %s\n", m[sparsematrix.Key{X: 9, Y: 9}])
	// Output:
	// x 1…5, y 1…5: computed 25, 0 already done
	// x 1…9, y 1…9: computed 56, 25 already done
	// R[9,9] = 1854882
}
