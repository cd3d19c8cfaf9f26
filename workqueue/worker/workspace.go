package worker

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// A session's workspace holds the cache (directories "cache" and "shared")
// and, in the directory "tasks", one sandbox per task. A sandbox is new
// (made for its task, or made empty ahead of it) and removed when the task
// ends, never reused, so that nothing a task leaves behind (a file, a
// symbolic link, a process still writing to its directory) meets a later
// task. Sandboxes have unguessable names, and "tasks" is a directory its
// owner may search but not list (mode 0311), so that a task that does not
// run as root does not find the others by listing "..".
const boxesMode = 0o311

// openWorkspace makes the session's cache and sandbox parent.
func (s *session) openWorkspace() error {
	ws := s.w.workspace
	files, err := newCache(ws, s.log)
	if err != nil {
		return fmt.Errorf("creating cache: %w", err)
	}
	if err := unix.Mkdirat(int(ws.Fd()), "tasks", boxesMode); err != nil && err != unix.EEXIST {
		files.close()
		return fmt.Errorf("creating sandboxes: %w", err)
	}
	// O_PATH: a directory that may not be listed cannot be opened for
	// reading, but the *at calls work from a path descriptor.
	dir, err := openAt(ws, "tasks", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		files.close()
		return fmt.Errorf("opening sandboxes: %w", err)
	}
	s.files = files
	s.boxes = &sandboxes{dir: dir, log: s.log, spare: int(wholeCores(s.w.res.cores))}
	return nil
}

// sandboxes makes and removes task directories. A new directory costs
// about a millisecond on ext4, so it keeps a few made ahead, by a task
// that has just reported, for the next tasks.
type sandboxes struct {
	dir   *os.File
	log   *slog.Logger
	spare int // how many to keep made ahead

	mu     sync.Mutex
	spares []*os.File
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
		b.remove(sb) // something put there meanwhile: not new
	}
}

func (b *sandboxes) make() (*os.File, error) {
	name := randomName()
	if err := unix.Mkdirat(int(b.dir.Fd()), name, 0o700); err != nil {
		return nil, fmt.Errorf("creating sandbox: %w", &os.PathError{Op: "mkdir", Path: name, Err: err})
	}
	return openAt(b.dir, name, dirFlags, 0)
}

// done removes a finished task's sandbox, once its processes are dead, and
// makes one ahead for a later task.
func (b *sandboxes) done(sb *os.File) {
	b.remove(sb)
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

func (b *sandboxes) remove(sb *os.File) {
	sb.Close()
	name := filepath.Base(sb.Name())
	err := removeDirAt(b.dir, name)
	if err != nil {
		// A process that escaped the task's process group may still be
		// writing there; try once more, then leave it to the end of the
		// session.
		err = removeDirAt(b.dir, name)
	}
	if err != nil {
		b.log.Warn("removing sandbox", "dir", sb.Name(), "err", err)
	}
}

// close closes what it holds; the directories go with the workspace.
func (b *sandboxes) close() {
	for _, sb := range b.spares {
		sb.Close()
	}
	b.dir.Close()
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
