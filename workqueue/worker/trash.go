package worker

import (
	"log/slog"
	"os"
	"path"
	"sync"

	"golang.org/x/sys/unix"
)

// trash holds what the worker is done with — finished sandboxes, cache
// entries the master unlinked — until it is idle, so that a task costs a
// rename (a few microseconds), not a removal. A removal costs more than
// its system calls: on ext4 without a journal every later inode
// allocation in the same block group looks at, and skips, each inode freed
// in the last minute (six while its inode table block is not written
// back), so a worker that freed two inodes a task made each file that its
// tasks, and a master beside it, created cost 100-200 µs more
// (bench/RESULTS.md). The trash is
// emptied when the worker is idle, when it holds trashEntries entries,
// trashFull non-empty sandboxes or directories, or trashBytes bytes of
// files, and at the end of the session (cleanWorkspace).
type trash struct {
	dir *os.File // the directory "trash" (O_PATH)
	log *slog.Logger

	mu    sync.Mutex
	names []string
	full  int   // entries that are not empty directories or files
	bytes int64 // bytes of the files among them
}

// The trash's bounds: empty directories and small files cost an inode
// and a block each (4096 of them: 16 MiB); bigger or unknown ones are
// emptied sooner.
const (
	trashEntries = 4096
	trashFull    = 8
	trashBytes   = 64 << 20
)

// put moves name, in dir, to the trash; empty says it is an empty
// directory, whose size is then not looked up. A name that is not there
// is no error; one that cannot be moved is removed where it is.
func (t *trash) put(dir *os.File, name string, empty bool) error {
	to := randomName()
	if err := unix.Renameat(int(dir.Fd()), name, int(t.dir.Fd()), to); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return removeAt(dir, name)
	}
	full, size := false, int64(0)
	if !empty {
		st, err := lstatAt(t.dir, to)
		switch {
		case err != nil:
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			full = true // a directory's size is its tree's
		default:
			size = st.Size
		}
	}
	t.mu.Lock()
	t.names = append(t.names, to)
	if full {
		t.full++
	}
	t.bytes += size
	sweep := len(t.names) >= trashEntries || t.full >= trashFull || t.bytes >= trashBytes
	t.mu.Unlock()
	if sweep {
		t.sweep()
	}
	return nil
}

// sweep empties the trash.
func (t *trash) sweep() {
	t.mu.Lock()
	list := t.names
	t.names, t.full, t.bytes = nil, 0, 0
	t.mu.Unlock()
	for _, name := range list {
		err := removeAt(t.dir, name)
		if err != nil {
			// A process that escaped its task's process group may still
			// be writing there; try once more, then leave it to the end
			// of the session.
			err = removeAt(t.dir, name)
		}
		if err != nil {
			t.log.Warn("emptying the trash", "name", path.Join(t.dir.Name(), name), "err", err)
		}
	}
}
