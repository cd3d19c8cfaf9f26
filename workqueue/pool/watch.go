package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/fsnotify/fsnotify"
)

// MaxPolicySize bounds a policy file: a few lines are all a policy needs,
// and a file that grows without end is not read to its end.
const MaxPolicySize = 1 << 20

// ReadPolicy reads and checks the policy file at path. It reads only a
// regular file (a symbolic link to one is followed), of at most
// MaxPolicySize bytes: a FIFO, a device or a directory put in the
// policy's place is refused at once, without waiting for a writer or
// reading without end.
func ReadPolicy(path string) (*Policy, error) {
	// Non-blocking, so that opening a FIFO does not wait for a writer;
	// it changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, info.Mode().Type())
	}
	// Read to one byte past the bound, not by the size Stat gave: the
	// file may grow while it is read.
	b, err := io.ReadAll(io.LimitReader(f, MaxPolicySize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxPolicySize {
		return nil, fmt.Errorf("%s: more than a policy's %d bytes", path, MaxPolicySize)
	}
	return ParsePolicy(bytes.NewReader(b), path)
}

// A PolicyWatcher reads a policy file again whenever it changes.
type PolicyWatcher struct {
	w    *fsnotify.Watcher
	path string
	dir  string // the directory watched
}

// WatchPolicy starts watching the policy file at path — written in place,
// or replaced as editors do: its directory is watched, so that a file
// replaced by a rename is still seen. Changes made once it has returned
// are seen; call Run to hear of them.
func WatchPolicy(path string) (*PolicyWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	dir := filepath.Dir(filepath.Clean(path))
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	return &PolicyWatcher{w: w, path: path, dir: dir}, nil
}

// Run reads the file again at each change until ctx ends, and calls
// loaded with the new policy, or with the error that keeps the last good
// one. It returns ctx's error, or an error if the watch fails; the watch
// ends with it.
func (pw *PolicyWatcher) Run(ctx context.Context, loaded func(*Policy, error)) error {
	defer pw.w.Close()
	name := filepath.Base(pw.path)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err, ok := <-pw.w.Errors:
			if !ok {
				return errors.New("watching " + pw.path + ": watcher closed")
			}
			loaded(nil, fmt.Errorf("watching %s: %w", pw.path, err))
		case ev, ok := <-pw.w.Events:
			if !ok {
				return errors.New("watching " + pw.path + ": watcher closed")
			}
			if filepath.Clean(ev.Name) == pw.dir && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
				// The watch ends with the directory: say so, once, and
				// keep the last good policy.
				loaded(nil, fmt.Errorf("watching %s: its directory was removed or renamed; the policy is no longer read again", pw.path))
				continue
			}
			if filepath.Base(ev.Name) != name || !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Create) {
				continue
			}
			loaded(ReadPolicy(pw.path))
		}
	}
}
