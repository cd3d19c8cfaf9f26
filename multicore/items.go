package multicore

import (
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// mapAbove is the size above which an item is mapped rather than read into
// a buffer. A small item is read with one pread into a buffer that is used
// again for the next item, so that no call maps or unmaps memory: an munmap
// in a process whose threads run on other cores makes the kernel flush their
// TLBs, which cost a Work Queue hybrid run of 100 KB items, mapped once per
// unit, 27 s of system time in 66. A big item is mapped: its copy would
// double its memory and the page cache already holds it, and the unmap is
// paid once for a call long enough to hide it.
const mapAbove = 16 << 20

// blockMapAbove is mapAbove for the rows of A that a block call (see
// funcs.BlockPair) compares section by section. Such a call reads each
// section of a row from memory once for the whole block; a row read into a
// buffer first is read from memory twice and written once, which for 1 MiB
// items made a run 32–40% slower. The unmap, once per row and tile, costs
// little beside 10 cells of 1 MiB (within noise of mapping each row once
// per run); below 256 KiB a row is read, since its copy stays in the L2
// cache and unmaps would come more often.
const blockMapAbove = 256 << 10

// item is one input file in memory: read into a buffer, or mapped.
type item struct {
	data   []byte
	mapped bool
}

// load reads the file at path into a buffer from get (with at least the
// file's size), or maps it if it is bigger than mapOver bytes. An empty
// file is an empty, non-nil slice. A file that shrinks while it is read is
// cut where it ends; one that grows is read to the size it had when opened.
func (it *item) load(path string, get func(n int) []byte, mapOver int64) error {
	fd, err := openRetry(path)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	size := st.Size
	switch {
	case size <= 0:
		it.data = []byte{}
		return nil
	case size > mapOver:
		m, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return &os.PathError{Op: "mmap", Path: path, Err: err}
		}
		it.data, it.mapped = m, true
		return nil
	}
	buf := get(int(size))
	n := 0
	for n < len(buf) {
		k, err := unix.Pread(fd, buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "read", Path: path, Err: err}
		}
		if k == 0 {
			break
		}
		n += k
	}
	it.data = buf[:n]
	return nil
}

// drop lets go of the item's memory: a mapping is unmapped, a buffer given
// to put (if not nil).
func (it *item) drop(put func([]byte)) {
	switch {
	case it.mapped:
		unix.Munmap(it.data)
	case put != nil && cap(it.data) > 0:
		put(it.data)
	}
	*it = item{}
}

func openRetry(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// buffers is a run's free list of item buffers, so that a tile's items are
// read into the memory the previous tile's were.
type buffers struct {
	mu   sync.Mutex
	free [][]byte
}

// get returns a buffer of length n: the smallest free one that is big
// enough, or a new one. When none is big enough, the biggest free one is
// dropped (left to the garbage collector), so that items of growing sizes
// do not pile up buffers that fit none of them.
func (b *buffers) get(n int) []byte {
	b.mu.Lock()
	best, biggest := -1, -1
	for i, f := range b.free {
		if cap(f) >= n && (best < 0 || cap(f) < cap(b.free[best])) {
			best = i
		}
		if biggest < 0 || cap(f) > cap(b.free[biggest]) {
			biggest = i
		}
	}
	take := best
	if take < 0 {
		take = biggest
	}
	var buf []byte
	if take >= 0 {
		buf = b.free[take]
		last := len(b.free) - 1
		b.free[take] = b.free[last]
		b.free[last] = nil
		b.free = b.free[:last]
	}
	b.mu.Unlock()
	if best < 0 {
		return make([]byte, n)
	}
	return buf[:n]
}

func (b *buffers) put(buf []byte) {
	b.mu.Lock()
	b.free = append(b.free, buf[:0])
	b.mu.Unlock()
}

// tile holds the B items of a run of units that share their columns: each
// item is read once, by the first core that needs it, and the others use
// the same bytes. Every core's unit of the tile then reads them from the
// same lines of the shared cache, as the cache model assumes; a copy per
// core would fill it that many times over.
type tile struct {
	j0    int
	items []tileItem
	users atomic.Int64 // units not finished
}

type tileItem struct {
	once sync.Once
	item
	err error
}

// get returns B item j, reading it from path the first time.
func (t *tile) get(j int, path string, bufs *buffers) ([]byte, error) {
	it := &t.items[j-t.j0]
	it.once.Do(func() { it.err = it.load(path, bufs.get, mapAbove) })
	return it.data, it.err
}

// done ends one unit's use of the tile; the last one gives its buffers back.
func (t *tile) done(bufs *buffers) {
	if t.users.Add(-1) > 0 {
		return
	}
	for i := range t.items {
		t.items[i].drop(bufs.put)
	}
}
