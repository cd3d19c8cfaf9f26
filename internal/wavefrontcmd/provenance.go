package wavefrontcmd

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/provenance"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
)

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

// reconcile compares what the checkpoint's cells were computed from with
// what the run reads now. Another function is refused, none of the cells
// being sure to hold, unless trust says to keep them. A changed input cell (a boundary file, say) makes every cell
// above and to the right of it stale: those are dropped from the file (and
// their R.x.y files removed), to be computed again, and the returned notes
// say so. The checkpoint is then rewritten with the record of now.
func reconcile(p *problem, out *sparsematrix.Writer, ckPath string, cell funcs.Info, args string, trust bool, r wavefront.Rect) (notes []string, err error) {
	id, err := provenance.FunctionOf(cell.Name, cell.Path, args)
	if err != nil {
		return nil, err
	}
	now := checkpointMeta{Abstraction: "wavefront", Function: id}
	where := map[sparsematrix.Key]string{} // how each input is named in messages
	addInput := func(x, y int) error {
		k := sparsematrix.Key{X: x, Y: y}
		if _, ok := p.checkpoint[k]; ok {
			return nil // computed into the checkpoint: checked with it
		}
		v, ok := p.shipped[k]
		where[k] = fmt.Sprintf("cell (%d,%d) of %s", x, y, p.dir.MatrixPath())
		if !ok {
			if !p.dir.HasFile(x, y) {
				return nil // missing: checkInputs says so
			}
			where[k] = p.dir.CellPath(x, y)
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

	old := out.Meta()
	var changed []inputDigest
	switch {
	case len(old) == 0 && len(p.checkpoint) > 0:
		notes = append(notes, fmt.Sprintf("%s does not say what its %d cells were computed from (an older rightsize wrote it): they are taken as they are", ckPath, len(p.checkpoint)))
	case len(old) > 0:
		var was checkpointMeta
		if err := json.Unmarshal(old, &was); err != nil || was.Abstraction != "wavefront" {
			return nil, fmt.Errorf("%s is not a Wavefront checkpoint (remove it to compute everything again)", ckPath)
		}
		note, err := now.Function.Check(was.Function, ckPath, trust)
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
	for k := range p.checkpoint {
		if stale(k.X, k.Y) {
			delete(p.checkpoint, k)
			dropped++
			if k.X > 0 && k.Y > 0 {
				// A --files copy of the stale value.
				if err := os.Remove(p.dir.CellPath(k.X, k.Y)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, err
				}
			}
		}
	}
	if err := out.Rewrite(want, func(rec sparsematrix.Record) bool { return !stale(rec.X, rec.Y) }); err != nil {
		return nil, err
	}
	for i, in := range changed {
		if i == maxChanges {
			notes = append(notes, fmt.Sprintf("… and %d more inputs changed", len(changed)-maxChanges))
			break
		}
		notes = append(notes, fmt.Sprintf("%s changed since the cells of %s were computed from it", where[sparsematrix.Key{X: in.X, Y: in.Y}], ckPath))
	}
	if len(changed) > 0 {
		notes = append(notes, fmt.Sprintf("the %d cells of %s that depend on what changed will be computed again", dropped, ckPath))
	}
	return notes, nil
}
