package multicore

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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
	// libraries) get the inputs' contents, read into buffers the run uses
	// again (mapped, for items over 16 MiB); programs get their paths. The
	// contents are valid only during the call. A function that computes
	// blocks of cells (a funcs.BlockPair, such as builtin:bytediff) is
	// given a few rows of A and a tile's columns at a time, the rows over
	// 256 KiB mapped rather than copied.
	Func funcs.Pair
	// Cores is how many calls run at once; zero means
	// runtime.GOMAXPROCS(0), the processors this process may use.
	Cores int
	// BlockSize is how many rows of A are taken together, B's items read
	// once for each block (see Plan); zero means all of the region's rows.
	// Memory does not depend on it: a core holds one item of A at a time.
	BlockSize int
	// Region selects the cells to compute; the zero Region means all of
	// them.
	Region Region
	// Symmetric computes only cells with I <= J (A and B the same set).
	Symmetric bool
	// CacheBytes is how many bytes of B items a tile of units may hold, so
	// that they stay in the processor's cache while A's rows pass them; zero
	// means half of this machine's last-level cache, negative means one item
	// of B per tile. The cores working on a tile share one copy of its
	// items, so it is also the memory B takes.
	CacheBytes int64
	// BSizes are the sizes of B's items, if the caller knows them; otherwise
	// Run looks them up.
	BSizes []int64
	// Done reports the cells an earlier run computed (a checkpoint); they
	// are skipped, and an item that only they need is not read.
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
		cores = runtime.GOMAXPROCS(0)
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
	var block funcs.BlockPair
	if inMemory {
		block, _ = ap.Func.(funcs.BlockPair)
	}

	// The whole run's units, in the plan's order, each with the tile of B
	// items it shares with the units next to it. The cores take them in
	// that order: there is no barrier at a block's end, since no core holds
	// a block for the others.
	type work struct {
		Unit
		tile *tile // nil for programs, which read their own inputs
	}
	var todo []work
	var last *tile
	for b := range plan.Blocks() {
		for _, u := range plan.Units(b) {
			if ap.Done != nil && ap.unitDone(u) {
				continue
			}
			w := work{Unit: u}
			if inMemory {
				if last == nil || last.j0 != u.J0 || len(last.items) != u.J1-u.J0 {
					last = &tile{j0: u.J0, items: make([]tileItem, u.J1-u.J0)}
				}
				last.users.Add(1)
				w.tile = last
			}
			todo = append(todo, w)
		}
	}

	var (
		wg     sync.WaitGroup
		emitMu sync.Mutex
		next   atomic.Int64
		bufs   buffers
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
	for range min(cores, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &core{ap: ap, block: block, bufs: &bufs, out: &batcher{emit: emit, every: batch}}
			for {
				k := int(next.Add(1)) - 1
				if k >= len(todo) || ctx.Err() != nil {
					return
				}
				w := todo[k]
				started := time.Now()
				c.runUnit(ctx, w.Unit, w.tile)
				c.out.flush()
				if w.tile != nil {
					w.tile.done(&bufs)
				}
				if ap.Timed != nil && ctx.Err() == nil {
					ap.Timed(w.Unit, started, time.Now())
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
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

// blockRows is how many rows of A a core compares with a tile's columns in
// one block call (funcs.BlockPair): the call reads each section of B's items
// from the cache once for all of them. With 1 MiB items and a tile of 10,
// 4 rows ran 0–6% faster than 2 or 8 and 9–10% faster than 1.
const blockRows = 4

// core is one worker of a run: it computes a unit at a time, reading the
// unit's rows of A into buffers of its own, used again for every row.
type core struct {
	ap    *AllPairs
	block funcs.BlockPair // ap.Func, if it computes blocks of cells
	bufs  *buffers
	out   *batcher
	rows  [blockRows][]byte // the buffers A's items are read into
	// A block call's inputs and results, used again for every call.
	aIns, bIns []funcs.Input
	values     [][]byte
}

// rowBuffer returns the core's k-th buffer for an item of A, grown to n
// bytes.
func (c *core) rowBuffer(k int) func(n int) []byte {
	return func(n int) []byte {
		if cap(c.rows[k]) < n {
			c.rows[k] = make([]byte, n)
		}
		return c.rows[k][:n]
	}
}

// runUnit computes the cells of one unit that are not done, passing each to
// c.out. An in-memory function gets B's items from t, read by whichever
// core needs one first, and A's from c's row buffers; an item is read only
// if a cell that is not done needs it. A function that computes blocks of
// cells gets blockRows rows at a time.
func (c *core) runUnit(ctx context.Context, u Unit, t *tile) {
	step := 1
	if c.block != nil && t != nil {
		step = blockRows
	}
	for i0 := u.I0; i0 < u.I1; i0 += step {
		i1 := min(i0+step, u.I1)
		if step > 1 && c.runBlock(ctx, u, i0, i1, t) {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		for i := i0; i < i1; i++ {
			if !c.runRow(ctx, i, c.firstColumn(u, i), u.J1, t) {
				return
			}
		}
	}
}

// firstColumn is the first column of unit u that row i computes.
func (c *core) firstColumn(u Unit, i int) int {
	if c.ap.Symmetric {
		return max(u.J0, i)
	}
	return u.J0
}

// runBlock computes rows i0..i1-1 of unit u with one block call over the
// columns all of them compute, j0..J1-1 (in a symmetric run, a row's cells
// left of j0 are computed one by one first). It returns false, having
// computed nothing, when the rows are better done one by one: some of their
// cells are done (so that an item only done cells need is not read), or an
// item cannot be read (so that each cell gets its own error).
func (c *core) runBlock(ctx context.Context, u Unit, i0, i1 int, t *tile) bool {
	ap := c.ap
	j0 := c.firstColumn(u, i1-1)
	if j0 >= u.J1 || (ap.Done != nil && c.anyDone(u, i0, i1)) {
		return false
	}
	var rows [blockRows]item
	defer func() {
		for k := range rows {
			rows[k].drop(nil) // a mapped row is unmapped; buffers are the core's
		}
	}()
	c.aIns, c.bIns = c.aIns[:0], c.bIns[:0]
	for i := i0; i < i1; i++ {
		row := &rows[i-i0]
		if row.load(ap.A[i], c.rowBuffer(i-i0), blockMapAbove) != nil {
			return false
		}
		c.aIns = append(c.aIns, funcs.Input{Path: ap.A[i], Data: row.data})
	}
	for j := j0; j < u.J1; j++ {
		data, err := t.get(j, ap.B[j], c.bufs)
		if err != nil {
			return false
		}
		c.bIns = append(c.bIns, funcs.Input{Path: ap.B[j], Data: data})
	}
	for i := i0; i < i1; i++ {
		for j := c.firstColumn(u, i); j < j0; j++ {
			data, err := t.get(j, ap.B[j], c.bufs)
			if !c.cell(ctx, i, j, c.aIns[i-i0], funcs.Input{Path: ap.B[j], Data: data}, err) {
				return true
			}
		}
	}
	n := len(c.aIns) * len(c.bIns)
	c.values = slices.Grow(c.values[:0], n)[:n]
	err := c.block.CallBlock(ctx, c.aIns, c.bIns, c.values)
	if ctx.Err() != nil {
		return true // the call was cut short; its cells are not results
	}
	for k, v := range c.values {
		c.out.add(CellResult{I: i0 + k/len(c.bIns), J: j0 + k%len(c.bIns), Value: v, Err: err})
	}
	clear(c.values) // the values are the receiver's now
	return true
}

// anyDone reports whether any cell of rows i0..i1-1 of unit u is done.
func (c *core) anyDone(u Unit, i0, i1 int) bool {
	for i := i0; i < i1; i++ {
		for j := c.firstColumn(u, i); j < u.J1; j++ {
			if c.ap.Done(i, j) {
				return true
			}
		}
	}
	return false
}

// runRow computes the cells of row i in columns j0..j1-1 that are not done,
// returning false if ctx was cancelled.
func (c *core) runRow(ctx context.Context, i, j0, j1 int, t *tile) bool {
	ap := c.ap
	aIn := funcs.Input{Path: ap.A[i]}
	var (
		row    item
		aErr   error
		loaded = t == nil // programs read their own inputs
	)
	// A mapped row is unmapped when the row is done; the buffer is the
	// core's, for the next row.
	defer row.drop(nil)
	for j := j0; j < j1; j++ {
		if ctx.Err() != nil {
			return false
		}
		if ap.Done != nil && ap.Done(i, j) {
			continue
		}
		if !loaded {
			aErr = row.load(ap.A[i], c.rowBuffer(0), mapAbove)
			aIn.Data, loaded = row.data, true
		}
		bIn := funcs.Input{Path: ap.B[j]}
		var bErr error
		if t != nil {
			bIn.Data, bErr = t.get(j, ap.B[j], c.bufs)
		}
		if !c.cell(ctx, i, j, aIn, bIn, cmp.Or(aErr, bErr)) {
			return false
		}
	}
	return true
}

// cell computes cell (i, j) from its inputs, or fails it with inErr, the
// error reading one of them. It returns false if ctx was cancelled: a call
// cut short is not a result.
func (c *core) cell(ctx context.Context, i, j int, a, b funcs.Input, inErr error) bool {
	if inErr != nil {
		c.out.add(CellResult{I: i, J: j, Err: inErr})
		return true
	}
	v, err := c.ap.Func.Call(ctx, a, b)
	if ctx.Err() != nil {
		return false
	}
	c.out.add(CellResult{I: i, J: j, Value: v, Err: err})
	return true
}

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
