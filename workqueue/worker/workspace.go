package worker

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// A session's workspace holds the cache (directories "cache" and "shared")
// and, in the directory "tasks", one sandbox per task. A sandbox is new
// (made for its task, or made empty ahead of it) and put in the trash
// (directory "trash") when the task ends, never reused, so that nothing a
// task leaves behind (a file, a symbolic link, a process still writing to
// its directory) meets a later task. Sandboxes have unguessable names,
// and "tasks" and "trash" are directories their owner may search but not
// list (mode 0311), so that a task that does not run as root does not find
// the others by listing "..".
const boxesMode = 0o311

// openWorkspace makes the session's cache, sandbox parent and trash.
func (s *session) openWorkspace() error {
	ws := s.w.workspace
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
			for _, d := range dirs[:i] {
				d.Close()
			}
			return fmt.Errorf("creating sandboxes: %w", err)
		}
	}
	bin := &trash{dir: dirs[1], log: s.log}
	files, err := newCache(ws, bin, s.log)
	if err != nil {
		dirs[0].Close()
		dirs[1].Close()
		return fmt.Errorf("creating cache: %w", err)
	}
	s.files = files
	s.trash = bin
	s.boxes = &sandboxes{dir: dirs[0], trash: bin, log: s.log, spare: int(wholeCores(s.w.res.cores))}
	return nil
}

// sandboxes makes task directories and puts finished ones in the trash. A
// new directory costs tens of microseconds to a millisecond on ext4, so it
// keeps a few made ahead, by a task that has just reported, for the next
// tasks.
type sandboxes struct {
	dir   *os.File // "tasks"
	trash *trash
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

// done puts a finished task's sandbox in the trash, once its processes
// are dead, and makes one ahead for a later task.
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

// dispose moves a sandbox from "tasks" to the trash.
func (b *sandboxes) dispose(sb *os.File) {
	// Its outputs went to the cache: it is usually empty. (From the
	// start: take read a spare to its end.)
	var left []string
	if _, err := sb.Seek(0, io.SeekStart); err == nil {
		left, _ = sb.Readdirnames(1)
	}
	sb.Close()
	name := filepath.Base(sb.Name())
	if err := b.trash.put(b.dir, name, len(left) == 0); err != nil {
		b.log.Warn("removing sandbox", "dir", sb.Name(), "err", err)
	}
}

// close closes what it holds; the directories go with the workspace.
func (b *sandboxes) close() {
	for _, sb := range b.spares {
		sb.Close()
	}
	b.dir.Close()
	b.trash.dir.Close()
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
