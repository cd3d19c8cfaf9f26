package allpairs

import (
	"fmt"
	"io"

	"github.com/rightsize/rightsize/sparsematrix"
)

// WriteLines writes the cells of the sparse-matrix file at path — x the
// index of an item of a, y of an item of b, from 0 — to out as result lines,
// "Aname<TAB>Bname<TAB>result", in file order, and returns how many it wrote.
// A cell recorded more than once is written once, with its first value: the
// distributed master never records a cell twice, so a repeat can only come
// from a file pieced together by hand, and a function is side-effect free.
// A record outside the a×b matrix means the file belongs to another
// problem, and is an error.
func WriteLines(out io.Writer, a, b *Set, path string) (int64, error) {
	n, m := len(a.Items), len(b.Items)
	seen := make([]uint64, (n*m+63)/64)
	w := newLineWriter(out)
	var cells int64
	err := sparsematrix.Scan(path, func(r sparsematrix.Record) error {
		if r.X >= n || r.Y >= m {
			return fmt.Errorf("%s: cell (%d,%d) is outside the %d×%d matrix of %s × %s: the file belongs to another problem",
				path, r.X, r.Y, n, m, a.Source, b.Source)
		}
		k := r.X*m + r.Y
		if seen[k/64]&(1<<(k%64)) != 0 {
			return nil
		}
		seen[k/64] |= 1 << (k % 64)
		w.cell(a.Items[r.X].Name, b.Items[r.Y].Name, r.Value)
		cells++
		return w.err
	})
	if ferr := w.flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return cells, fmt.Errorf("write results: %w", err)
	}
	return cells, nil
}
