package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// ReadPolicy reads and checks the policy file at path.
func ReadPolicy(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParsePolicy(f, path)
}

// A PolicyWatcher reads a policy file again whenever it changes.
type PolicyWatcher struct {
	w    *fsnotify.Watcher
	path string
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
	return &PolicyWatcher{w: w, path: path}, nil
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
			if filepath.Base(ev.Name) != name || !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Create) {
				continue
			}
			loaded(ReadPolicy(pw.path))
		}
	}
}
