package wavefront

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"sync/atomic"
)

// CellState is where a cell is in a run.
type CellState uint32

const (
	Incomplete CellState = iota // not computed yet
	Running                     // handed to a core or a worker
	Complete                    // computed (in this run or an earlier one)
	Failed                      // the function failed on it
)

// The picture's colours, as in seed 000's Fig. 3.8.
var stateColors = [...]color.RGBA{
	Incomplete: {0xd0, 0x20, 0x20, 0xff}, // red
	Running:    {0x20, 0xc0, 0x20, 0xff}, // green
	Complete:   {0x20, 0x40, 0xd0, 0xff}, // blue
	Failed:     {0x00, 0x00, 0x00, 0xff}, // black
}

// StateGrid holds the state of every cell of a rectangle. Set and At are
// safe to call from many goroutines at once, so that the cores computing
// cells and the goroutine drawing the picture need no lock.
type StateGrid struct {
	r     Rect
	cells []atomic.Uint32
}

// NewStateGrid returns a grid of r's cells, all Incomplete.
func NewStateGrid(r Rect) *StateGrid {
	return &StateGrid{r: r, cells: make([]atomic.Uint32, max(r.Cells(), 0))}
}

// Rect returns the rectangle the grid covers.
func (g *StateGrid) Rect() Rect { return g.r }

// Set records the state of cell (x, y), which must be in the grid's Rect.
func (g *StateGrid) Set(x, y int, s CellState) { g.cells[g.index(x, y)].Store(uint32(s)) }

// At returns the state of cell (x, y).
func (g *StateGrid) At(x, y int) CellState { return CellState(g.cells[g.index(x, y)].Load()) }

func (g *StateGrid) index(x, y int) int {
	if !g.r.Contains(x, y) {
		panic(fmt.Sprintf("wavefront: cell (%d,%d) is outside the grid %v", x, y, g.r))
	}
	return (y-g.r.Y)*g.r.W + (x - g.r.X)
}

// Picture sizes: small grids are enlarged to about pictureMin pixels a side
// so that they can be seen; large ones are shrunk to at most pictureMax.
const (
	pictureMin = 400
	pictureMax = 1000
)

// Image draws the grid: x to the right, y upwards (cell (1,1) at the bottom
// left), red for incomplete, green for running, blue for complete and black
// for failed cells. A pixel that stands for several cells is green if any of
// them is running, black if any failed, and otherwise a mix of red and blue
// in proportion to how many are complete.
func (g *StateGrid) Image() *image.RGBA {
	w, h := pictureSide(g.r.W), pictureSide(g.r.H)
	if scale := min(w/g.r.W, h/g.r.H); scale > 1 {
		w, h = g.r.W*scale, g.r.H*scale // keep cells square when enlarging
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for py := range h {
		y0, y1 := span(py, h, g.r.H)
		for px := range w {
			x0, x1 := span(px, w, g.r.W)
			img.SetRGBA(px, h-1-py, g.pixel(g.r.X+x0, g.r.X+x1, g.r.Y+y0, g.r.Y+y1))
		}
	}
	return img
}

func pictureSide(cells int) int {
	switch {
	case cells >= pictureMax:
		return pictureMax
	case cells >= pictureMin:
		return cells
	}
	return cells * ((pictureMin + cells - 1) / cells)
}

// span returns the cells [c0, c1) that pixel p of n stands for, of cells.
func span(p, n, cells int) (int, int) {
	c0 := p * cells / n
	c1 := max((p+1)*cells/n, c0+1)
	return c0, c1
}

func (g *StateGrid) pixel(x0, x1, y0, y1 int) color.RGBA {
	var n [4]int
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			n[g.At(x, y)]++
		}
	}
	switch {
	case n[Running] > 0:
		return stateColors[Running]
	case n[Failed] > 0:
		return stateColors[Failed]
	}
	total := n[Incomplete] + n[Complete]
	mix := func(a, b uint8) uint8 {
		return uint8((int(a)*n[Incomplete] + int(b)*n[Complete]) / total)
	}
	r, b := stateColors[Incomplete], stateColors[Complete]
	return color.RGBA{mix(r.R, b.R), mix(r.G, b.G), mix(r.B, b.B), 0xff}
}

// WritePNG writes img to path as a PNG, atomically: through a temporary file
// in the same directory renamed over path, so that a viewer never sees half
// a picture.
func WritePNG(path string, img image.Image) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if err := png.Encode(tmp, img); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
