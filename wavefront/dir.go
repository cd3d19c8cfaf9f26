package wavefront

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rightsize/rightsize/sparsematrix"
)

// MatrixFile is the name of the sparse-matrix result and checkpoint in an R
// directory (format in package sparsematrix).
const MatrixFile = "R.matrix"

// CellFile returns the name of the file holding cell (x, y): "R.x.y", as in
// CCTools' wavefront.
func CellFile(x, y int) string { return "R." + strconv.Itoa(x) + "." + strconv.Itoa(y) }

// parseCellFile parses "R.x.y".
func parseCellFile(name string) (x, y int, ok bool) {
	rest, ok := strings.CutPrefix(name, "R.")
	if !ok {
		return 0, 0, false
	}
	xs, ys, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, 0, false
	}
	x, errx := strconv.Atoi(xs)
	y, erry := strconv.Atoi(ys)
	if errx != nil || erry != nil || x < 0 || y < 0 || strconv.Itoa(x) != xs || strconv.Itoa(y) != ys {
		return 0, 0, false
	}
	return x, y, true
}

// Dir is an R directory: the boundary files R.i.0 and R.0.j, any other R.x.y
// files, and the sparse-matrix file R.matrix.
type Dir struct {
	Path string
	// boundary holds the cells of row 0 and column 0 that have a file.
	boundary map[sparsematrix.Key]bool
}

// OpenDir lists the R directory at path.
func OpenDir(path string) (*Dir, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("open the R directory %s: %w", path, err)
	}
	d := &Dir{Path: path, boundary: map[sparsematrix.Key]bool{}}
	for _, e := range entries {
		if x, y, ok := parseCellFile(e.Name()); ok && (x == 0 || y == 0) && !e.IsDir() {
			d.boundary[sparsematrix.Key{X: x, Y: y}] = true
		}
	}
	return d, nil
}

// CellPath returns the path of cell (x, y)'s file.
func (d *Dir) CellPath(x, y int) string { return filepath.Join(d.Path, CellFile(x, y)) }

// MatrixPath returns the path of the directory's sparse-matrix file.
func (d *Dir) MatrixPath() string { return filepath.Join(d.Path, MatrixFile) }

// Boundary returns the boundary cells that have a file, in no order.
func (d *Dir) Boundary() []sparsematrix.Key {
	keys := make([]sparsematrix.Key, 0, len(d.boundary))
	for k := range d.boundary {
		keys = append(keys, k)
	}
	return keys
}

// HasFile reports whether cell (x, y) has a file R.x.y.
func (d *Dir) HasFile(x, y int) bool {
	if x == 0 || y == 0 {
		return d.boundary[sparsematrix.Key{X: x, Y: y}]
	}
	st, err := os.Stat(d.CellPath(x, y))
	return err == nil && st.Mode().IsRegular()
}

// WriteCell writes value to the file R.x.y atomically (a temporary file
// renamed into place), so that a crash never leaves a half-written cell.
func (d *Dir) WriteCell(x, y int, value []byte) (string, error) {
	path := d.CellPath(x, y)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, value, 0o644); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// BoundarySize returns the size X×Y of the problem whose boundary holds the
// given cells (cells off the boundary are ignored): R[0,0], R[1,0] … R[X,0]
// and R[0,1] … R[0,Y] must all be there, with no gaps. With n > 0 the
// problem is n×n and the boundary must reach at least that far; cells beyond
// it are ignored.
func BoundarySize(cells []sparsematrix.Key, n int) (x, y int, err error) {
	var xs, ys []int
	corner := false
	for _, c := range cells {
		switch {
		case c.X == 0 && c.Y == 0:
			corner = true
		case c.Y == 0:
			xs = append(xs, c.X)
		case c.X == 0:
			ys = append(ys, c.Y)
		}
	}
	if !corner && len(xs) == 0 && len(ys) == 0 {
		return 0, 0, errors.New("no boundary: expected the files R.0.0, R.1.0 … R.X.0 and R.0.1 … R.0.Y")
	}
	if !corner {
		return 0, 0, errors.New("the boundary has no R.0.0 (the corner, the diagonal input of cell (1,1))")
	}
	if x, err = extent(xs, n, func(i int) string { return CellFile(i, 0) }); err != nil {
		return 0, 0, err
	}
	if y, err = extent(ys, n, func(j int) string { return CellFile(0, j) }); err != nil {
		return 0, 0, err
	}
	return x, y, nil
}

// extent returns how far 1, 2, 3, … runs without a gap in idx.
func extent(idx []int, n int, name func(int) string) (int, error) {
	slices.Sort(idx)
	idx = slices.Compact(idx)
	if len(idx) == 0 {
		return 0, fmt.Errorf("the boundary has no %s: it needs at least one cell in each direction", name(1))
	}
	for k, v := range idx {
		if v == k+1 {
			continue
		}
		if n > 0 && k+1 > n {
			break
		}
		last := idx[len(idx)-1]
		return 0, fmt.Errorf("ragged boundary: %s is missing, but %s exists", name(k+1), name(last))
	}
	reach := idx[len(idx)-1]
	if n > 0 {
		if reach < n {
			return 0, fmt.Errorf("the boundary is too short for %d×%d: %s is missing (it ends at %s)", n, n, name(reach+1), name(reach))
		}
		return n, nil
	}
	return reach, nil
}
