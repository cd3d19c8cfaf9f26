package multicore

import "iter"

// Plan is the blocked traversal of an All-Pairs region: the order in which
// cells are computed. It does no I/O, so tests can check that its units cover
// the region exactly once.
//
// There are two levels of blocking. A block is a run of A's rows (seed 000,
// Fig. 3.3). Within a block, the columns are split into tiles whose B items
// fit in the processor's last-level cache together, and each tile's rows into
// units, the work one core takes at a time. The cores work through a tile's
// units together, so that each A item is compared with the tile's B items
// while it is hot and the tile's B items are read from memory once per tile
// and block, not once per cell.
type Plan struct {
	Region    Region
	BlockSize int     // rows of A per block; <= 0 means the whole region
	Symmetric bool    // only cells with i <= j
	Cores     int     // cores that will share each block
	BSizes    []int64 // the sizes of B's items; nil means one column per tile
	// CacheBytes is the cache the tiles' B items may fill, usually half of
	// the last-level cache; <= 0 means one column per tile.
	CacheBytes int64
}

// Block is a range of rows of A, I0 to I1-1, held in memory together.
type Block struct{ I0, I1 int }

// Unit is the work one core takes at a time: the cells of rows I0..I1-1 and
// columns J0..J1-1 (only i <= j if the plan is symmetric), computed row by
// row.
type Unit struct{ I0, I1, J0, J1 int }

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

// columnTiles splits the region's columns into runs whose B items fit in
// CacheBytes together (at least one column each).
func (p Plan) columnTiles() [][2]int {
	r := p.Region
	var tiles [][2]int
	for j0 := r.Y; j0 < r.Y+r.H; {
		j1 := j0 + 1
		if p.BSizes != nil && p.CacheBytes > 0 {
			bytes := p.BSizes[j0]
			for j1 < r.Y+r.H && bytes+p.BSizes[j1] <= p.CacheBytes {
				bytes += p.BSizes[j1]
				j1++
			}
		}
		tiles = append(tiles, [2]int{j0, j1})
		j0 = j1
	}
	return tiles
}

// Units returns the units of block b, column tile by column tile, so that
// the cores working at one time share a tile of B as well as the block.
// Each tile's rows are split into units that shrink as the tile's rows run
// out, each about a (2·Cores)th of the rows left (guided self-scheduling):
// the first units are long, and a core that the machine's other work slows
// down holds up the others at the end for one short unit, not a long one.
func (p Plan) Units(b Block) []Unit {
	tiles := p.columnTiles()
	cores := max(p.Cores, 1)
	var units []Unit
	for _, t := range tiles {
		hi := b.I1
		if p.Symmetric {
			hi = min(hi, t[1]) // rows below the tile's last column
		}
		for i0 := b.I0; i0 < hi; {
			n := max(1, (hi-i0+2*cores-1)/(2*cores))
			units = append(units, Unit{I0: i0, I1: i0 + n, J0: t[0], J1: t[1]})
			i0 += n
		}
	}
	return units
}
