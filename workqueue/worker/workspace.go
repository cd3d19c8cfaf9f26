package worker

import (
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// A session's workspace holds the cache (directories "cache" and "shared")
// and, in the directory "tasks", one sandbox per task. A sandbox is new
// (made for its task, or made empty ahead of it) and disposed of when the
// task ends, never reused, so that nothing a task leaves behind (a file, a
// symbolic link, a process still writing to its directory) meets a later
// task. Sandboxes have unguessable names, and "tasks" is a directory its
// owner may search but not list (mode 0311), so that a task that does not
// run as root does not find the others by listing "..". The directory
// "trash" (mode 0311 too) holds finished sandboxes that were not empty,
// until they are removed.
const boxesMode = 0o311

// trashLimit is how many finished sandboxes the trash holds before the
// task that fills it empties it.
const trashLimit = 64

// openWorkspace makes the session's cache, sandbox parent and trash.
func (s *session) openWorkspace() error {
	ws := s.w.workspace
	files, err := newCache(ws, s.log)
	if err != nil {
		return fmt.Errorf("creating cache: %w", err)
	}
	var dirs [2]*os.File
	for i, name := range []string{"tasks", "trash"} {
		var err error
		if merr := unix.Mkdirat(int(ws.Fd()), name, boxesMode); merr != nil && merr != unix.EEXIST {
			err = &os.PathError{Op: "mkdir", Path: path.Join(ws.Name(), name), Err: merr}
		} else {
			// O_PATH: a directory that may not be listed cannot be
			// opened for reading, but the *at calls work from a path
			// descriptor.
			dirs[i], err = openAt(ws, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		}
		if err != nil {
			files.close()
			for _, d := range dirs[:i] {
				d.Close()
			}
			return fmt.Errorf("creating sandboxes: %w", err)
		}
	}
	s.files = files
	s.boxes = &sandboxes{dir: dirs[0], trash: dirs[1], log: s.log, spare: int(wholeCores(s.w.res.cores))}
	return nil
}

// sandboxes makes and disposes of task directories. A new directory costs
// about a millisecond on ext4, so it keeps a few made ahead, by a task
// that has just reported, for the next tasks. A finished one costs one
// system call: removed if empty (its outputs went to the cache), else
// moved to the trash, whose recursive removal waits until the worker is
// idle (sweep), the trash is full, or the session ends (cleanWorkspace).
type sandboxes struct {
	dir   *os.File // "tasks"
	trash *os.File // "trash"
	log   *slog.Logger
	spare int // how many to keep made ahead

	mu      sync.Mutex
	spares  []*os.File
	trashed []string // names in the trash
}

// take returns a new, empty sandbox.
func (b *sandboxes) take() (*os.File, error) {
	for {
		b.mu.Lock()
		n := len(b.spares)
		if n == 0 {
			b.mu.Unlock()
			return b.make()
		}
		sb := b.spares[n-1]
		b.spares = b.spares[:n-1]
		b.mu.Unlock()
		if list, err := names(sb); err == nil && len(list) == 0 {
			return sb, nil
		}
		b.dispose(sb) // something put there meanwhile: not new
	}
}

func (b *sandboxes) make() (*os.File, error) {
	name := randomName()
	if err := unix.Mkdirat(int(b.dir.Fd()), name, 0o700); err != nil {
		return nil, fmt.Errorf("creating sandbox: %w", &os.PathError{Op: "mkdir", Path: name, Err: err})
	}
	return openAt(b.dir, name, dirFlags, 0)
}

// done disposes of a finished task's sandbox, once its processes are dead,
// and makes one ahead for a later task.
func (b *sandboxes) done(sb *os.File) {
	b.dispose(sb)
	b.mu.Lock()
	more := len(b.spares) < b.spare
	b.mu.Unlock()
	if !more {
		return
	}
	if sb, err := b.make(); err == nil {
		b.mu.Lock()
		b.spares = append(b.spares, sb)
		b.mu.Unlock()
	}
}

// dispose takes a sandbox out of "tasks": removed if empty, else moved to
// the trash (emptied here once full).
func (b *sandboxes) dispose(sb *os.File) {
	sb.Close()
	name := filepath.Base(sb.Name())
	err := unix.Unlinkat(int(b.dir.Fd()), name, unix.AT_REMOVEDIR)
	if err == nil || err == unix.ENOENT {
		return
	}
	if err := unix.Renameat(int(b.dir.Fd()), name, int(b.trash.Fd()), name); err != nil {
		b.remove(b.dir, name) // where it is
		return
	}
	b.mu.Lock()
	b.trashed = append(b.trashed, name)
	full := len(b.trashed) >= trashLimit
	b.mu.Unlock()
	if full {
		b.sweep()
	}
}

// sweep empties the trash.
func (b *sandboxes) sweep() {
	b.mu.Lock()
	list := b.trashed
	b.trashed = nil
	b.mu.Unlock()
	for _, name := range list {
		b.remove(b.trash, name)
	}
}

// remove removes the sandbox name from dir, with whatever it holds.
func (b *sandboxes) remove(dir *os.File, name string) {
	err := removeDirAt(dir, name)
	if err != nil {
		// A process that escaped the task's process group may still be
		// writing there; try once more, then leave it to the end of the
		// session.
		err = removeDirAt(dir, name)
	}
	if err != nil {
		b.log.Warn("removing sandbox", "dir", path.Join(dir.Name(), name), "err", err)
	}
}

// close closes what it holds; the directories go with the workspace.
func (b *sandboxes) close() {
	for _, sb := range b.spares {
		sb.Close()
	}
	b.dir.Close()
	b.trash.Close()
}

// cleanWorkspace removes everything in a workspace, whatever modes tasks
// (or the sandboxes' parent) left.
func cleanWorkspace(ws *os.File) error {
	dir, err := openAt(ws, ".", dirFlags, 0)
	if err != nil {
		return fmt.Errorf("cleaning workspace: %w", err)
	}
	defer dir.Close()
	list, err := names(dir)
	for _, n := range list {
		if err == nil {
			err = removeAt(dir, n)
		}
	}
	if err != nil {
		return fmt.Errorf("cleaning workspace: %w", err)
	}
	return nil
}
