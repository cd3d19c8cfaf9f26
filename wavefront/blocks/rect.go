package blocks

import "fmt"

// Rect is a rectangle of cells: x in X … X+W-1, y in Y … Y+H-1. Cells are
// numbered from 1; row 0 and column 0 are the boundary.
type Rect struct{ X, Y, W, H int }

// Contains reports whether cell (x, y) is in r.
func (r Rect) Contains(x, y int) bool {
	return r.X <= x && x < r.X+r.W && r.Y <= y && y < r.Y+r.H
}

// Cells returns the number of cells in r.
func (r Rect) Cells() int { return r.W * r.H }

// Empty reports whether r holds no cells.
func (r Rect) Empty() bool { return r.W <= 0 || r.H <= 0 }

// Last returns the top-right cell of r: the one every other cell of r feeds.
func (r Rect) Last() (x, y int) { return r.X + r.W - 1, r.Y + r.H - 1 }

func (r Rect) String() string {
	return fmt.Sprintf("x %d…%d, y %d…%d", r.X, r.X+r.W-1, r.Y, r.Y+r.H-1)
}

// Validate reports a rectangle that is empty or reaches into the boundary.
func (r Rect) Validate() error {
	switch {
	case r.X < 1 || r.Y < 1:
		return fmt.Errorf("origin (%d,%d): cells start at (1,1); row 0 and column 0 are the boundary", r.X, r.Y)
	case r.W < 1 || r.H < 1:
		return fmt.Errorf("size %d×%d: a rectangle needs at least one cell", r.W, r.H)
	}
	return nil
}
