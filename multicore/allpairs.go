package multicore

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/edsrzf/mmap-go"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/model"
)

// Region is a rectangle of an All-Pairs matrix: rows (items of A) X to
// X+W-1 and columns (items of B) Y to Y+H-1, counted from 0.
type Region struct{ X, Y, W, H int }

// Cells returns the number of cells in r, counting only i <= j when
// symmetric.
func (r Region) Cells(symmetric bool) int64 {
	if !symmetric {
		return int64(r.W) * int64(r.H)
	}
	var n int64
	for j := r.Y; j < r.Y+r.H; j++ {
		if hi := min(r.X+r.W, j+1); hi > r.X {
			n += int64(hi - r.X)
		}
	}
	return n
}

// CellResult is one computed cell: M[I,J] = F(A[I], B[J]), or the error that
// F returned for it.
type CellResult struct {
	I, J  int
	Value []byte
	Err   error
}

// AllPairs is one All-Pairs run on this machine. Fill in the fields and call
// Run.
type AllPairs struct {
	// A and B are the input files.
	A, B []string
	// Func is the function F. In-memory kinds (Go functions, shared
	// libraries) get the inputs mapped into memory; programs get their paths.
	Func funcs.Pair
	// Cores is how many calls run at once; zero means runtime.NumCPU().
	Cores int
	// BlockSize is how many items of A are held in memory at once; zero
	// means all of the region's rows.
	BlockSize int
	// Region selects the cells to compute; the zero Region means all of
	// them.
	Region Region
	// Symmetric computes only cells with I <= J (A and B the same set).
	Symmetric bool
	// CacheBytes is how many bytes of B items a unit of work may hold, so
	// that they stay in the processor's cache while A's rows pass them; zero
	// means half of this machine's last-level cache, negative means one item
	// of B per unit.
	CacheBytes int64
	// BSizes are the sizes of B's items, if the caller knows them; otherwise
	// Run looks them up.
	BSizes []int64
	// Done reports the cells an earlier run computed (a checkpoint); they
	// are skipped, and a block with none left to compute is not mapped.
	// Nil means none. It is called from many goroutines at once.
	Done func(i, j int) bool
	// Results receives the finished cells, a batch at a time; calls are
	// serialised. The slice is reused after Results returns; the values in
	// it are the receiver's to keep. So that a receiver that writes them
	// out loses none to a crash, a cell is delivered the moment it is
	// computed — except those of Go functions, whose panics are failed
	// cells rather than a dead process (a shared library's crash is one):
	// they come in batches of at most BatchTime of work, which saves a write
	// per cell when cells take microseconds.
	Results func([]CellResult)
	// Timed, if set, is called as each unit of work ends (a tile of cells
	// one core computed in a row), with when it started and ended, for a
	// report of the run. It is called from many goroutines at once.
	Timed func(u Unit, started, ended time.Time)
}

// BatchTime bounds how long a Go function's finished cells are held before
// they are delivered.
const BatchTime = 5 * time.Millisecond

// Run computes every cell of the region that is not done, delivering them to
// Results as they finish, and returns when all are done or ctx is cancelled
// (returning ctx's error). A failing cell is delivered with its error and
// does not stop the run.
func (ap *AllPairs) Run(ctx context.Context) error {
	region := ap.Region
	if region == (Region{}) {
		region = Region{W: len(ap.A), H: len(ap.B)}
	}
	if region.X < 0 || region.Y < 0 || region.W < 0 || region.H < 0 ||
		region.X+region.W > len(ap.A) || region.Y+region.H > len(ap.B) {
		return fmt.Errorf("region %+v outside the %d×%d matrix", region, len(ap.A), len(ap.B))
	}
	cores := ap.Cores
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	plan := Plan{Region: region, BlockSize: ap.BlockSize, Symmetric: ap.Symmetric, Cores: cores, CacheBytes: ap.CacheBytes}
	if plan.CacheBytes == 0 {
		plan.CacheBytes = model.CacheBytes() / 2
	}
	if plan.CacheBytes > 0 {
		plan.BSizes = ap.BSizes
		if plan.BSizes == nil {
			plan.BSizes = fileSizes(ap.B)
		}
	}
	inMemory := ap.Func.Info().Kind.InMemory()

	type work struct {
		Unit
		block *mappedBlock // the unit's block of A, if mapped; read-only
	}
	units := make(chan work)
	var (
		wg     sync.WaitGroup
		emitMu sync.Mutex
	)
	emit := func(rs []CellResult) {
		emitMu.Lock()
		defer emitMu.Unlock()
		ap.Results(rs)
	}
	var batch time.Duration
	if ap.Func.Info().Kind == funcs.GoFunc {
		batch = BatchTime
	}
	for w := 0; w < cores; w++ {
		go func() {
			out := &batcher{emit: emit, every: batch}
			for u := range units {
				started := time.Now()
				ap.runUnit(ctx, u.Unit, u.block, inMemory, out)
				out.flush()
				if ap.Timed != nil && ctx.Err() == nil {
					ap.Timed(u.Unit, started, time.Now())
				}
				wg.Done()
			}
		}()
	}
	defer close(units)

	for b := range plan.Blocks() {
		todo := plan.Units(b)
		if ap.Done != nil {
			todo = slices.DeleteFunc(todo, ap.unitDone)
			if len(todo) == 0 {
				continue
			}
		}
		var block *mappedBlock
		if inMemory {
			block = mapBlock(ap.A, b.I0, b.I1)
		}
		for _, u := range todo {
			if ctx.Err() != nil {
				break
			}
			wg.Add(1)
			units <- work{u, block}
		}
		// Every core stays on this block until it is finished; only then is
		// it unmapped and the next one mapped.
		wg.Wait()
		block.unmap()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// unitDone reports whether every cell of u is done.
func (ap *AllPairs) unitDone(u Unit) bool {
	for i := u.I0; i < u.I1; i++ {
		j0 := u.J0
		if ap.Symmetric {
			j0 = max(j0, i)
		}
		for j := j0; j < u.J1; j++ {
			if !ap.Done(i, j) {
				return false
			}
		}
	}
	return true
}

// batcher gathers a worker's finished cells and delivers them at once, or
// once every so often.
type batcher struct {
	emit    func([]CellResult)
	every   time.Duration // 0: deliver each cell at once
	results []CellResult
	last    time.Time // of the last delivery
}

func (b *batcher) add(r CellResult) {
	b.results = append(b.results, r)
	if b.every == 0 {
		b.flush()
		return
	}
	if now := time.Now(); now.Sub(b.last) >= b.every {
		b.flush()
		b.last = now
	}
}

func (b *batcher) flush() {
	if len(b.results) > 0 {
		b.emit(b.results)
		b.results = b.results[:0]
	}
}

// runUnit computes the cells of one unit that are not done, passing each to
// out.
func (ap *AllPairs) runUnit(ctx context.Context, u Unit, block *mappedBlock, inMemory bool, out *batcher) {
	bs := make([]funcs.Input, u.J1-u.J0)
	bErrs := make([]error, len(bs))
	for j := u.J0; j < u.J1; j++ {
		bs[j-u.J0].Path = ap.B[j]
		if inMemory {
			data, unmap, err := mapFile(ap.B[j])
			defer unmap()
			bs[j-u.J0].Data, bErrs[j-u.J0] = data, err
		}
	}
	for i := u.I0; i < u.I1; i++ {
		aIn := funcs.Input{Path: ap.A[i]}
		var aErr error
		if inMemory {
			aIn.Data, aErr = block.data(i)
		}
		j0 := u.J0
		if ap.Symmetric {
			j0 = max(j0, i)
		}
		for j := j0; j < u.J1; j++ {
			if ctx.Err() != nil {
				return
			}
			if ap.Done != nil && ap.Done(i, j) {
				continue
			}
			if err := cmp.Or(aErr, bErrs[j-u.J0]); err != nil {
				out.add(CellResult{I: i, J: j, Err: err})
				continue
			}
			v, err := ap.Func.Call(ctx, aIn, bs[j-u.J0])
			if ctx.Err() != nil {
				return // the call was cut short; it is not a result
			}
			out.add(CellResult{I: i, J: j, Value: v, Err: err})
		}
	}
}

// mappedBlock is a block of A's files mapped into memory.
type mappedBlock struct {
	i0    int
	files [][]byte
	errs  []error
	undo  []func()
}

func mapBlock(paths []string, i0, i1 int) *mappedBlock {
	b := &mappedBlock{i0: i0, files: make([][]byte, i1-i0), errs: make([]error, i1-i0), undo: make([]func(), i1-i0)}
	for i := i0; i < i1; i++ {
		b.files[i-i0], b.undo[i-i0], b.errs[i-i0] = mapFile(paths[i])
	}
	return b
}

func (b *mappedBlock) data(i int) ([]byte, error) {
	return b.files[i-b.i0], b.errs[i-b.i0]
}

func (b *mappedBlock) unmap() {
	if b == nil {
		return
	}
	for _, u := range b.undo {
		u()
	}
}

func noop() {}

// fileSizes returns the sizes of files, with 0 for any it cannot stat (a
// later read reports the error for the cells that need it).
func fileSizes(paths []string) []int64 {
	sizes := make([]int64, len(paths))
	for i, p := range paths {
		if st, err := os.Stat(p); err == nil {
			sizes[i] = st.Size()
		}
	}
	return sizes
}

// mapFile maps a file read-only. An empty file maps to an empty slice.
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, noop, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, noop, err
	}
	if st.Size() == 0 {
		return []byte{}, noop, nil
	}
	m, err := mmap.Map(f, mmap.RDONLY, 0)
	if err != nil {
		return nil, noop, fmt.Errorf("map %s: %w", path, err)
	}
	return m, func() { m.Unmap() }, nil
}
