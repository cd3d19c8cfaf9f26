package wavefront

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/provenance"
	"github.com/rightsize/rightsize/sparsematrix"
)

// A Checkpoint is where a Wavefront run keeps its cells: a sparse-matrix
// file (Rdir/R.matrix by default) that a run loads, checks against what it
// computes now, and appends every finished cell to. A run stopped part way
// (a crash, kill -9, Ctrl-C) and started again with the same checkpoint
// computes only what is missing: give an engine Checkpoint.Value,
// Checkpoint.Done and the Checkpoint itself as its CellWriter.
//
// The file's header records what its cells were computed from: the
// function (a built-in's name, a program's or library's SHA-256, its extra
// arguments) and a digest of every cell they read from outside the file
// (the boundary files, or the left column and bottom row of a
// sub-problem). Reconcile compares that with the run at hand.
//
// A Checkpoint's Append may be called from many goroutines; its other
// methods are for the goroutine that runs the problem, before and after
// the engine runs.
type Checkpoint struct {
	dir  *Dir
	path string // "-" when the records go to a stream
	w    *sparsematrix.Writer
	// cells are those loaded from the file; shipped, Rdir/R.matrix when
	// the checkpoint is elsewhere (a sub-problem's cells come from there).
	cells, shipped map[sparsematrix.Key][]byte
}

// OpenCheckpoint opens the checkpoint at path (dir's R.matrix if path is
// empty) for a run on the R directory dir, loading the cells it holds (a
// torn last record, cut short by a crash, is dropped: see Torn) and
// creating it if it does not exist. When the checkpoint is not dir's
// R.matrix, that file's cells, if any, are inputs too.
func OpenCheckpoint(dir *Dir, path string) (*Checkpoint, error) {
	if path == "" {
		path = dir.MatrixPath()
	}
	c := &Checkpoint{dir: dir, path: path, cells: map[sparsematrix.Key][]byte{}}
	var err error
	c.w, err = sparsematrix.Open(path, func(r sparsematrix.Record) error {
		c.cells[sparsematrix.Key{X: r.X, Y: r.Y}] = r.Value
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if path != dir.MatrixPath() {
		c.shipped, err = sparsematrix.Load(dir.MatrixPath())
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			c.w.Close()
			return nil, err
		}
	}
	return c, nil
}

// StreamCheckpoint returns a checkpoint that writes its records to w and
// holds no cells: a sub-problem run on a worker, whose master keeps the
// checkpoint. Its inputs are dir's files and R.matrix.
func StreamCheckpoint(dir *Dir, w io.Writer) (*Checkpoint, error) {
	shipped, err := sparsematrix.Load(dir.MatrixPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &Checkpoint{dir: dir, path: "-", w: sparsematrix.NewWriter(w), cells: map[sparsematrix.Key][]byte{}, shipped: shipped}, nil
}

// Path returns the checkpoint's file, or "-" for a stream.
func (c *Checkpoint) Path() string { return c.path }

// Torn returns the size of the torn last record the file had when it was
// opened, or 0.
func (c *Checkpoint) Torn() int64 { return c.w.Torn() }

// Append writes cell (x, y) to the checkpoint at once (a multicore.CellWriter).
func (c *Checkpoint) Append(x, y int, value []byte) error { return c.w.Append(x, y, value) }

// AppendRecords writes the cells in one write, so that a process killed
// meanwhile leaves all of them or none (but a torn last one, which Open
// drops).
func (c *Checkpoint) AppendRecords(recs []sparsematrix.Record) error { return c.w.AppendRecords(recs) }

// Put appends cell (x, y) and holds it as done, as if the checkpoint had
// been opened with it: for a cell computed before the run (the sample that
// placement times), which Done then reports and Value returns.
func (c *Checkpoint) Put(x, y int, value []byte) error {
	if err := c.w.Append(x, y, value); err != nil {
		return err
	}
	c.cells[sparsematrix.Key{X: x, Y: y}] = slices.Clone(value)
	return nil
}

// Sync flushes the file to stable storage.
func (c *Checkpoint) Sync() error { return c.w.Sync() }

// Close closes the file (not the stream of a StreamCheckpoint).
func (c *Checkpoint) Close() error {
	if c.path == "-" {
		return c.w.Sync()
	}
	return c.w.Close()
}

// Cell returns the value of cell (x, y) as loaded, if the checkpoint held
// it when it was opened.
func (c *Checkpoint) Cell(x, y int) ([]byte, bool) {
	v, ok := c.cells[sparsematrix.Key{X: x, Y: y}]
	return v, ok
}

// Value returns cell (x, y) as a function's input: from the checkpoint,
// from Rdir/R.matrix, or its R.x.y file.
func (c *Checkpoint) Value(x, y int) (funcs.Input, error) {
	if v, ok := c.value(x, y); ok {
		return v, nil
	}
	return funcs.Input{}, fmt.Errorf("cell (%d,%d) is missing", x, y)
}

func (c *Checkpoint) value(x, y int) (funcs.Input, bool) {
	k := sparsematrix.Key{X: x, Y: y}
	if v, ok := c.cells[k]; ok {
		return funcs.Input{Data: v}, true
	}
	if v, ok := c.shipped[k]; ok {
		return funcs.Input{Data: v}, true
	}
	if c.dir.HasFile(x, y) {
		return funcs.Input{Path: c.dir.CellPath(x, y)}, true
	}
	return funcs.Input{}, false
}

// Done returns the test an engine needs for the cells of r the checkpoint
// already holds.
func (c *Checkpoint) Done(r Rect) func(x, y int) bool {
	return func(x, y int) bool {
		_, ok := c.cells[sparsematrix.Key{X: x, Y: y}]
		return ok && r.Contains(x, y)
	}
}

// Count returns how many cells of r the checkpoint holds.
func (c *Checkpoint) Count(r Rect) int {
	n := 0
	for k := range c.cells {
		if r.Contains(k.X, k.Y) {
			n++
		}
	}
	return n
}

// Size returns the size of the problem its boundary defines — dir's
// boundary files and the boundary cells in the checkpoint and R.matrix — as
// BoundarySize does.
func (c *Checkpoint) Size(n int) (x, y int, err error) {
	cells := c.dir.Boundary()
	for _, m := range []map[sparsematrix.Key][]byte{c.cells, c.shipped} {
		for k := range m {
			if k.X == 0 || k.Y == 0 {
				cells = append(cells, k)
			}
		}
	}
	return BoundarySize(cells, n)
}

// CheckInputs reports the cells outside r that r reads and nobody has:
// neither the checkpoint, nor R.matrix, nor a file.
func (c *Checkpoint) CheckInputs(r Rect) error {
	var missing []string
	check := func(x, y int) {
		if _, ok := c.value(x, y); !ok {
			missing = append(missing, CellFile(x, y))
		}
	}
	for y := r.Y - 1; y < r.Y+r.H; y++ {
		check(r.X-1, y)
	}
	for x := r.X; x < r.X+r.W; x++ {
		check(x, r.Y-1)
	}
	if len(missing) == 0 {
		return nil
	}
	list := missing
	if len(list) > 5 {
		list = append(list[:5:5], fmt.Sprintf("… (%d in all)", len(missing)))
	}
	return fmt.Errorf("%v reads cells that are neither in the checkpoint nor files in %s: %v", r, c.dir.Path, list)
}

// WriteMissingFiles writes R.x.y for the checkpoint's cells of r that have
// no file yet, so that a run keeping files holds every cell after a resume.
func (c *Checkpoint) WriteMissingFiles(r Rect) error {
	for k, v := range c.cells {
		if r.Contains(k.X, k.Y) && !c.dir.HasFile(k.X, k.Y) {
			if _, err := c.dir.WriteCell(k.X, k.Y, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkpointMeta is what a Wavefront checkpoint records in its header: the
// function, and a digest of every cell its cells were computed from that
// is not itself in the checkpoint — the boundary files, or the left column
// and bottom row a sub-problem is given.
type checkpointMeta struct {
	Abstraction string              `json:"abstraction"` // "wavefront"
	Function    provenance.Function `json:"function"`
	Inputs      []inputDigest       `json:"inputs"` // sorted by x, then y
}

type inputDigest struct {
	X      int    `json:"x"`
	Y      int    `json:"y"`
	SHA256 string `json:"sha256"`
}

// maxChanges is how many changed inputs are named one by one.
const maxChanges = 10

// Reconcile compares what the checkpoint's cells were computed from with
// what a run of fn (with extra arguments args) on r reads now, and returns
// notes for the user. Another function is refused, none of the cells being
// sure to hold, unless trust says to keep them. A changed input cell (a
// boundary file, say) makes every cell above and to the right of it stale:
// those are dropped from the file (and their R.x.y files removed), to be
// computed again, and the notes say so. The checkpoint then records the
// run at hand. A StreamCheckpoint has nothing to reconcile.
func (c *Checkpoint) Reconcile(fn funcs.Info, args string, trust bool, r Rect) (notes []string, err error) {
	if c.path == "-" {
		return nil, nil
	}
	id, err := provenance.FunctionOf(fn.Name, fn.Path, args)
	if err != nil {
		return nil, err
	}
	now := checkpointMeta{Abstraction: "wavefront", Function: id}
	where := map[sparsematrix.Key]string{} // how each input is named in messages
	addInput := func(x, y int) error {
		k := sparsematrix.Key{X: x, Y: y}
		if _, ok := c.cells[k]; ok {
			return nil // computed into the checkpoint: checked with it
		}
		v, ok := c.shipped[k]
		where[k] = fmt.Sprintf("cell (%d,%d) of %s", x, y, c.dir.MatrixPath())
		if !ok {
			if !c.dir.HasFile(x, y) {
				return nil // missing: CheckInputs says so
			}
			where[k] = c.dir.CellPath(x, y)
			if v, err = os.ReadFile(where[k]); err != nil {
				return err
			}
		}
		now.Inputs = append(now.Inputs, inputDigest{X: x, Y: y, SHA256: provenance.Digest(v)})
		return nil
	}
	for x := r.X - 1; x < r.X+r.W; x++ {
		if err := addInput(x, r.Y-1); err != nil {
			return nil, err
		}
	}
	for y := r.Y; y < r.Y+r.H; y++ {
		if err := addInput(r.X-1, y); err != nil {
			return nil, err
		}
	}

	old := c.w.Meta()
	var changed []inputDigest
	switch {
	case len(old) == 0 && len(c.cells) > 0:
		notes = append(notes, fmt.Sprintf("%s does not say what its %d cells were computed from (an older rightsize wrote it): they are taken as they are", c.path, len(c.cells)))
	case len(old) > 0:
		var was checkpointMeta
		if err := json.Unmarshal(old, &was); err != nil || was.Abstraction != "wavefront" {
			return nil, fmt.Errorf("%s is not a Wavefront checkpoint (remove it to compute everything again)", c.path)
		}
		note, err := now.Function.Check(was.Function, c.path, trust)
		if err != nil {
			return nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
		// Inputs of earlier runs that this one does not read still vouch
		// for the cells computed from them.
		kept := map[sparsematrix.Key]string{}
		for _, in := range was.Inputs {
			kept[sparsematrix.Key{X: in.X, Y: in.Y}] = in.SHA256
		}
		for _, in := range now.Inputs {
			k := sparsematrix.Key{X: in.X, Y: in.Y}
			if digest, ok := kept[k]; ok && digest != in.SHA256 {
				changed = append(changed, in)
			}
			kept[k] = in.SHA256
		}
		now.Inputs = now.Inputs[:0]
		for k, digest := range kept {
			now.Inputs = append(now.Inputs, inputDigest{X: k.X, Y: k.Y, SHA256: digest})
		}
	}
	slices.SortFunc(now.Inputs, func(a, b inputDigest) int { return cmp.Or(cmp.Compare(a.X, b.X), cmp.Compare(a.Y, b.Y)) })
	want, err := json.Marshal(now)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(old, want) {
		return notes, nil
	}

	// A cell is stale if it is above and to the right of a changed input
	// (or is it): everything it was computed from passes through there.
	stale := func(x, y int) bool {
		for _, in := range changed {
			if x >= in.X && y >= in.Y {
				return true
			}
		}
		return false
	}
	dropped := 0
	for k := range c.cells {
		if stale(k.X, k.Y) {
			delete(c.cells, k)
			dropped++
			if k.X > 0 && k.Y > 0 {
				// A --files copy of the stale value.
				if err := os.Remove(c.dir.CellPath(k.X, k.Y)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, err
				}
			}
		}
	}
	if err := c.w.Rewrite(want, func(rec sparsematrix.Record) bool { return !stale(rec.X, rec.Y) }); err != nil {
		return nil, err
	}
	for i, in := range changed {
		if i == maxChanges {
			notes = append(notes, fmt.Sprintf("… and %d more inputs changed", len(changed)-maxChanges))
			break
		}
		notes = append(notes, fmt.Sprintf("%s changed since the cells of %s were computed from it", where[sparsematrix.Key{X: in.X, Y: in.Y}], c.path))
	}
	if len(changed) > 0 {
		notes = append(notes, fmt.Sprintf("the %d cells of %s that depend on what changed will be computed again", dropped, c.path))
	}
	return notes, nil
}
