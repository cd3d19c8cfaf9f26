package wavefront_test

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
)

// boundary returns the cells (0,0), (1..x, 0) and (0, 1..y), minus skip.
func boundary(x, y int, skip ...sparsematrix.Key) []sparsematrix.Key {
	var keys []sparsematrix.Key
	add := func(k sparsematrix.Key) {
		for _, s := range skip {
			if s == k {
				return
			}
		}
		keys = append(keys, k)
	}
	add(sparsematrix.Key{})
	for i := 1; i <= x; i++ {
		add(sparsematrix.Key{X: i})
	}
	for j := 1; j <= y; j++ {
		add(sparsematrix.Key{Y: j})
	}
	return keys
}

func TestBoundarySize(t *testing.T) {
	tests := []struct {
		name    string
		cells   []sparsematrix.Key
		n       int
		x, y    int
		wantErr string
	}{
		{name: "square", cells: boundary(9, 9), x: 9, y: 9},
		{name: "rectangle", cells: boundary(3, 5), x: 3, y: 5},
		{name: "interior cells ignored", cells: append(boundary(2, 2), sparsematrix.Key{X: 5, Y: 5}), x: 2, y: 2},
		{name: "n smaller", cells: boundary(9, 7), n: 5, x: 5, y: 5},
		{name: "n with a gap beyond it", cells: boundary(9, 9, sparsematrix.Key{X: 8}), n: 5, x: 5, y: 5},
		{name: "n too large", cells: boundary(9, 9), n: 12, wantErr: "too short for 12×12: R.10.0 is missing (it ends at R.9.0)"},
		{name: "empty", wantErr: "no boundary"},
		{name: "no corner", cells: boundary(3, 3, sparsematrix.Key{}), wantErr: "no R.0.0"},
		{name: "no row", cells: boundary(0, 3), wantErr: "no R.1.0"},
		{name: "no column", cells: boundary(3, 0), wantErr: "no R.0.1"},
		{name: "ragged row", cells: boundary(9, 9, sparsematrix.Key{X: 4}), wantErr: "ragged boundary: R.4.0 is missing, but R.9.0 exists"},
		{name: "ragged column", cells: boundary(9, 9, sparsematrix.Key{Y: 1}), wantErr: "ragged boundary: R.0.1 is missing, but R.0.9 exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y, err := wavefront.BoundarySize(tt.cells, tt.n)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || x != tt.x || y != tt.y {
				t.Fatalf("BoundarySize = %d, %d, %v; want %d, %d", x, y, err, tt.x, tt.y)
			}
		})
	}
}

func TestDir(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"R.0.0", "R.1.0", "R.2.0", "R.0.1", "R.3.4", "R.01.0", "R.x.0", "notes.txt", wavefront.MatrixFile} {
		os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "R.0.2"), 0o755) // a directory is not a cell
	d, err := wavefront.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	x, y, err := wavefront.BoundarySize(d.Boundary(), 0)
	if err != nil || x != 2 || y != 1 {
		t.Errorf("size = %d×%d, %v; want 2×1", x, y, err)
	}
	for _, c := range []struct {
		x, y int
		want bool
	}{{0, 0, true}, {2, 0, true}, {0, 2, false}, {3, 4, true}, {4, 3, false}} {
		if got := d.HasFile(c.x, c.y); got != c.want {
			t.Errorf("HasFile(%d,%d) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
	path, err := d.WriteCell(5, 6, []byte("v"))
	if data, _ := os.ReadFile(path); err != nil || path != filepath.Join(dir, "R.5.6") || string(data) != "v" {
		t.Errorf("WriteCell = %s, %v (content %q)", path, err, data)
	}
	if _, err := wavefront.OpenDir(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("OpenDir of a missing directory: %v", err)
	}
}

func TestPicture(t *testing.T) {
	g := wavefront.NewStateGrid(wavefront.Rect{X: 1, Y: 1, W: 4, H: 2})
	g.Set(1, 1, wavefront.Complete)
	g.Set(2, 1, wavefront.Running)
	g.Set(1, 2, wavefront.Failed)
	img := g.Image()
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 200 {
		t.Fatalf("picture is %v, want 400×200 (100 pixels a cell)", b)
	}
	// y points up: cell (1,1) is at the bottom left.
	for _, c := range []struct {
		px, py  int
		r, g, b uint8
	}{
		{50, 150, 0x20, 0x40, 0xd0},  // (1,1) complete: blue
		{150, 150, 0x20, 0xc0, 0x20}, // (2,1) running: green
		{50, 50, 0, 0, 0},            // (1,2) failed: black
		{350, 50, 0xd0, 0x20, 0x20},  // (4,2) incomplete: red
	} {
		got := img.RGBAAt(c.px, c.py)
		if got.R != c.r || got.G != c.g || got.B != c.b {
			t.Errorf("pixel (%d,%d) = %v, want %d,%d,%d", c.px, c.py, got, c.r, c.g, c.b)
		}
	}

	// A large grid is shrunk; half-complete pixels are purple.
	big := wavefront.NewStateGrid(wavefront.Rect{X: 1, Y: 1, W: 3000, H: 2000})
	for y := 1; y <= 2000; y++ {
		for x := 1; x <= 3000; x += 2 {
			big.Set(x, y, wavefront.Complete)
		}
	}
	bimg := big.Image()
	if b := bimg.Bounds(); b.Dx() != 1000 || b.Dy() != 1000 {
		t.Fatalf("picture is %v, want 1000×1000", b)
	}
	if px := bimg.RGBAAt(500, 500); px.R < 0x40 || px.R > 0xb0 || px.B < 0x40 || px.B > 0xb0 {
		t.Errorf("half-complete pixel = %v, want a mix of red and blue", px)
	}

	path := filepath.Join(t.TempDir(), "progress.png")
	if err := wavefront.WritePNG(path, img); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	decoded, err := png.Decode(f)
	if err != nil || decoded.Bounds() != img.Bounds() {
		t.Errorf("PNG did not decode: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("WritePNG left %d files, want 1", len(entries))
	}
}
