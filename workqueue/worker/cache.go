package worker

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize/workqueue/wire"
)

// cache holds, by cache name, the files the master sent and the outputs
// tasks made, in one directory of the workspace.
//
// Tasks never get the cache's own files. A cacheable input is placed as a
// hard link to a copy that the tasks needing it share (made once, in the
// directory "shared" of the workspace), so that no input is copied per
// task however large. File modes do not keep a task from writing to a
// shared copy (tasks may run as root), so the cache watches each one
// (inotify): a task that writes to it (a write, or a shared mapping's
// file closed with contents other than the entry's) makes the cache drop
// that copy and give back (forsaken: the master runs it again)
// every task that held it at that moment. From then on that entry is
// copied for each task, so a task that writes to its input runs again
// once, never in a loop, and no task ever reads what another wrote. The
// cache's own file is never touched, so the master need not send it again
// (Debian's CCTools master would not: it knows no cache-invalid). Inputs
// the master does not cache serve one task and are linked as they are.
// Where inotify cannot watch, every input is copied.
//
// What it does not stop: a task that goes looking for the cache by path
// can change an entry (tasks run as the worker's user), and a write
// through a shared memory mapping is seen only when the mapping's file is
// closed and its contents compared with the entry's.
type cache struct {
	dir    *os.File // the entries
	shared *os.File // the copies tasks share, under random names
	ino    int      // inotify descriptor; -1: copy every input
	trash  *trash   // where entries removed or replaced go
	log    *slog.Logger

	mu      sync.Mutex
	copies  map[string]*sharedCopy // by path of the file in the cache
	byEntry map[string][]string    // entry → paths in copies
	byWatch map[int32]*sharedCopy
	written map[string]bool       // entries tasks wrote to: copied for each task
	refused map[string]unix.Errno // outputs not taken in, and why
}

// sharedCopy is a copy of a cached file that tasks hold hard links to.
type sharedCopy struct {
	path, entry string
	file        string // its name in the shared directory; "" once dropped
	holders     map[*placement]bool
}

// placement is what a task holds: the shared copies linked into its
// sandbox.
type placement struct {
	copies   []*sharedCopy
	forsaken string // why the task must be given back, once it must
}

func newCache(ws *os.File, bin *trash, log *slog.Logger) (*cache, error) {
	c := &cache{
		ino: -1, trash: bin, log: log,
		copies: map[string]*sharedCopy{}, byEntry: map[string][]string{}, byWatch: map[int32]*sharedCopy{},
		written: map[string]bool{}, refused: map[string]unix.Errno{},
	}
	for _, d := range []struct {
		f    **os.File
		name string
	}{{&c.dir, "cache"}, {&c.shared, "shared"}} {
		if err := unix.Mkdirat(int(ws.Fd()), d.name, 0o700); err != nil && err != unix.EEXIST {
			c.close()
			return nil, &os.PathError{Op: "mkdir", Path: path.Join(ws.Name(), d.name), Err: err}
		}
		f, err := openAt(ws, d.name, dirFlags, 0)
		if err != nil {
			c.close()
			return nil, err
		}
		*d.f = f
	}
	ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		log.Warn("cannot watch files: tasks get a copy of each input", "err", err)
	} else {
		c.ino = ino
	}
	return c, nil
}

func (c *cache) close() {
	if c.ino >= 0 {
		unix.Close(c.ino)
	}
	for _, f := range []*os.File{c.dir, c.shared} {
		if f != nil {
			f.Close()
		}
	}
}

// forget is told that an entry is about to be replaced or removed.
func (c *cache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.byEntry[name] {
		if sc := c.copies[p]; sc != nil {
			c.dropLocked(sc)
		}
	}
	delete(c.byEntry, name)
	delete(c.refused, name)
}

// dropLocked removes a shared copy; the tasks holding it keep their links.
func (c *cache) dropLocked(sc *sharedCopy) {
	if sc.file != "" {
		unix.Unlinkat(int(c.shared.Fd()), sc.file, 0)
		sc.file = ""
	}
	if c.copies[sc.path] == sc {
		delete(c.copies, sc.path)
	}
}

// remove removes an entry (to the trash).
func (c *cache) remove(name string) error {
	c.forget(name)
	return c.trash.put(c.dir, name, false)
}

// store moves src (in dir) to the entry name, replacing whatever is there.
func (c *cache) store(dir *os.File, src, name string) error {
	c.forget(name)
	from, to := int(dir.Fd()), int(c.dir.Fd())
	err := unix.Renameat(from, src, to, name)
	if err == unix.EEXIST || err == unix.ENOTEMPTY || err == unix.EISDIR || err == unix.ENOTDIR {
		if err = c.trash.put(c.dir, name, false); err == nil {
			err = unix.Renameat(from, src, to, name)
		}
	}
	if err != nil {
		return &os.PathError{Op: "rename", Path: name, Err: err}
	}
	return nil
}

// refusedErrno says why an output was not taken into the cache.
func (c *cache) refusedErrno(name string) (unix.Errno, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	en, ok := c.refused[name]
	return en, ok
}

// syncLocked reads the watch events: a shared copy written to is dropped,
// and the tasks that hold it marked.
func (c *cache) syncLocked() {
	if c.ino < 0 {
		return
	}
	var buf [4096]byte
	for {
		n, err := unix.Read(c.ino, buf[:])
		if err != nil || n <= 0 {
			return // EAGAIN: nothing more
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
			switch {
			case mask&unix.IN_Q_OVERFLOW != 0:
				// Events were lost: assume every copy was written to,
				// without blaming an entry.
				for _, sc := range c.byWatch {
					c.forsakeLocked(sc)
					c.dropLocked(sc)
				}
			case mask&unix.IN_IGNORED != 0:
				delete(c.byWatch, wd) // the file is gone
			default:
				sc := c.byWatch[wd]
				if sc != nil && mask&unix.IN_MODIFY == 0 && sc.file != "" && c.unchangedLocked(sc) {
					// Closed after being opened for writing, but not
					// written: a task that opened it so, or the copy's
					// own descriptor, which a process forked while it
					// was being made held until its exec.
					continue
				}
				if sc != nil {
					c.forsakeLocked(sc)
					if sc.file != "" {
						c.log.Info("a task wrote to a cached input: the tasks holding it run again, and each task gets a copy of it from now on", "name", sc.entry)
						c.written[sc.entry] = true
						c.dropLocked(sc)
					}
				}
			}
		}
	}
}

// unchangedLocked reports whether the shared copy still holds what its
// cache entry holds. It reads both, but only after a close with no write
// seen, which a write through a shared mapping also ends in: such a write
// need not change the file's size or time.
func (c *cache) unchangedLocked(sc *sharedCopy) bool {
	cp, err := openAt(c.shared, sc.file, unix.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer cp.Close()
	entry, err := openAt(c.dir, sc.path, unix.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer entry.Close()
	return sameContents(cp, entry)
}

func (c *cache) forsakeLocked(sc *sharedCopy) {
	for p := range sc.holders {
		if p.forsaken == "" {
			p.forsaken = "a cached input (" + sc.entry + ") was written to while the task ran"
		}
	}
}

// release ends a task's hold on the cache and says whether (and why) the
// task must be given back. Call it once the task's processes are dead.
func (c *cache) release(p *placement) (forsaken string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked()
	for _, sc := range p.copies {
		delete(sc.holders, p)
	}
	return p.forsaken
}

// place puts the cached entry in.CacheName at in.Remote in the sandbox.
func (c *cache) place(p *placement, sandbox *os.File, in wire.TaskFile) error {
	c.mu.Lock()
	c.syncLocked()
	c.mu.Unlock()
	dir, base := split(in.Remote)
	parent := sandbox
	if dir != "" {
		var err error
		if parent, err = openDir(sandbox, dir, true); err != nil {
			return err
		}
		defer parent.Close()
	}
	pl := placing{c: c, p: p, entry: in.CacheName, share: in.Flags&wire.FlagCache != 0}
	return pl.item(c.dir, in.CacheName, in.CacheName, parent, base, 0)
}

// placing is one input being placed.
type placing struct {
	c     *cache
	p     *placement
	entry string
	share bool // cacheable: other tasks read it too
}

// item places src (in srcDir, at path in the cache) as dst (in dstDir):
// files linked or copied, directories made and filled, symbolic links
// copied as links.
func (pl placing) item(srcDir *os.File, src, at string, dstDir *os.File, dst string, depth int) error {
	st, err := lstatAt(srcDir, src)
	if err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, err := openAt(srcDir, src, unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		return pl.file(f, at, dstDir, dst, st.Mode&0o7777)
	case unix.S_IFLNK:
		target := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(int(srcDir.Fd()), src, target)
		if err != nil {
			return &os.PathError{Op: "readlink", Path: at, Err: err}
		}
		if err := unix.Symlinkat(string(target[:n]), int(dstDir.Fd()), dst); err != nil {
			return &os.PathError{Op: "symlink", Path: dst, Err: err}
		}
		return nil
	case unix.S_IFDIR:
		if depth >= wire.MaxDirDepth {
			return fmt.Errorf("%s: directories nested more than %d deep", at, wire.MaxDirDepth)
		}
		from, err := openAt(srcDir, src, dirFlags, 0)
		if err != nil {
			return err
		}
		defer from.Close()
		to, err := openDir(dstDir, dst, true)
		if err != nil {
			return err
		}
		defer to.Close()
		list, err := names(from)
		if err != nil {
			return err
		}
		for _, n := range list {
			if err := pl.item(from, n, at+"/"+n, to, n, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: not a regular file, directory or symbolic link", at)
}

// file places the open cached file f (at path at in the cache).
func (pl placing) file(f *os.File, at string, dstDir *os.File, dst string, perm uint32) error {
	c := pl.c
	if !pl.share {
		// It serves this task only: link it as it is.
		self := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
		if err := unix.Linkat(unix.AT_FDCWD, self, int(dstDir.Fd()), dst, unix.AT_SYMLINK_FOLLOW); err == nil {
			return nil
		}
		return copyAt(f, dstDir, dst, perm)
	}
	c.mu.Lock()
	sc := c.copies[at]
	each := c.ino < 0 || c.written[pl.entry]
	c.mu.Unlock()
	if each {
		return copyAt(f, dstDir, dst, perm)
	}
	if sc == nil {
		var err error
		if sc, err = c.share(f, at, pl.entry, perm); err != nil {
			c.log.Debug("cannot share a cached file: copying it", "name", at, "err", err)
			return copyAt(f, dstDir, dst, perm)
		}
	}
	// Held before it is linked, so that a write from now on reaches p.
	c.mu.Lock()
	file := sc.file
	if file != "" {
		sc.holders[pl.p] = true
		pl.p.copies = append(pl.p.copies, sc)
	}
	c.mu.Unlock()
	if file != "" && unix.Linkat(int(c.shared.Fd()), file, int(dstDir.Fd()), dst, 0) == nil {
		return nil
	}
	return copyAt(f, dstDir, dst, perm) // dropped meanwhile
}

// share makes the shared copy of the cached file f, watched.
func (c *cache) share(f *os.File, at, entry string, perm uint32) (*sharedCopy, error) {
	name := randomName()
	if err := copyAt(f, c.shared, name, perm); err != nil {
		return nil, err
	}
	// Watched once written and closed, so that making it is no event.
	cp, err := openAt(c.shared, name, unix.O_RDONLY, 0)
	var wd int
	if err == nil {
		wd, err = unix.InotifyAddWatch(c.ino, "/proc/self/fd/"+strconv.Itoa(int(cp.Fd())), unix.IN_MODIFY|unix.IN_CLOSE_WRITE)
		cp.Close()
	}
	if err != nil {
		unix.Unlinkat(int(c.shared.Fd()), name, 0)
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if other := c.copies[at]; other != nil { // made meanwhile by another task
		unix.Unlinkat(int(c.shared.Fd()), name, 0)
		return other, nil
	}
	sc := &sharedCopy{path: at, entry: entry, file: name, holders: map[*placement]bool{}}
	c.copies[at] = sc
	c.byEntry[entry] = append(c.byEntry[entry], at)
	c.byWatch[int32(wd)] = sc
	return sc, nil
}

// collect moves a finished task's output into the cache, where get finds
// it, replacing what an earlier task left under its name. A missing output
// is left missing. An output reached through a symbolic link is not taken
// (get says so); one that is a link stays one (get refuses it); a file that
// has other hard links (an input, or a file outside the sandbox) is
// copied, so that an entry never shares its file.
func (c *cache) collect(sandbox *os.File, out wire.TaskFile) error {
	name := out.CacheName
	dir, base := split(out.Remote)
	parent := sandbox
	if dir != "" {
		var err error
		if parent, err = openDir(sandbox, dir, false); err != nil {
			rerr := c.remove(name)
			if en := errnoOf(err); en == unix.ELOOP || en == unix.ENOTDIR {
				c.mu.Lock()
				c.refused[name] = unix.ELOOP
				c.mu.Unlock()
			}
			return rerr
		}
		defer parent.Close()
	}
	st, err := lstatAt(parent, base)
	if err != nil {
		return c.remove(name) // not produced
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 {
		return c.store(parent, base, name)
	}
	tmp := ".collect-" + randomName()
	if err := unix.Renameat(int(parent.Fd()), base, int(c.dir.Fd()), tmp); err != nil {
		return &os.PathError{Op: "rename", Path: out.Remote, Err: err}
	}
	if err := unshare(c.dir, tmp, 0); err != nil {
		removeAt(c.dir, tmp)
		return err
	}
	if err := c.store(c.dir, tmp, name); err != nil {
		removeAt(c.dir, tmp)
		return err
	}
	return nil
}

// unshare replaces each file below name that has other hard links by a
// copy of its own.
func unshare(dir *os.File, name string, depth int) error {
	st, err := lstatAt(dir, name)
	if err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Nlink <= 1 {
			return nil
		}
		f, err := openAt(dir, name, unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		tmp := ".copy-" + randomName()
		if err := copyAt(f, dir, tmp, st.Mode&0o7777); err != nil {
			return err
		}
		if err := unix.Renameat(int(dir.Fd()), tmp, int(dir.Fd()), name); err != nil {
			return &os.PathError{Op: "rename", Path: name, Err: err}
		}
	case unix.S_IFDIR:
		if depth >= wire.MaxDirDepth {
			return nil // too deep to be sent anyway
		}
		sub, err := openAt(dir, name, dirFlags, 0)
		if err != nil {
			return err
		}
		defer sub.Close()
		list, err := names(sub)
		if err != nil {
			return err
		}
		for _, n := range list {
			if err := unshare(sub, n, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
