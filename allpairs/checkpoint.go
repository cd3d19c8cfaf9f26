package allpairs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/provenance"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/sparsematrix"
)

// Checkpoint is an All-Pairs checkpoint: the sparse-matrix file of the cells
// finished so far (x the index of an item of A, y of B, from 0), whose
// header records what they were computed from — the function, and the
// name, size and modification time of every item — so that a re-run reuses
// only the cells that still hold.
//
// OpenCheckpoint compares that record with the problem given now:
//
//   - another function (another built-in, a program or library whose bytes
//     changed, other extra arguments): none of the cells may hold, and it
//     refuses, saying what changed and how to start over (unless
//     TrustCheckpoint says to keep them);
//   - sets whose item names differ: the cells cannot be matched to the
//     items, and it refuses likewise;
//   - an item whose size or modification time changed: its row (an item of
//     A) or column (of B) is dropped from the file, to be computed again,
//     and Changes says so;
//   - a checkpoint of a symmetric run serves a full one; one of a full run
//     serves a symmetric one, less its cells below the diagonal.
//
// A file holding cells but no record (written before rightsize kept one) is
// taken as it is, provided its cells fit the matrix.
//
// Has, Add and the rest are for one goroutine at a time.
type Checkpoint struct {
	path      string
	w         *sparsematrix.Writer
	a, b      *Set
	n, m      int
	symmetric bool
	have      bitset // cells in the file, by x*m+y
	cells     int64
	resumed   int64
	changes   []string
	fresh     []sparsematrix.Record // addNew's, reused
}

// checkpointMeta is the record in the checkpoint's header.
type checkpointMeta struct {
	Abstraction string              `json:"abstraction"` // "allpairs"
	Function    provenance.Function `json:"function"`
	Symmetric   bool                `json:"symmetric"`
	A           []itemStamp         `json:"a"`
	B           []itemStamp         `json:"b"`
}

type itemStamp struct {
	Name string `json:"name"`
	provenance.Stamp
}

func stamps(s *Set) []itemStamp {
	st := make([]itemStamp, len(s.Items))
	for i, it := range s.Items {
		st[i] = itemStamp{Name: it.Name, Stamp: provenance.Stamp{Size: it.Size, ModTime: it.ModTime.UnixNano()}}
	}
	return st
}

// maxChanges is how many changed items are named one by one.
const maxChanges = 10

// CheckpointOf is the problem a checkpoint is opened for.
type CheckpointOf struct {
	A, B      *Set
	Symmetric bool       // only cells with i <= j
	Func      funcs.Info // the function as opened: the name it was given and its file
	Args      string     // a program's extra arguments (-e), as given
	// TrustCheckpoint keeps the cells of a checkpoint computed by another
	// function (or another version of its file) instead of refusing it: the
	// user vouches that the change does not alter them, as when a function
	// was fixed for the cells that failed.
	TrustCheckpoint bool
}

// OpenCheckpoint opens the checkpoint at path, creating it if need be, for
// the problem of. The file is locked against a second run until Close
// (sparsematrix.ErrLocked). See Checkpoint for what it refuses and what it
// drops.
func OpenCheckpoint(path string, of CheckpointOf) (*Checkpoint, error) {
	a, b, symmetric := of.A, of.B, of.Symmetric
	id, err := provenance.FunctionOf(of.Func.Name, of.Func.Path, of.Args)
	if err != nil {
		return nil, err
	}
	now := checkpointMeta{Abstraction: "allpairs", Function: id, Symmetric: symmetric, A: stamps(a), B: stamps(b)}
	c := &Checkpoint{path: path, a: a, b: b, n: len(a.Items), m: len(b.Items), symmetric: symmetric}
	c.have = newBitset(c.n * c.m)
	var outside *sparsematrix.Record // the first cell outside the matrix
	c.w, err = sparsematrix.Open(path, func(r sparsematrix.Record) error {
		if r.X >= c.n || r.Y >= c.m {
			if outside == nil {
				outside = &sparsematrix.Record{X: r.X, Y: r.Y}
			}
			return nil
		}
		c.add(r.X, r.Y)
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.resumed = c.cells
	if err := c.reconcile(now, a, b, outside, of.TrustCheckpoint); err != nil {
		c.w.Close()
		return nil, err
	}
	return c, nil
}

// reconcile compares the record in the file with the problem now, refuses
// what cannot be reused, and rewrites the file, less its stale cells, with
// the record of now.
func (c *Checkpoint) reconcile(now checkpointMeta, a, b *Set, outside *sparsematrix.Record, trust bool) error {
	want, err := json.Marshal(now)
	if err != nil {
		return err
	}
	old := c.w.Meta()
	if bytes.Equal(old, want) {
		return nil
	}
	startOver := fmt.Sprintf("remove %s to compute everything again", c.path)
	staleA, staleB := newBitset(c.n), newBitset(c.m)
	switch {
	case len(old) == 0 && c.cells == 0 && outside == nil:
		// A new file.
	case len(old) == 0:
		if outside != nil {
			return fmt.Errorf("%s: cell (%d,%d) is not a cell of this %d×%d problem: the file belongs to another one (%s)",
				c.path, outside.X, outside.Y, c.n, c.m, startOver)
		}
		c.changes = append(c.changes, fmt.Sprintf("%s does not say what its %d cells were computed from (an older rightsize wrote it): they are taken as they are", c.path, c.cells))
	default:
		var was checkpointMeta
		if err := json.Unmarshal(old, &was); err != nil || was.Abstraction != "allpairs" {
			return fmt.Errorf("%s is not an All-Pairs checkpoint (%s)", c.path, startOver)
		}
		note, err := now.Function.Check(was.Function, c.path, trust)
		if err != nil {
			return err
		}
		if note != "" {
			c.changes = append(c.changes, note)
		}
		for _, s := range []struct {
			label    string
			set      *Set
			was, now []itemStamp
		}{{"A", a, was.A, now.A}, {"B", b, was.B, now.B}} {
			if d := namesDiff(s.was, s.now); d != "" {
				return fmt.Errorf("%s holds cells of other items: set %s (%s) %s. Its cells cannot be matched to the items now; %s", c.path, s.label, s.set.Source, d, startOver)
			}
		}
		c.staleItems(a, b, was, now, staleA, staleB)
	}
	kept := newBitset(c.n * c.m)
	c.cells = 0
	keep := func(r sparsematrix.Record) bool {
		if r.X >= c.n || r.Y >= c.m || c.symmetric && r.X > r.Y || staleA.has(r.X) || staleB.has(r.Y) {
			return false
		}
		if kept.set(r.X*c.m + r.Y) {
			c.cells++
		}
		return true
	}
	if err := c.w.Rewrite(want, keep); err != nil {
		return err
	}
	c.have = kept
	c.resumed = c.cells
	return nil
}

// staleItems marks the items whose stamps changed, and notes them.
func (c *Checkpoint) staleItems(a, b *Set, was, now checkpointMeta, staleA, staleB bitset) {
	same := a.Same(b)
	var notes []string
	for k, s := range []struct {
		set      *Set
		was, now []itemStamp
		stale    bitset
		what     string
	}{{a, was.A, now.A, staleA, "row"}, {b, was.B, now.B, staleB, "column"}} {
		for i := range s.now {
			d := s.now[i].Diff(s.was[i].Stamp)
			if d == "" {
				continue
			}
			s.stale.set(i)
			what := s.what
			if same {
				if k == 1 {
					continue // noted with A
				}
				what = "row and column"
			}
			notes = append(notes, fmt.Sprintf("%s changed since the checkpoint (%s): its %s will be computed again", s.set.Items[i].Path, d, what))
		}
	}
	if len(notes) > maxChanges {
		notes = append(notes[:maxChanges], fmt.Sprintf("… and %d more items changed", len(notes)-maxChanges))
	}
	c.changes = append(c.changes, notes...)
}

// namesDiff says how the item names now differ from those before, or
// returns "".
func namesDiff(was, now []itemStamp) string {
	for i := range min(len(was), len(now)) {
		if was[i].Name != now[i].Name {
			return fmt.Sprintf("has %q as item %d, where the checkpoint's items had %q (items added, removed or renamed)", now[i].Name, i+1, was[i].Name)
		}
	}
	if len(was) != len(now) {
		return fmt.Sprintf("has %d items, the checkpoint's had %d", len(now), len(was))
	}
	return ""
}

// add notes cell (x, y) as being in the file, reporting whether it was new.
func (c *Checkpoint) add(x, y int) bool {
	if !c.have.set(x*c.m + y) {
		return false
	}
	c.cells++
	return true
}

// Path returns the checkpoint's path.
func (c *Checkpoint) Path() string { return c.path }

// Has reports whether cell (x, y) is in the checkpoint.
func (c *Checkpoint) Has(x, y int) bool { return c.have.has(x*c.m + y) }

// Add appends cell (x, y) to the file unless it is there already,
// reporting whether it was added. The record is handed to the operating
// system before Add returns.
func (c *Checkpoint) Add(x, y int, value []byte) (bool, error) {
	n, err := c.AddRecords([]sparsematrix.Record{{X: x, Y: y, Value: value}})
	return n > 0, err
}

// AddRecords appends, in one write, the cells of recs that are not in the
// file yet, and returns how many it added. A process killed meanwhile
// leaves all of them or none (but a torn last record, which the next open
// drops). A cell outside the matrix is an error, and nothing is written.
func (c *Checkpoint) AddRecords(recs []sparsematrix.Record) (int, error) {
	for _, r := range recs {
		if r.X < 0 || r.Y < 0 || r.X >= c.n || r.Y >= c.m {
			return 0, fmt.Errorf("checkpoint %s: cell (%d,%d) is outside the %d×%d matrix", c.path, r.X, r.Y, c.n, c.m)
		}
	}
	before := c.cells
	err := c.addNew(recs)
	return int(c.cells - before), err
}

// addNew appends, in one write, the cells of recs that are not in the
// checkpoint yet (and are in the matrix); a cell twice in recs is written
// once.
func (c *Checkpoint) addNew(recs []sparsematrix.Record) error {
	fresh := c.fresh[:0]
	for _, r := range recs {
		if r.X < c.n && r.Y < c.m && c.have.set(r.X*c.m+r.Y) {
			fresh = append(fresh, r)
		}
	}
	if err := c.w.AppendRecords(fresh); err != nil {
		for _, r := range fresh {
			c.have.clear(r.X*c.m + r.Y)
		}
		return fmt.Errorf("checkpoint %s: %w", c.path, err)
	}
	c.cells += int64(len(fresh))
	c.fresh = fresh[:0]
	return nil
}

// Cells returns the number of cells in the checkpoint.
func (c *Checkpoint) Cells() int64 { return c.cells }

// Resumed returns the number of cells the checkpoint held, once stale ones
// were dropped, when it was opened.
func (c *Checkpoint) Resumed() int64 { return c.resumed }

// Torn returns the size of a torn last record cut off when it was opened.
func (c *Checkpoint) Torn() int64 { return c.w.Torn() }

// Changes returns what changed since the checkpoint's cells were computed
// and what will be computed again, one sentence each, for the user.
func (c *Checkpoint) Changes() []string { return c.changes }

// done returns a copy of the cells now in the checkpoint, safe to read from
// many goroutines while Add goes on.
func (c *Checkpoint) done() func(x, y int) bool {
	have := append(bitset(nil), c.have...)
	m := c.m
	return func(x, y int) bool { return have.has(x*m + y) }
}

// WriteLines writes the cells of the checkpoint, those in r only if r is
// not nil, to out as result lines, "Aname<TAB>Bname<TAB>result" escaped as
// Run writes them, in file order, and returns how many it wrote.
func (c *Checkpoint) WriteLines(out io.Writer, r *multicore.Region) (int64, error) {
	w := newLineWriter(out)
	n, err := c.writeLines(w, r)
	if ferr := w.flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write results: %w", ferr)
	}
	return n, err
}

// writeLines writes the lines of the cells of the checkpoint to w, only
// those in r if r is not nil. A cell recorded more than once is written
// once, with its first value: a repeat can only come from a file pieced
// together by hand, and a function is side-effect free.
func (c *Checkpoint) writeLines(w *lineWriter, r *multicore.Region) (int64, error) {
	seen := newBitset(c.n * c.m)
	var cells int64
	err := sparsematrix.Scan(c.path, func(rec sparsematrix.Record) error {
		if rec.X >= c.n || rec.Y >= c.m {
			return fmt.Errorf("%s: cell (%d,%d) is outside the %d×%d matrix of %s × %s", c.path, rec.X, rec.Y, c.n, c.m, c.a.Source, c.b.Source)
		}
		if r != nil && !(r.X <= rec.X && rec.X < r.X+r.W && r.Y <= rec.Y && rec.Y < r.Y+r.H) || !seen.set(rec.X*c.m+rec.Y) {
			return nil
		}
		w.cell(c.a.Items[rec.X].Name, c.b.Items[rec.Y].Name, rec.Value)
		cells++
		return w.err
	})
	if err != nil {
		return cells, fmt.Errorf("write results: %w", err)
	}
	return cells, nil
}

// Sync commits the file to stable storage.
func (c *Checkpoint) Sync() error { return c.w.Sync() }

// Close closes the file, releasing its lock.
func (c *Checkpoint) Close() error { return c.w.Close() }

// Remove closes the file and removes it: once the result lines are written,
// a default checkpoint has served its purpose.
func (c *Checkpoint) Remove() error {
	return errors.Join(c.w.Close(), os.Remove(c.path))
}

// bitset marks cells, a bit each: a problem's cells can number in the
// hundreds of millions.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// set marks i, reporting whether it was unmarked.
func (b bitset) set(i int) bool {
	if b.has(i) {
		return false
	}
	b[i/64] |= 1 << (i % 64)
	return true
}

// clear unmarks i.
func (b bitset) clear(i int) { b[i/64] &^= 1 << (i % 64) }
