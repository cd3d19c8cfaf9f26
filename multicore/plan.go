package multicore

import "iter"

// Plan is the blocked traversal of an All-Pairs region: the order in which
// cells are computed. It does no I/O, so tests can check that its units cover
// the region exactly once.
type Plan struct {
	Region    Region
	BlockSize int  // rows of A per block; <= 0 means the whole region
	Symmetric bool // only cells with i <= j
	Cores     int  // cores that will share each block
}

// Block is a range of rows of A, I0 to I1-1, held in memory together.
type Block struct{ I0, I1 int }

// Unit is the work one core takes at a time: the cells (I0..I1-1, J), one
// item of B against a run of the current block's rows.
type Unit struct{ J, I0, I1 int }

// Blocks yields the blocks of the region in order.
func (p Plan) Blocks() iter.Seq[Block] {
	return func(yield func(Block) bool) {
		r := p.Region
		size := p.BlockSize
		if size <= 0 || size > r.W {
			size = r.W
		}
		for i0 := r.X; i0 < r.X+r.W; i0 += size {
			if !yield(Block{i0, min(i0+size, r.X+r.W)}) {
				return
			}
		}
	}
}

// Units returns the units of block b. They go column by column (item of B
// by item of B), so that the cores working at one time share one B item as
// well as the block; each column is split into enough runs that every core
// has work even when B is narrow.
func (p Plan) Units(b Block) []Unit {
	r := p.Region
	cols := r.H
	if cols == 0 {
		return nil
	}
	// Split each column into k runs so that a block has at least four
	// units per core, which keeps the tail at the block's end short.
	k := max(1, min((4*max(p.Cores, 1)+cols-1)/cols, b.I1-b.I0))
	var units []Unit
	for j := r.Y; j < r.Y+r.H; j++ {
		hi := b.I1
		if p.Symmetric {
			hi = min(hi, j+1)
		}
		n := hi - b.I0
		if n <= 0 {
			continue
		}
		parts := min(k, n)
		for q := 0; q < parts; q++ {
			units = append(units, Unit{J: j, I0: b.I0 + n*q/parts, I1: b.I0 + n*(q+1)/parts})
		}
	}
	return units
}
